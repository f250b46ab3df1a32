"""Corrections: which sentences give a new value for a phone number or an email given before.

"Sorry, wrong number, it's +351 913 000 111.", "Oops, typo: ana@new.com is the right email",
"我换号了，新号码是13900139000。" replace a value the user gave; "my mom's number is …", "I got a
wrong number call from …", "不对劲，这个号码一直骚扰我" and "is ana@new.com the right email?"
share their words and replace nothing. Which is which is decided by a measured classifier, not
a word list: a logistic regression over :func:`memos.text.classifiers.rules.features` of the sentence that
gives the value, with the sentence before and after it (the value and other identifiers
masked), and a few closed-class cues. Its weights ship with the package
(``corrections_model.json.gz``); they were fitted by
``benchmarks/corrections.py`` on the *train* split of ``tests/data/facts/corrections.tsv``
(corrections and hard negatives, English and Chinese), and its precision and recall on the
held-back *test* split, and how many benchmark turns with a phone number or an email it takes
for corrections, are recorded in ``benchmarks/results/corrections.json``.

Which value a correction replaces is decided by the cold tier, which knows the facts: the
newest one of the same kind stated shortly before (:class:`memos.storage.facts.FactCandidate`,
``corrects``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..patterns import find_identifiers, value_kind
from ..script import simplified
from .linear import LinearModel
from .rules import _CJK, _ZH_KIN, features

__all__ = ["CORRECTIONS_FILE", "CorrectionClassifier", "contact_values", "correction_context", "correction_features",
           "default_correction_classifier"]

CORRECTIONS_FILE = Path(__file__).with_name("corrections_model.json.gz")
_MASK = "VAL"  # the value, as the classifier sees it: what is said around a number, not the number
_OTHER = "IDENT"  # any other identifier in the context
# Closed-class cues the model weighs beside the n-grams: words that say something was wrong or
# has changed, and who the value belongs to (a possessive, a pronoun, a relation, a business).
_CUES = {
    "wrong": re.compile(
        r"\b(?:wrong|typo\w*|mistyp\w*|misspel\w*|mistake|meant|correct\w*|fix|scratch|disregard|ignore|strike|oops|"
        r"whoops|my bad|sorry|apolog\w*|swapped|missed|off by|autocorrect|not (?:that|the) one|not right)\b"
        r"|错|不对|更正|纠正|修正|作废|忽略|不算|弄反|漏|少打|多打|手滑|为准|不是那个", re.I),
    "change": re.compile(
        r"\b(?:chang\w*|new|updat\w*|replac\w*|switch\w*|swap|no longer|anymore|outdated|old|dead|retired|closed|"
        r"deactivated|disconnected|ported|moved|going forward|from now on|from today|instead)\b"
        r"|换|改|新|更新|变|停机|停用|注销|不用|以后|旧|原来|之前|以前", re.I),
    "other": re.compile(
        r"\b(?:(?!(?:it|that|what|here|there|let|he|she|who|where|number|email)'s)[a-z]+'s|his|her|their|he|she|they|"
        rf"him|them)\b|他|她|{_ZH_KIN}|客服|前台|公司的|酒店|医院|诊所|餐厅|物业|供应商|快递|航空", re.I),
    "mine": re.compile(r"\b(?:my|mine|me|i)\b|我", re.I),
}


def contact_values(sentence: str) -> list[tuple[str, str]]:
    """The ``(kind, value)`` pairs of ``sentence`` a correction may give: each contact kind
    (phone, email: :func:`memos.text.patterns.value_kind`) it holds exactly one value of."""
    by_kind: dict[str, list[str]] = {}
    for ident in find_identifiers(sentence):
        kind = value_kind(ident)
        if kind is not None:
            by_kind.setdefault(kind, []).append(ident)
    return [(kind, values[0]) for kind, values in by_kind.items() if len(values) == 1]


def correction_context(sentences: Sequence[str], i: int) -> str:
    """What the classifier reads for a value in sentence ``i``: that sentence with the one
    before and the one after it ("Sorry, I mistyped that. +44 20 7946 0018")."""
    return " ".join(sentences[max(0, i - 1) : i + 2])


def correction_features(context: str, value: str) -> dict[str, float]:
    """The classifier's features of a value in its context, the value and any other identifier
    masked. Training and prediction share this."""
    masked = simplified(context.replace(value, _MASK))
    for other in find_identifiers(masked):  # another value's letters say nothing ("ana@old.example.com")
        masked = masked.replace(other, _OTHER)
    out = features(masked)
    cues = [name for name, rx in _CUES.items() if rx.search(masked)]
    out.update({f"x:{c}": 1.0 for c in cues})
    out.update({f"x:{a}&{b}": 1.0 for i, a in enumerate(cues) for b in cues[i + 1 :]})
    return out


class CorrectionClassifier(LinearModel):
    """The shipped linear model: ``score`` is the probability that a sentence gives its value
    as a new one for a value of the same kind given before. Its thresholds, one per language
    (Chinese for a context with Han characters, English otherwise), were chosen at training
    time; ``threshold`` replaces both."""

    def __init__(self, model: dict[str, Any] | None = None, *, threshold: float | None = None) -> None:
        super().__init__(CORRECTIONS_FILE, model, threshold=threshold)

    def score(self, context: str, value: str) -> float:
        """Probability that ``value``, said in ``context``, replaces a value given before."""
        return self.probability(correction_features(context, value))

    def threshold_for(self, context: str) -> float:
        """The score from which a value in ``context`` counts as a correction."""
        return self.thresholds["zh" if _CJK.search(context) else "en"]

    def corrections(self, sentences: Sequence[str], i: int) -> list[tuple[str, str]]:
        """The ``(kind, value)`` pairs sentence ``i`` of one message gives as corrections. A
        question gives none ("is ana@new.com the right email?" asks)."""
        if sentences[i].rstrip().endswith(("?", "？")):
            return []
        context = correction_context(sentences, i)
        return [(kind, value) for kind, value in contact_values(sentences[i])
                if self.score(context, value) >= self.threshold_for(context)]


@functools.lru_cache(maxsize=1)
def default_correction_classifier() -> CorrectionClassifier:
    """The shipped classifier, loaded once per process."""
    return CorrectionClassifier()
