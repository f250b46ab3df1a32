"""Is memos' lead over a baseline on MemDaily more than noise? A paired bootstrap.

    python -m benchmarks.paired --out benchmarks/results/memdaily_paired.json

Replays MemDaily as ``memos bench memdaily`` does (trajectories 0-39, then 40-79, at 1,024
tokens), scores every question under memos and under the baseline (``--baseline``, default
the character-bigram ``bm25``), and resamples the questions with replacement 10,000 times:
the 2.5th and 97.5th percentiles of the mean difference bound memos' lead.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memos.bench.memdaily import load_memdaily, replay
from memos.bench.scoring import context_text, evidence_recall
from memos.bench.strategies import embedding_model_name, make_strategy
from memos.cli.bench import write_results
from memos.core.tokens import TokenCounter

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "memdaily"


def question_scores(name: str, start: int, *, data: Path = DATA, budget: int = 1024,
                    trajectories: int = 40) -> list[float]:
    """Target-message recall of every question, in the benchmark's order, for one strategy."""
    counter = TokenCounter()
    scores: list[float] = []
    for ep in load_memdaily(data, trajectories=trajectories, start=start):
        strat = make_strategy(name, counter, budget)
        try:
            scores += [evidence_recall(context_text(ctx), targets) or 0.0 for ctx, _, targets in replay(strat, ep)]
        finally:
            strat.close()
    return scores


def paired_bootstrap(a: Sequence[float], b: Sequence[float], *, resamples: int = 10_000, seed: int = 0
                     ) -> dict[str, Any]:
    """The mean of ``a - b`` with its 95 % bootstrap interval, and who is ahead how often."""
    if len(a) != len(b) or not a:
        raise ValueError("two non-empty score lists of the same length are needed")
    d = [x - y for x, y in zip(a, b, strict=True)]
    n = len(d)
    rng = random.Random(seed)
    means = sorted(sum(rng.choice(d) for _ in range(n)) / n for _ in range(resamples))
    return {"questions": n, "mean_a": round(sum(a) / n, 4), "mean_b": round(sum(b) / n, 4),
            "difference": round(sum(d) / n, 4),
            "interval_95": [round(means[int(0.025 * resamples)], 4), round(means[int(0.975 * resamples) - 1], 4)],
            "a_ahead": sum(x > 0 for x in d), "b_ahead": sum(x < 0 for x in d)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.paired", description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="bm25")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        parser.error(f"no MemDaily data at {args.data}")
    result: dict[str, Any] = {"benchmark": "memdaily_paired", "params": {"baseline": args.baseline, "budget": 1024,
                                                                         "resamples": 10_000}, "results": {}}
    for start in (0, 40):
        memos = question_scores("memos", start, data=args.data)
        base = question_scores(args.baseline, start, data=args.data)
        result["results"][f"trajectories {start}-{start + 39}"] = paired_bootstrap(memos, base)
        print(start, result["results"][f"trajectories {start}-{start + 39}"])
    result["params"]["embedding_model"] = embedding_model_name()
    write_results(result, "memdaily_paired", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
