"""The replacement classifier: train it, and measure how well memos tells a rule that replaces
an earlier one from a rule that holds beside it.

    python -m benchmarks.replacements train     # needs scikit-learn: pip install -e '.[train]'
    python -m benchmarks.replacements evaluate --out benchmarks/results/replacements.json

"From now on, reply in Spanish." said after "Always reply in English." replaces it: the cold
tier supersedes the old rule with the new one, and only the new one stays pinned. ``train``
fits :class:`memos.text.classifiers.replacements.ReplacementClassifier` on the *train* split of
``tests/data/rules/replacements.tsv`` (pairs of an earlier rule and a later one, English and
Chinese, written for it: replacements of every kind, with and without a word of change, and
hard negatives: later rules on the same matter that hold beside the earlier one, many of them
opening with "from now on" / 以后, additions with "either" / 也, rules scoped to another case)
and picks each language's threshold by 5-fold cross-validation there: the lowest score at
which precision reaches ``PRECISION``. ``evaluate`` measures the shipped weights per language
and split (test is held back; holdout, 60 pairs in new wordings written after the weights were
fitted, is never used to fit or choose anything; holdout2, 40 pairs that give a setting, "Set
the focus timer to 45 minutes." after "Use a 25-minute focus timer.", or one beside the rule,
written before the weights learned that form and never fitted on) and lists the held-back
pairs it gets wrong.

It also measures the revision path (:meth:`ReplacementClassifier.revises`) on
``tests/data/rules/revisions.tsv``: a rule, then a sentence that states no rule by itself and
changes one of its quantities ("Change the budget to $250.") or does not (a one-off request
with an amount, a question, someone else's setting, a past event). Its splits: *dev* (written
first, and read while the gates were chosen), *holdout* (written next, read once the weights
had changed once more), *holdout2* (written next, measured once) and *holdout3* (one-off
actions with a word of change, "Move the dentist appointment to 4pm.", and changes, written
before the gates on a quantity's kind and on a thing pointed at; the other half of them is in
*dev*). The revision pairs of
the *train* split of ``replacements.tsv`` (category ``revision…``) are fitted on, less those
the gates already rule out.
"""

from __future__ import annotations

import csv
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memos.cli.bench import write_results
from memos.text.classifiers.replacements import REPLACEMENTS_FILE, ReplacementClassifier, _terms, no_change_reason, pair_features

from .rules import _commit, _rates, fit_precision_first, load_corpus, train_evaluate_args

ROOT = Path(__file__).resolve().parents[1]
PAIRS = ROOT / "tests" / "data" / "rules" / "replacements.tsv"
REVISIONS = ROOT / "tests" / "data" / "rules" / "revisions.tsv"
C = 1.0
PRECISION = 0.95  # a false replacement takes a rule in force out of the pinned section


def load_revisions() -> list[dict[str, str]]:
    """The revision pairs, never fitted on: a rule, then a sentence that states no rule by
    itself and changes it (or does not: a one-off request, a question, someone else's)."""
    return load_pairs(REVISIONS)


def load_pairs(path: Path = PAIRS) -> list[dict[str, str]]:
    """The labelled pairs: id, lang, label (replaces / keeps), category, split, old, new."""
    with path.open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def train(out: Path = REPLACEMENTS_FILE) -> dict[str, Any]:
    """Fit the weights on the train split and write them (needs scikit-learn)."""
    rows = [r for r in load_pairs() if r["split"] == "train" and not _gated(r)]
    return fit_precision_first([pair_features(r["old"], r["new"]) for r in rows], [r["label"] == "replaces" for r in rows],
                               [r["lang"] for r in rows], c=C, precision=PRECISION, out=out,
                               about="memos replacement classifier: logistic regression over "
                                     "memos.text.classifiers.replacements.pair_features; fitted by benchmarks/replacements.py "
                                     "on the train split of tests/data/rules/replacements.tsv")


def _gated(row: dict[str, str]) -> bool:
    """A revision pair whose new sentence the gates already rule out, unseen by the model."""
    return row["category"].startswith("revision") and no_change_reason(row["new"]) is not None


def evaluate(classifier: ReplacementClassifier | None = None) -> dict[str, Any]:
    """Precision and recall per language and split of ``classifier`` (default: the shipped
    weights), and the held-back pairs (test and holdout) it gets wrong."""
    clf = classifier or ReplacementClassifier()
    pairs = load_pairs()
    results: dict[str, Any] = {}
    for split in ("train", "test", "holdout", "holdout2"):
        for lang in ("en", "zh"):
            rows = [r for r in pairs if r["split"] == split and r["lang"] == lang]
            results[f"{split}/{lang}"] = _rates([r["label"] == "replaces" for r in rows],
                                                [clf.replaces(r["old"], r["new"]) for r in rows])
    errors = [{**r, "score": round(clf.score(r["old"], r["new"]), 3)} for r in pairs
              if r["split"] != "train" and clf.replaces(r["old"], r["new"]) != (r["label"] == "replaces")]
    revisions = load_revisions()
    for split in ("dev", "holdout", "holdout2", "holdout3"):
        for lang in ("en", "zh"):
            rows = [r for r in revisions if r["split"] == split and r["lang"] == lang]
            results[f"revisions {split}/{lang}"] = _rates([r["label"] == "replaces" for r in rows],
                                                          [clf.revises(r["old"], r["new"]) for r in rows])
    errors += [{**r, "score": round(clf.score(r["old"], r["new"]), 3)} for r in revisions
               if clf.revises(r["old"], r["new"]) != (r["label"] == "replaces")]
    results.update(_corpus_pairs(clf))
    return {"results": results, "test_errors": errors}


def _corpus_pairs(clf: ReplacementClassifier) -> dict[str, dict[str, Any]]:
    """Every pair of two rules of the rule corpus's test split (``tests/data/rules/corpus.tsv``,
    never fitted on here) that share a word, in both orders: written one by one, nearly all of
    them hold together, so the share taken for replacements bounds the false replacements
    among rules on loosely related matters."""
    out: dict[str, dict[str, Any]] = {}
    for lang in ("en", "zh"):
        rules = [r["text"] for r in load_corpus() if r["split"] == "test" and r["lang"] == lang and r["label"] != "none"]
        pairs = [(a, b) for a in rules for b in rules if a != b and _terms(a) & _terms(b)]
        replaced = sorted((round(clf.score(a, b), 3), a, b) for a, b in pairs if clf.replaces(a, b))
        out[f"rule corpus pairs/{lang}"] = {"rules": len(rules), "pairs_sharing_a_word": len(pairs),
                                            "replaced": len(replaced), "examples": [list(x) for x in replaced[-5:]]}
    return out


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
        print(f"{key:10} " + "  ".join(f"{k} {v}" for k, v in r.items() if k != "examples"))
    for e in report["test_errors"]:
        print(f"  wrong ({e['split']}): {e['label']:8} {e['score']:.3f}  {e['old']}  ->  {e['new']}")
    write_results(doc, "replacements", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
