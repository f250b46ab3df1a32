"""The attribute classifier: is "my X is Y" an attribute to keep under X, or talk?

    python -m benchmarks.attributes train      # needs scikit-learn: pip install -e '.[train]'
    python -m benchmarks.attributes evaluate --out benchmarks/results/attributes.json

``train`` fits :class:`memos.text.classifiers.attributes.AttributeClassifier`'s weights on the *train*
split of ``tests/data/facts/attributes.tsv`` only (logistic regression, class-balanced, over
:func:`memos.text.classifiers.attributes.attribute_features`) and picks the threshold by 5-fold
cross-validation on that split, one per language (the highest that keeps the language's
cross-validated recall at ``CV_RECALL``: an attribute dropped is still in the archive, talk
kept costs a line of the facts section), then writes ``memos/text/attributes_model.json.gz``.

``evaluate`` measures the shipped weights per language on both splits and on pairs drawn from
the benchmark data (LoCoMo turns and MemDaily messages in the frame, labelled by hand,
referenced by file and index in ``tests/data/facts/attributes_refs.tsv`` and read from
``../shared/data`` at run time; no weight is fitted on them), beside keeping every pair (what
memos did before the classifier).
"""

from __future__ import annotations

import csv
import gzip
import json
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from memos.cli.bench import write_results
from memos.text.classifiers.attributes import ATTRIBUTES_FILE, AttributeClassifier, attribute_features, find_attributes
from memos.text.sentences import split_sentences

from .rules import SHARED_DATA, _commit, _rates, train_evaluate_args

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "data" / "facts" / "attributes.tsv"
REFS = ROOT / "tests" / "data" / "facts" / "attributes_refs.tsv"
CV_RECALL = 0.95
C = 4.0


def load_corpus(path: Path = CORPUS) -> list[dict[str, str]]:
    """The labelled sentences: id, lang, label (attribute / talk), split, text; with the
    (key, value) pair the frame finds first in each."""
    with path.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    for r in rows:
        pairs = find_attributes(r["text"])
        if not pairs:
            raise ValueError(f"{r['id']}: {r['text']!r} is not in the frame")
        r["key"], r["value"] = pairs[0]
    return rows


def load_benchmark_pairs(data: Path = SHARED_DATA, refs: Path = REFS) -> list[dict[str, str]]:
    """The benchmark-drawn pairs, read from ``data`` by reference (empty when it is absent)."""
    if not data.is_dir():
        return []
    cache: dict[str, Any] = {}

    def load(path: Path) -> Any:
        if str(path) not in cache:
            cache[str(path)] = json.loads(path.read_text(encoding="utf-8"))
        return cache[str(path)]

    out = []
    with refs.open(encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            if row["source"] == "locomo":
                conv, session, turn = row["ref"].split("/")
                text = load(data / "locomo" / "locomo7.json")[int(conv)]["conversation"][session][int(turn)]["text"]
                lang = "en"
            elif row["source"] == "memdaily":
                name, traj, msg = row["ref"].split("/")
                text = str(load(data / "memdaily" / name)[int(traj)]["message_list"][int(msg)]["message"])
                lang = "zh"
            else:
                raise ValueError(f"unknown source {row['source']!r} in {refs}")
            pairs = [p for s in split_sentences(text) for p in find_attributes(s) if p[0] == row["key"]]
            if not pairs:
                raise ValueError(f"{row['source']} {row['ref']}: no pair with key {row['key']!r}")
            out.append({"source": row["source"], "lang": lang, "label": row["label"], "key": pairs[0][0],
                        "value": pairs[0][1]})
    return out


def evaluate(keep: Callable[[str, str], bool] | None = None, *, data: Path = SHARED_DATA) -> dict[str, Any]:
    """Precision and recall (attribute = positive) of ``keep`` (default: the shipped classifier)
    per language and split, and on the benchmark-drawn pairs."""
    if keep is None:
        model = AttributeClassifier()

        def keep(key: str, value: str) -> bool:
            return model.score(key, value) >= model.threshold_for(key)

    corpus = load_corpus()
    results: dict[str, Any] = {}
    errors = []
    for split in ("train", "test"):
        for lang in ("en", "zh"):
            rows = [r for r in corpus if r["split"] == split and r["lang"] == lang]
            pred = [keep(r["key"], r["value"]) for r in rows]
            gold = [r["label"] == "attribute" for r in rows]
            results[f"{split}/{lang}"] = _rates(gold, pred)
            if split == "test":
                errors += [{"id": r["id"], "label": r["label"], "text": r["text"]}
                           for r, g, p in zip(rows, gold, pred, strict=True) if g != p]
    bench = load_benchmark_pairs(data)
    for src in ("locomo", "memdaily"):
        rows = [r for r in bench if r["source"] == src]
        if rows:
            results[f"benchmark/{src}"] = _rates([r["label"] == "attribute" for r in rows],
                                                 [keep(r["key"], r["value"]) for r in rows])
    return {"results": results, "test_errors": errors,
            "benchmark_data": "present" if bench else f"absent ({data} not found)"}


def train(out: Path = ATTRIBUTES_FILE, *, progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Fit the weights on the train split and write them (needs scikit-learn)."""
    import numpy as np
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    rows = [r for r in load_corpus() if r["split"] == "train"]
    vec = DictVectorizer()
    x = vec.fit_transform([attribute_features(r["key"], r["value"]) for r in rows])
    y = np.array([r["label"] == "attribute" for r in rows], dtype=int)
    lang = np.array([r["lang"] for r in rows])
    folds = StratifiedKFold(5, shuffle=True, random_state=0).split(x, [f"{a}{b}" for a, b in zip(lang, y, strict=True)])
    model = LogisticRegression(C=C, max_iter=5000, class_weight="balanced")
    cv = cross_val_predict(model, x, y, cv=list(folds), method="predict_proba")[:, 1]
    thresholds = {language: float(round(max(t for t in np.arange(0.05, 0.96, 0.01)
                                            if (cv[(lang == language) & (y == 1)] >= t).mean() >= CV_RECALL), 2))
                  for language in ("en", "zh")}
    cv_rates = {}
    for language, threshold in thresholds.items():
        pred, gold = cv[lang == language] >= threshold, y[lang == language] == 1
        cv_rates[language] = {"recall": round(float(pred[gold].mean()), 3), "precision": round(float(gold[pred].mean()), 3)}
    model.fit(x, y)
    weights = {str(n): round(float(w), 4) for n, w in zip(vec.get_feature_names_out(), model.coef_[0], strict=True)
               if abs(w) >= 1e-3}
    doc = {"about": "memos attribute classifier: logistic regression over memos.text.classifiers.attributes.attribute_features; "
                    "fitted by benchmarks/attributes.py on the train split of tests/data/facts/attributes.tsv",
           "C": C, "thresholds": thresholds, "cv_on_train": cv_rates, "bias": round(float(model.intercept_[0]), 4),
           "weights": weights}
    data = (json.dumps(doc, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n").encode("utf-8")
    out.write_bytes(gzip.compress(data, 9, mtime=0))
    progress(f"wrote {out} ({len(weights)} weights, thresholds {thresholds}, cross-validated {cv_rates})")
    return doc


def main(argv: Sequence[str] | None = None) -> int:
    args = train_evaluate_args("python -m benchmarks.attributes", __doc__.split("\n\n")[0],
                               "precision and recall of the shipped weights, and of keeping every pair", argv)
    if args.command == "train":
        train()
        return 0
    start = time.perf_counter()
    report = evaluate(data=Path(args.data))
    every = evaluate(lambda key, value: True, data=Path(args.data))
    doc = {"benchmark": "attributes", "recorded_at": _commit(), "machine": platform.machine(),
           "params": {"corpus": str(CORPUS.relative_to(ROOT)), "refs": str(REFS.relative_to(ROOT)),
                      "thresholds": AttributeClassifier().thresholds, "seconds": round(time.perf_counter() - start, 1)},
           **report, "keep_every_pair": every["results"]}
    for name, r in report["results"].items():
        e = every["results"][name]
        print(f"{name:<20} n={r['n']:<4} precision {r['precision']:.3f} recall {r['recall']:.3f}"
              f"   (every pair: precision {e['precision']:.3f})")
    write_results(doc, "attributes", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
