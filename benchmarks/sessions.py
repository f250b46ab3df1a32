"""Many open sessions in one process: threads, memory and the cost of opening one.

    python -m benchmarks.sessions --sessions 1000 --out benchmarks/results/sessions.json

Opens ``--sessions`` sessions of ``--users`` users on one store (one :class:`memos.MemoryStore`,
as ``Memory(..., store=path)`` shares it), keeps them all open, and in each adds a short
exchange and builds a prompt. Records the time to open a session (p50 / p95 / max), the
threads and the resident memory of the process before and after, and the time of the first
prompt of a session. Then ``--churn`` stores are opened and closed one after another (a
script or a test suite that opens a store per run) and what each leaves in the process's
memory is recorded. With the model (``MEMOS_EMBEDDING_MODEL_DIR``) the archive's vectors
are written by the store's one indexing thread.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from memos import Memory, MemosSettings
from memos.cli.bench import write_results

ROOT = Path(__file__).resolve().parents[1]


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 2)


def run(sessions: int, users: int, folder: Path) -> dict[str, Any]:
    """Open ``sessions`` sessions at once and measure; returns the results."""
    settings = MemosSettings(budget_tokens=2048)
    store = folder / "sessions.db"
    warm = Memory("warm-up", user="warm-up", store=store, settings=settings, tools=[])  # schema, model, Chroma
    warm.add({"role": "user", "content": "hello"})
    warm.context()
    threads_before, rss_before = threading.active_count(), _rss_mb()
    open_ms: list[float] = []
    prompt_ms: list[float] = []
    opened: list[Memory] = []
    start = time.perf_counter()
    for i in range(sessions):
        t0 = time.perf_counter()
        mem = Memory(f"chat-{i}", user=f"user-{i % users}", store=store, settings=settings, tools=[])
        open_ms.append((time.perf_counter() - t0) * 1000)
        mem.add([{"role": "user", "content": f"My booking reference is BK-{10000 + i}; I never fly before 9 am."},
                 {"role": "assistant", "content": "Noted."}])
        t1 = time.perf_counter()
        mem.context(f"what is booking BK-{10000 + i}?")
        prompt_ms.append((time.perf_counter() - t1) * 1000)
        opened.append(mem)
    elapsed = time.perf_counter() - start
    threads_open, rss_open = threading.active_count(), _rss_mb()
    for mem in opened:
        mem.flush()
    for mem in opened:
        mem.close()
    warm.close()
    return {
        "sessions": sessions, "users": users, "seconds": round(elapsed, 1),
        "open_ms": {"p50": _pct(open_ms, 0.5), "p95": _pct(open_ms, 0.95), "max": round(max(open_ms), 2)},
        "first_prompt_ms": {"p50": _pct(prompt_ms, 0.5), "p95": _pct(prompt_ms, 0.95)},
        "threads": {"before": threads_before, "with_all_open": threads_open},
        "rss_mb": {"before": rss_before, "with_all_open": rss_open,
                   "per_session_kb": round((rss_open - rss_before) * 1024 / max(1, sessions), 1)},
        "open_ms_mean": round(statistics.mean(open_ms), 2),
    }


def churn(stores: int, folder: Path) -> dict[str, Any]:
    """Open ``stores`` stores one after another, each with a short session (vectors written),
    and close them; the resident memory each leaves behind, after the first two."""
    from memos import MemoryStore

    settings = MemosSettings(budget_tokens=2048)
    rss: list[float] = []
    for i in range(stores):
        store = MemoryStore(folder / f"churn-{i}.db")
        mem = store.session("chat", user="u", settings=settings, tools=[])
        mem.add([{"role": "user" if j % 2 == 0 else "assistant",
                  "content": f"Message {j} of store {i}: the ferry to Lisbon leaves at {j % 12 + 1} pm."}
                 for j in range(40)])
        mem.context("when does the ferry leave?")
        mem.flush()
        mem.close()
        store.close()
        rss.append(_rss_mb())
    return {"stores": stores, "rss_mb_after_2": rss[1], "rss_mb_after_all": rss[-1],
            "per_store_kb": round((rss[-1] - rss[1]) * 1024 / max(1, stores - 2), 1)}


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sessions", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--churn", type=int, default=40, help="stores opened and closed one after another")
    parser.add_argument("--out", default=None, help="write the results as JSON here (default: a new file in ./memos-bench/)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memos-sessions-") as tmp:
        result = run(args.sessions, args.users, Path(tmp))
        if args.churn > 2:
            result["closed_stores"] = churn(args.churn, Path(tmp))
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    doc = {"benchmark": "sessions", "recorded_at": commit, "machine": platform.machine(), **result}
    print(json.dumps(doc, indent=2))
    write_results(doc, "sessions", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
