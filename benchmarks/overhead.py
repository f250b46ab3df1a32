"""Per-turn time (add + context) and peak memory of memos at 1k, 10k and 100k messages.

    python -m benchmarks.overhead --sizes 1000,10000 --out benchmarks/results/overhead.json
    python -m benchmarks.overhead --sizes 1000,10000 --model-ms 300 --out benchmarks/results/overhead_model_wait.json

The same as ``memos bench overhead``; the code lives in :mod:`memos.bench.overhead`.
"""

from __future__ import annotations

import sys

from memos.bench.overhead import chat_messages, measure, run_overhead
from memos.cli.app import main

__all__ = ["chat_messages", "measure", "run_overhead"]

if __name__ == "__main__":
    sys.exit(main(["bench", "overhead", *sys.argv[1:]]))
