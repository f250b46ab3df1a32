"""How well memos finds a sentence that lifts a rule the user set.

    python -m benchmarks.revocations evaluate --out benchmarks/results/revocations.json
    python -m benchmarks.revocations cv       # needs scikit-learn: pip install -e '.[train]'

A sentence that lifts a rule ("I'm not vegetarian anymore", "出差不用只坐高铁了") closes the
pinned rules it names (INVALIDATE), and is itself no rule. memos finds such sentences with a
phrase list (``memos.extract._REVOKE``). ``evaluate`` measures it per language and split on
``tests/data/rules/revocations.tsv`` (sentences that lift a rule, and hard negatives: rules
set with "anymore" / "不再", other people, cancelled bookings, questions), counts the rules
of the rule corpus (``corpus.tsv``) and of that file it takes for revocations, and how many
of those are lost (said by a user with no rules yet, they end as no pinned rule though the
classifier judges them rules: a revocation that lifts no rule sets the rule it states), and
the benchmark-drawn sentences (none of which lifts a rule) it fires on.

``cv`` measures the obvious replacement, a logistic regression over the rule classifier's
features (:func:`memos.text.rules.features`), by 5-fold cross-validation on the train splits
of both files: precision at recall 0.90 per language. It is not shipped (see the README,
*Facts*).
"""

from __future__ import annotations

import argparse
import csv
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from memos.cli_bench import write_results
from memos.extract import _REVOKE
from memos.text.rules import features
from memos.text.sentences import split_sentences

from .rules import SHARED_DATA, _commit, _rates, load_benchmark_sentences, load_corpus

ROOT = Path(__file__).resolve().parents[1]
REVOCATIONS = ROOT / "tests" / "data" / "rules" / "revocations.tsv"


def load_revocations(path: Path = REVOCATIONS) -> list[dict[str, str]]:
    """The labelled sentences: id, lang, label (revoke / none), category, split, text."""
    with path.open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def _revokes(text: str) -> bool:
    """Whether memos takes a message for a revocation: any of its sentences matches."""
    return any(_REVOKE.search(s) for s in split_sentences(text))


def _kept(text: str) -> bool:
    """Whether a rule the n-gram classifier judges a rule ends as a pinned fact when a user
    with no rules yet says it: a sentence read as a revocation that lifts no rule sets one
    (the n-gram model judges, so the count is the same with and without the embedding model)."""
    from sqlalchemy import create_engine
    from sqlalchemy.pool import StaticPool

    from memos.extract import RuleExtractor
    from memos.messages import Message
    from memos.store import Store
    from memos.text.rules import default_classifier
    from memos.tiers.cold import ColdTier

    detector = default_classifier()
    if not any(j.is_rule for j in detector.judge(split_sentences(text))):
        return True  # not the phrase list's doing
    engine = create_engine("sqlite://", poolclass=StaticPool)
    Store(engine)  # the tables
    cold = ColdTier(engine, "rules")
    found = RuleExtractor(detector=detector).extract([Message("m1", 1, {"role": "user", "content": text}, 0)])
    cold.apply(found.candidates, found.invalidations)
    return any(f.pinned and f.kind in ("constraint", "preference") for f in cold.facts())


def evaluate(judge: Callable[[str], bool] = _revokes, *, data: Path = SHARED_DATA) -> dict[str, Any]:
    """Precision and recall per language and split; rules of the rule corpus taken for
    revocations; benchmark-drawn sentences it fires on."""
    own = load_revocations()
    corpus = load_corpus()
    out: dict[str, Any] = {}
    misses: list[dict[str, str]] = []
    for split in ("train", "test"):
        for lang in ("en", "zh"):
            rows = [r for r in own if r["split"] == split and r["lang"] == lang]
            pred = [judge(r["text"]) for r in rows]
            gold = [r["label"] == "revoke" for r in rows]
            out[f"{split}/{lang}"] = _rates(gold, pred)
            if split == "test":
                misses += [{"id": r["id"], "label": r["label"], "text": r["text"]}
                           for r, g, p in zip(rows, gold, pred, strict=True) if g != p]
    for lang in ("en", "zh"):
        rules = [r for r in corpus if r["lang"] == lang and r["label"] != "none"]
        chat = [r for r in corpus if r["lang"] == lang and r["label"] == "none"]
        taken = [r["text"] for r in rules if judge(r["text"])]
        out[f"rule_corpus/{lang}"] = {"rules": len(rules), "rules_taken": len(taken),
                                      "rules_taken_lost": sum(not _kept(t) for t in taken),
                                      "other": len(chat), "other_taken": sum(judge(r["text"]) for r in chat)}
    for lang in ("en", "zh"):  # the hard negatives that set rules ("不再订早班机。")
        taken = [r["text"] for r in own if r["lang"] == lang and r["category"] == "rule" and judge(r["text"])]
        out[f"rules_in_revocation_words/{lang}"] = {
            "rules": sum(r["lang"] == lang and r["category"] == "rule" for r in own), "rules_taken": len(taken),
            "rules_taken_lost": sum(not _kept(t) for t in taken)}
    bench = load_benchmark_sentences(data)
    for src in ("prefeval", "locomo", "memdaily"):
        texts = [r["text"] for r in bench if r["source"] == src]
        if texts:
            out[f"benchmark/{src}"] = {"n": len(texts), "taken": sum(judge(t) for t in texts)}
    return {"results": out, "test_errors": misses,
            "benchmark_data": "present" if bench else f"absent ({data} not found)"}


def cross_validate(recall: float = 0.90) -> dict[str, Any]:
    """Precision at ``recall`` per language of a logistic regression over the rule features,
    5-fold cross-validated on the train splits of both files (every rule corpus sentence a
    negative)."""
    import numpy as np
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    rows = [r for r in load_revocations() if r["split"] == "train"]
    rows += [{**r, "label": "none"} for r in load_corpus() if r["split"] == "train"]
    x = DictVectorizer().fit_transform([features(r["text"]) for r in rows])
    y = np.array([r["label"] == "revoke" for r in rows], dtype=int)
    lang = np.array([r["lang"] for r in rows])
    folds = list(StratifiedKFold(5, shuffle=True, random_state=0).split(x, [f"{a}{b}" for a, b in zip(lang, y, strict=True)]))
    cv = cross_val_predict(LogisticRegression(C=8.0, max_iter=5000, class_weight="balanced"), x, y, cv=folds,
                           method="predict_proba")[:, 1]
    out: dict[str, Any] = {"n": len(rows), "revocations": int(y.sum())}
    for language in ("en", "zh"):
        s, gold = cv[lang == language], y[lang == language] == 1
        t = float(np.quantile(s[gold], 1.0 - recall))
        out[language] = {"recall": round(float((s[gold] >= t).mean()), 3), "precision": round(float(gold[s >= t].mean()), 3)}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.revocations", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("evaluate", help="precision and recall of the phrase list memos uses")
    ev.add_argument("--data", default=str(SHARED_DATA), help="the benchmark data folder (default ../shared/data)")
    ev.add_argument("--out", default=None, help="write the results as JSON here (default: a new file in ./memos-bench/)")
    sub.add_parser("cv", help="cross-validated precision at recall 0.90 of a logistic regression (needs scikit-learn)")
    args = parser.parse_args(argv)
    if args.command == "cv":
        print(cross_validate())
        return 0
    start = time.perf_counter()
    report = evaluate(data=Path(args.data))
    doc = {"benchmark": "revocations", "recorded_at": _commit(), "machine": platform.machine(),
           "params": {"corpus": str(REVOCATIONS.relative_to(ROOT)), "seconds": round(time.perf_counter() - start, 1)},
           **report}
    for key, r in report["results"].items():
        print(f"{key:20} " + "  ".join(f"{k} {v}" for k, v in r.items()))
    write_results(doc, "revocations", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
