"""The replacement classifier: train it, and measure how well memos tells a rule that replaces
an earlier one from a rule that holds beside it.

    python -m benchmarks.replacements train     # needs scikit-learn: pip install -e '.[train]'
    python -m benchmarks.replacements evaluate --out benchmarks/results/replacements.json

"From now on, reply in Spanish." said after "Always reply in English." replaces it: the cold
tier supersedes the old rule with the new one, and only the new one stays pinned. ``train``
fits :class:`memos.text.replacements.ReplacementClassifier` on the *train* split of
``tests/data/rules/replacements.tsv`` (pairs of an earlier rule and a later one, English and
Chinese, written for it: replacements of every kind, with and without a word of change, and
hard negatives: later rules on the same matter that hold beside the earlier one, many of them
opening with "from now on" / 以后, additions with "either" / 也, rules scoped to another case)
and picks each language's threshold by 5-fold cross-validation there: the lowest score at
which precision reaches ``PRECISION``. ``evaluate`` measures the shipped weights per language
and split (test is held back; holdout, 60 pairs in new wordings written after the weights were
fitted, is never used to fit or choose anything) and lists the held-back pairs it gets wrong.
"""

from __future__ import annotations

import csv
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memos.cli_bench import write_results
from memos.text.replacements import REPLACEMENTS_FILE, ReplacementClassifier, pair_features

from .rules import _commit, _rates, fit_precision_first, train_evaluate_args

ROOT = Path(__file__).resolve().parents[1]
PAIRS = ROOT / "tests" / "data" / "rules" / "replacements.tsv"
C = 1.0
PRECISION = 0.95  # a false replacement takes a rule in force out of the pinned section


def load_pairs(path: Path = PAIRS) -> list[dict[str, str]]:
    """The labelled pairs: id, lang, label (replaces / keeps), category, split, old, new."""
    with path.open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def train(out: Path = REPLACEMENTS_FILE) -> dict[str, Any]:
    """Fit the weights on the train split and write them (needs scikit-learn)."""
    rows = [r for r in load_pairs() if r["split"] == "train"]
    return fit_precision_first([pair_features(r["old"], r["new"]) for r in rows], [r["label"] == "replaces" for r in rows],
                               [r["lang"] for r in rows], c=C, precision=PRECISION, out=out,
                               about="memos replacement classifier: logistic regression over "
                                     "memos.text.replacements.pair_features; fitted by benchmarks/replacements.py "
                                     "on the train split of tests/data/rules/replacements.tsv")


def evaluate(classifier: ReplacementClassifier | None = None) -> dict[str, Any]:
    """Precision and recall per language and split of ``classifier`` (default: the shipped
    weights), and the held-back pairs (test and holdout) it gets wrong."""
    clf = classifier or ReplacementClassifier()
    pairs = load_pairs()
    results: dict[str, Any] = {}
    for split in ("train", "test", "holdout"):
        for lang in ("en", "zh"):
            rows = [r for r in pairs if r["split"] == split and r["lang"] == lang]
            results[f"{split}/{lang}"] = _rates([r["label"] == "replaces" for r in rows],
                                                [clf.replaces(r["old"], r["new"]) for r in rows])
    errors = [{**r, "score": round(clf.score(r["old"], r["new"]), 3)} for r in pairs
              if r["split"] != "train" and clf.replaces(r["old"], r["new"]) != (r["label"] == "replaces")]
    return {"results": results, "test_errors": errors}


def main(argv: Sequence[str] | None = None) -> int:
    args = train_evaluate_args("python -m benchmarks.replacements", (__doc__ or "").split("\n\n")[0],
                               "precision and recall of the shipped weights", argv)
    if args.command == "train":
        train()
        return 0
    start = time.perf_counter()
    clf = ReplacementClassifier()
    report = evaluate(clf)
    doc = {"benchmark": "replacements", "recorded_at": _commit(), "machine": platform.machine(),
           "params": {"pairs": str(PAIRS.relative_to(ROOT)), "thresholds": clf.thresholds,
                      "seconds": round(time.perf_counter() - start, 1)},
           **report}
    for key, r in report["results"].items():
        print(f"{key:10} " + "  ".join(f"{k} {v}" for k, v in r.items()))
    for e in report["test_errors"]:
        print(f"  wrong ({e['split']}): {e['label']:8} {e['score']:.3f}  {e['old']}  ->  {e['new']}")
    write_results(doc, "replacements", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
