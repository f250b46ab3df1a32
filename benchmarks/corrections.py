"""The correction classifier: train it, and measure how well memos replaces a phone number or an
email when the user corrects it without naming it ("Sorry, wrong number, it's …").

    python -m benchmarks.corrections train     # needs scikit-learn: pip install -e '.[train]'
    python -m benchmarks.corrections evaluate --out benchmarks/results/corrections.json

``train`` fits :class:`memos.text.classifiers.corrections.CorrectionClassifier` on the *train* split of
``tests/data/facts/corrections.tsv`` (corrections, and hard negatives: other people's numbers,
new contacts given beside the old one, stories with "wrong" and "错", questions, confirmations),
picks each language's threshold by 5-fold cross-validation there (the lowest score at which
precision reaches ``PRECISION``: a false correction makes a true value history), and writes
``memos/text/corrections_model.json.gz``.

``evaluate`` measures the shipped weights per language and split (train; test, held back), and
end to end (``replaced``): each sentence is said by a user who gave a value of the same kind a
few messages before ("My phone number is …" / "我的手机号是…"); a correction, or a sentence
that states the same key again ("My email is …", "我的邮箱是…"), must leave the new value current and the old
one history, any other sentence must leave the old one current.
It also counts the LoCoMo turns and MemDaily messages in ``../shared/data`` that hold one
phone number or email (none of them corrects one the user gave) it takes for corrections,
naming them by file and index (their licences do not allow copying them here, and no weight
is fitted on them).
"""

from __future__ import annotations

import csv
import json
import platform
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from memos.cli.bench import write_results
from memos.text.classifiers.corrections import (
    CORRECTIONS_FILE,
    contact_values,
    correction_context,
    correction_features,
    default_correction_classifier,
)
from memos.text.sentences import split_sentences

from .rules import SHARED_DATA, _commit, _rates, fit_precision_first, train_evaluate_args

ROOT = Path(__file__).resolve().parents[1]
CORRECTIONS = ROOT / "tests" / "data" / "facts" / "corrections.tsv"
SPLITS = ("train", "test")
C = 8.0  # as for the rule and revocation classifiers
PRECISION = 0.90  # the cross-validated precision each language's threshold is chosen for
_OLD = {("en", "phone"): ("My phone number is {}.", "+351 912 345 678"),
        ("en", "email"): ("My email is {}.", "old.me@example.com"),
        ("zh", "phone"): ("我的手机号是{}。", "13800138000"), ("zh", "email"): ("我的邮箱是{}。", "old.me@example.cn")}


def load_corrections(path: Path = CORRECTIONS) -> list[dict[str, str]]:
    """The labelled messages: id, lang, label (correction / none), category, split, text."""
    with path.open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def instances(text: str) -> Iterator[tuple[str, str, str]]:
    """Each ``(context, kind, value)`` of a message the classifier judges."""
    sentences = split_sentences(text)
    for i, sentence in enumerate(sentences):
        for kind, value in contact_values(sentence):
            yield correction_context(sentences, i), kind, value


def _corrects(text: str) -> bool:
    """Whether memos takes a message for a correction: it gives any value as one."""
    sentences = split_sentences(text)
    clf = default_correction_classifier()
    return any(clf.corrections(sentences, i) for i in range(len(sentences)))


def _replaced(text: str, lang: str) -> bool | None:
    """Said a few messages after the user gave a value of the kind the message holds: whether
    the old value is history and the message's value current (None: the message holds no value)."""
    from sqlalchemy import create_engine
    from sqlalchemy.pool import StaticPool

    from memos.core.messages import Message
    from memos.storage.log import Store
    from memos.tiers.cold import ColdTier
    from memos.tiers.extract import RuleExtractor

    found = [kv for s in split_sentences(text) for kv in contact_values(s)]
    if not found:
        return None
    kind, value = found[0]
    said, old = _OLD[(lang, kind)]
    engine = create_engine("sqlite://", poolclass=StaticPool)
    Store(engine)  # the tables
    cold = ColdTier(engine, "corrections")
    turns = [said.format(old), "Noted.", "Thanks." if lang == "en" else "谢谢。",
             "What else do you need?" if lang == "en" else "还需要什么？", text]
    messages = [Message(f"m{i}", i, {"role": "user" if i % 2 == 0 else "assistant", "content": t}, 0)
                for i, t in enumerate(turns)]
    extractor = RuleExtractor()
    for m in messages:
        ex = extractor.extract([m])
        cold.apply(ex.candidates, ex.invalidations)
    current = " ".join(f"{f.key} {f.value}" for f in cold.facts())
    return old not in current and value in current


def _restates(text: str, lang: str) -> bool:
    """Whether the message states the key the old value was given under ("My email is …",
    "我的邮箱是…" again): the new value then replaces the old one as a keyed fact, correction or not."""
    from memos.tiers.extract import RuleExtractor

    extractor = RuleExtractor()
    keys = {a.key for said, old in _OLD.values() for a in extractor.stated_attributes(said.format(old))}
    return any(a.key in keys for s in split_sentences(text) for a in extractor.stated_attributes(s))


def _benchmark_messages(data: Path) -> Iterator[tuple[str, str, str]]:
    """``(source, ref, text)`` of each LoCoMo turn and MemDaily message that holds a phone
    number or an email."""
    locomo = data / "locomo" / "locomo7.json"
    if locomo.is_file():
        for c, conv in enumerate(json.loads(locomo.read_text(encoding="utf-8"))):
            for session, turns in conv["conversation"].items():
                if isinstance(turns, list):
                    for t, turn in enumerate(turns):
                        if any(contact_values(s) for s in split_sentences(turn.get("text", ""))):
                            yield "locomo", f"{c}/{session}/{t}", turn["text"]
    folder = data / "memdaily"
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        for j, traj in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            for k, msg in enumerate(traj["message_list"]):
                if any(contact_values(s) for s in split_sentences(msg["message"])):
                    yield "memdaily", f"{path.name}/{j}/{k}", msg["message"]


def evaluate(judge: Callable[[str], bool] = _corrects, *, data: Path = SHARED_DATA) -> dict[str, Any]:
    """Precision and recall per language and split, end to end and alone; benchmark messages taken."""
    rows = load_corrections()
    out: dict[str, Any] = {}
    misses: list[dict[str, str]] = []
    for split in SPLITS:
        for lang in ("en", "zh"):
            part = [r for r in rows if r["split"] == split and r["lang"] == lang]
            gold = [r["label"] == "correction" for r in part]
            pred = [judge(r["text"]) for r in part]
            out[f"{split}/{lang}"] = _rates(gold, pred)
            replaced = [_replaced(r["text"], lang) for r in part]
            out[f"replaced/{split}/{lang}"] = _rates([g or _restates(r["text"], lang) for r, g in zip(part, gold, strict=True)],
                                                     [bool(x) for x in replaced])
            if split != "train":
                misses += [{"id": r["id"], "label": r["label"], "text": r["text"]}
                           for r, g, p in zip(part, gold, pred, strict=True) if g != p]
    taken: dict[str, list[str]] = {}
    seen: dict[str, int] = {}
    for src, ref, text in _benchmark_messages(data):
        seen[src] = seen.get(src, 0) + 1
        if judge(text):
            taken.setdefault(src, []).append(ref)
    for src, n in seen.items():
        out[f"benchmark/{src}"] = {"n": n, "taken": len(taken.get(src, [])), "taken_refs": taken.get(src, [])}
    return {"results": out, "test_errors": misses,
            "benchmark_data": "present" if data.is_dir() else f"absent ({data} not found)"}


def train(out: Path = CORRECTIONS_FILE, *, progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Fit the weights on the train split and write them (needs scikit-learn)."""
    items = [(r, ctx, value) for r in load_corrections() if r["split"] == "train" for ctx, _, value in instances(r["text"])]
    return fit_precision_first(
        [correction_features(ctx, value) for _, ctx, value in items], [r["label"] == "correction" for r, _, _ in items],
        [r["lang"] for r, _, _ in items], c=C, precision=PRECISION, out=out, progress=progress,
        about="memos correction classifier: logistic regression over memos.text.classifiers.rules.features of a value's "
              "context, the value masked; fitted by benchmarks/corrections.py on the train split of "
              "tests/data/facts/corrections.tsv")


def main(argv: Sequence[str] | None = None) -> int:
    args = train_evaluate_args("python -m benchmarks.corrections", __doc__.split("\n\n")[0],
                               "precision and recall of the shipped weights, alone and end to end", argv)
    if args.command == "train":
        train()
        return 0
    start = time.perf_counter()
    report = evaluate(data=Path(args.data))
    doc = {"benchmark": "corrections", "recorded_at": _commit(), "machine": platform.machine(),
           "params": {"corpus": str(CORRECTIONS.relative_to(ROOT)),
                      "thresholds": default_correction_classifier().thresholds,
                      "seconds": round(time.perf_counter() - start, 1)},
           **report}
    for key, r in report["results"].items():
        print(f"{key:22} " + "  ".join(f"{k} {v}" for k, v in r.items() if k != "taken_refs"))
    write_results(doc, "corrections", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
