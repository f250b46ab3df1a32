"""PrefEval: is a stated preference still in the prompt after 10, 100, 300 filler messages?

    python -m benchmarks.prefeval --data ../shared/data/prefeval --out benchmarks/results/prefeval.json

The same as ``memos bench prefeval``; the code lives in :mod:`memos.bench.prefeval`.
"""

from __future__ import annotations

import sys

from memos.bench.prefeval import load_fillers, load_preferences, run_prefeval
from memos.cli.app import main

__all__ = ["load_fillers", "load_preferences", "run_prefeval"]

if __name__ == "__main__":
    sys.exit(main(["bench", "prefeval", *sys.argv[1:]]))
