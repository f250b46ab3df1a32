"""Pasted blobs: how long ``add()`` takes for one huge message without sentences.

    python -m benchmarks.blobs --sizes 20000 100000 500000 --out benchmarks/results/blobs.json

Users paste logs, base64 images, minified JSON, CSV rows and unbroken Chinese text. Each kind
below is added as one user message to a fresh session (budget 1,024, background indexing off,
so the time is the caller's), followed by a short message and a ``context()`` call. A pattern
that backtracks over a long run makes ``add()`` quadratic in the run's length: the time per
kind should grow about linearly with the size.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from memos.cli.bench import write_results

from .rules import _commit

BUDGET = 1024


def _repeat(unit: str) -> Callable[[int], str]:
    return lambda n: (unit * (n // len(unit) + 1))[:n]


KINDS: dict[str, Callable[[int], str]] = {
    "one character": _repeat("x"),
    "base64": lambda n: base64.b64encode(random.Random(0).randbytes(n * 3 // 4)).decode()[:n],
    "numbers with commas": _repeat("1,"),
    "dashed words": _repeat("a-"),
    "unbroken Chinese": _repeat("订单"),
    "blank lines": _repeat("\n"),
    "minified JSON": lambda n: json.dumps([{"id": f"ORD-{i}", "v": i} for i in range(n // 24 + 1)],
                                          separators=(",", ":"))[:n],
}


def run(sizes: Sequence[int]) -> dict[str, Any]:
    """Seconds for ``add(blob)``, the next ``add`` and ``context()``, per kind and size."""
    from memos import Memory, MemosSettings

    rows = []
    for kind, make in KINDS.items():
        for size in sizes:
            with tempfile.TemporaryDirectory() as d:
                conf = MemosSettings(budget_tokens=BUDGET, background_indexing=False)
                mem = Memory("blob", store=str(Path(d) / "m.db"), settings=conf, tools=[])
                mem.add({"role": "user", "content": "Hi, my order is ORD-55120."})
                blob = make(size)
                t = time.perf_counter()
                mem.add({"role": "user", "content": blob})
                add_s = time.perf_counter() - t
                t = time.perf_counter()
                mem.add({"role": "assistant", "content": "Got it."})
                next_s = time.perf_counter() - t
                t = time.perf_counter()
                ctx = mem.context()
                context_s = time.perf_counter() - t
                tokens = mem.counter.count_messages(ctx)
                mem.close()
            rows.append({"kind": kind, "chars": size, "add_s": round(add_s, 3), "next_add_s": round(next_s, 3),
                         "context_s": round(context_s, 3), "context_tokens": tokens, "within_budget": tokens <= BUDGET})
            print(f"{kind:>20} {size:>7} add {add_s:7.2f}s next {next_s:5.2f}s context {context_s:5.2f}s "
                  f"{tokens} tokens", flush=True)
    params = {"sizes": list(sizes), "budget": BUDGET, "background_indexing": False}
    return {"benchmark": "blobs", "recorded_at": _commit(), "params": params, "results": rows}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20000, 100000, 500000])
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    result = run(args.sizes)
    if args.out:
        write_results(result, "blobs", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
