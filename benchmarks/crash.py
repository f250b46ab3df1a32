"""Crash safety: a process ingesting a session is killed with SIGKILL at random moments.

    python -m benchmarks.crash --kills 300 --out benchmarks/results/crash.json

Each round starts a child (``python -m benchmarks.crash child STORE SESSION SEED``) that
adds messages to one session with a small budget (so demotions, soft compactions and
archive writes are frequent) and prints ``ACK <id>`` after every ``add`` returns. The
child is killed after a few acknowledgements and a random delay; then the session is
reopened and checked:

- every acknowledged message is in the log;
- the context is within the budget and holds no orphan tool message;
- after reconcile (``Memory.flush``) the Chroma collection holds exactly the archive's items;
- the database passes SQLite's ``PRAGMA integrity_check``.

The next round's child continues the same session. The test suite runs 50 rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

BUDGET = 700
STARTUP_SECONDS = 120.0


def child(store: str, session: str, seed: int, count: int | None = None) -> int:
    """The ingesting process: adds messages until killed (or ``count`` adds)."""
    from memos import Memory, MemosSettings

    rng = random.Random(seed)
    mem = Memory(session, store=store, settings=MemosSettings(budget_tokens=BUDGET), tools=[])
    print("READY", flush=True)
    n = 0
    while count is None or n < count:
        n += 1
        tag = f"{seed}-{n}"
        kind = rng.random()
        batch: list[dict[str, Any]]
        if kind < 0.45:
            batch = [{"role": "user", "content": f"Note {tag}: order ORD-{rng.randint(10000, 99999)} ships to desk "
                                                 f"{rng.randint(1, 99)}; never call before 9am."}]
        elif kind < 0.75:
            batch = [{"role": "assistant", "content": f"Understood ({tag}). " + "I will keep that in mind. " * rng.randint(1, 6)}]
        else:
            cid = f"call_{tag}"
            rows = [{"sku": f"SKU-{rng.randint(1000, 9999)}", "note": "x" * rng.randint(10, 80)}
                    for _ in range(rng.randint(2, 12))]
            batch = [{"role": "assistant", "content": None,
                      "tool_calls": [{"id": cid, "type": "function", "function": {"name": "search", "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": cid, "content": json.dumps(rows)}]
        logged = mem.add(batch)
        sys.stdout.write("".join(f"ACK {m.id}\n" for m in logged))
        sys.stdout.flush()
    mem.close()
    print("DONE", flush=True)
    return 0


@dataclass
class CrashReport:
    """What the kill rounds found."""

    rounds: int = 0
    acked: int = 0
    lost: list[str] = field(default_factory=list)
    over_budget: int = 0
    orphan_contexts: int = 0
    index_mismatches: int = 0
    integrity_failures: int = 0
    demotions: int = 0
    soft_compactions: int = 0
    archive_items: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Nothing lost, nothing invalid, the index matching the log after every round."""
        return not (self.lost or self.over_budget or self.orphan_contexts or self.index_mismatches
                    or self.integrity_failures)


class _Lines:
    """A child's stdout lines, read by a thread so the parent can wait with a timeout."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._ended = False
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self._queue.put(line)
        self._queue.put(None)

    def get(self, timeout: float | None = None) -> str | None:
        """The next line; None at the end of the stream or after ``timeout`` seconds."""
        if self._ended:
            return None
        try:
            line = self._queue.get(timeout=timeout)
        except queue.Empty:
            return None
        self._ended = line is None
        return line


def _take_ack(line: str | None, acked: set[str]) -> bool:
    """Note the message id of an ``ACK`` line; False at the end of the stream (or a timeout)."""
    if line is None:
        return False
    if line.startswith("ACK "):
        acked.add(line[4:].strip())
    return True


def _check(store: Path, session: str, acked: set[str], report: CrashReport) -> None:
    from chromadb.api.client import SharedSystemClient
    from sqlalchemy import text

    from memos import Memory, MemosSettings
    from memos.core.sections import find_orphans

    SharedSystemClient.clear_system_cache()  # as a new process sees it: Chroma caches clients by path
    mem = Memory(session, store=store, settings=MemosSettings(budget_tokens=BUDGET, background_indexing=False), tools=[])
    try:
        logged = {m.id for m in mem.history()}
        report.lost += sorted(acked - logged)
        ctx = mem.context()
        report.over_budget += mem.counter.count_messages(ctx) > BUDGET
        report.orphan_contexts += bool(find_orphans(ctx))
        mem.flush()
        backend = mem._archival.backend
        with mem.store.db() as s:
            items = {str(r[0]) for r in s.exec(text("SELECT id FROM memos_archive WHERE namespace = :ns"),  # type: ignore[call-overload]
                                                params={"ns": mem._archival.namespace}).all()}
            integrity = s.exec(text("PRAGMA integrity_check")).one()[0]  # type: ignore[call-overload]
        vectors = backend.ids(mem._archival.namespace) if backend is not None and hasattr(backend, "ids") else items
        report.index_mismatches += vectors != items or mem._archival.pending() != 0
        report.integrity_failures += integrity != "ok"
        st = mem.stats()
        report.demotions, report.soft_compactions, report.archive_items = st.demotions, st.soft_compactions, len(items)
    finally:
        mem.close()
        SharedSystemClient.clear_system_cache()


def run_kills(store: str | Path, kills: int, *, seed: int = 1, session: str = "crash",
              max_delay: float = 1.5, max_acks: int = 3, progress: Any = None) -> CrashReport:
    """``kills`` rounds of start, SIGKILL after up to ``max_acks`` acknowledged messages and a
    random delay, reopen and check."""
    rng = random.Random(seed)
    store = Path(store)
    report = CrashReport()
    acked: set[str] = set()
    start = time.perf_counter()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    root = Path(__file__).resolve().parents[1]
    for r in range(kills):
        proc = subprocess.Popen([sys.executable, "-m", "benchmarks.crash", "child", str(store), session, str(seed * 100_000 + r)],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=root, env=env)
        lines = _Lines(proc)
        first = lines.get(timeout=STARTUP_SECONDS)
        if first is None or first.strip() != "READY":
            proc.kill()
            raise RuntimeError(f"the ingesting child did not start (said {first!r})")
        # The kill waits for a few acknowledgements first, so that every round does work however
        # slow the machine, then lands at a random moment of what follows (often inside an add).
        for _ in range(rng.randint(0, max_acks)):
            if not _take_ack(lines.get(timeout=STARTUP_SECONDS), acked):
                break
        time.sleep(rng.uniform(0.0, max_delay))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        while _take_ack(lines.get(), acked):
            pass
        report.rounds += 1
        _check(store, session, acked, report)
        if progress is not None:
            progress(r + 1, kills, f"{len(acked)} messages acknowledged, {len(report.lost)} lost")
    report.acked = len(acked)
    report.seconds = round(time.perf_counter() - start, 1)
    return report


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["child"]:
        return child(argv[1], argv[2], int(argv[3]), int(argv[4]) if len(argv) > 4 else None)
    p = argparse.ArgumentParser(prog="python -m benchmarks.crash", description=__doc__.split("\n")[0])
    p.add_argument("--kills", type=int, default=300)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--store", default=None, help="SQLite file to use (default: a new temporary one)")
    p.add_argument("--out", default=None, help="write the results as JSON here (default: a new file in ./memos-bench/)")
    args = p.parse_args(argv)
    import tempfile

    store = args.store or str(Path(tempfile.mkdtemp(prefix="memos-crash-")) / "crash.db")
    from memos.bench.progress import Progress

    with Progress("kills") as progress:
        report = run_kills(store, args.kills, seed=args.seed, progress=progress.update)
    result = {"benchmark": "crash", "params": {"kills": args.kills, "seed": args.seed, "budget": BUDGET},
              "results": [{"strategy": "memos", "metrics": {**asdict(report), "lost": len(report.lost), "ok": report.ok}}]}
    print(json.dumps(result, indent=2))
    from memos.cli.bench import write_results

    write_results(result, "crash", args.out)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
