"""Cumulative prompt tokens of a 300-turn agent session, per strategy.

    python -m benchmarks.tokens --out benchmarks/results/tokens.json

The same as ``memos bench tokens``; the code lives in :mod:`memos.bench.tokens`.
"""

from __future__ import annotations

import sys

from memos.bench.tokens import plot_tokens_per_turn, run_tokens, tool_session
from memos.cli.app import main

__all__ = ["plot_tokens_per_turn", "run_tokens", "tool_session"]

if __name__ == "__main__":
    sys.exit(main(["bench", "tokens", *sys.argv[1:]]))
