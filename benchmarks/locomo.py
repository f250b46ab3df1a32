"""LoCoMo evidence recall and answer containment, memos against the usual strategies.

    python -m benchmarks.locomo --data ../shared/data/locomo/locomo7.json --budget 1024,2048,4096 \
        --out benchmarks/results/locomo.json

The same as ``memos bench locomo``; the code lives in :mod:`memos.bench.locomo`.
"""

from __future__ import annotations

import sys

from memos.bench.locomo import load_locomo, run_locomo
from memos.cli.app import main

__all__ = ["load_locomo", "run_locomo"]

if __name__ == "__main__":
    sys.exit(main(["bench", "locomo", *sys.argv[1:]]))
