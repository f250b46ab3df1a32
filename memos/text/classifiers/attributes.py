"""Attributes the user states: is "my X is Y" a value to keep under the key X, or talk?

"My email is dana@example.org", "my daughter is 7", "我的生日是5月29号" state what the
assistant should know by name later; "my family is everything to me", "my head is killing
me", "我的意思是我们再等等" share the frame and are talk. Which is which is decided by a
measured classifier, not a word list: a logistic regression over the key's and the value's
character and word n-grams and the value's shape (digits, capitals, quotes, length). Its
weights ship with the package (``attributes_model.json.gz``); they were fitted by
``benchmarks/attributes.py`` on the *train* split of ``tests/data/facts/attributes.tsv``
(English and Chinese sentences in the frame), and its precision and recall on the held-back
*test* split and on turns drawn from LoCoMo are recorded in
``benchmarks/results/attributes.json``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..script import simplified
from ..sentences import ABBREVIATION
from .linear import LinearModel
from .rules import _CJK, features

__all__ = ["ATTRIBUTES_FILE", "Attribute", "AttributeClassifier", "attribute_features", "current_key",
           "default_attribute_classifier", "find_attributes"]

ATTRIBUTES_FILE = Path(__file__).with_name("attributes_model.json.gz")

# An adverb between the copula and the value ("my number is actually …", "我的手机号其实是…")
# belongs to neither the key nor the value: a closed class of words, read as part of the frame.
_ADVERB = r"(?:now|actually|really|still|also|just|currently|in fact|definitely|officially|truly)"
_ADVERB_ZH = r"(?:其实|现在|目前|如今|还|也|已经|就|真的|确实|一直|仍然|依然)"
# the value runs to the end of the clause; a dot before a non-space is part of it (an email,
# "1.78 m"), as is a title's ("Dr. Alvarez")
_MY_X_IS = re.compile(rf"\bmy ((?:[a-z]+ ){{0,2}}[a-z]+) (?:is|are|was changed to)(?: {_ADVERB}(?= ))? "
                      rf"((?:{ABBREVIATION}\s|[^.;!?\n]|\.(?=\S)){{1,80}})", re.IGNORECASE)
# "我的生日是…", "我最喜欢的作家是…", "我婶婶的生日是…" (the key ends at the first 是 / 叫)
_MY_X_IS_ZH = re.compile(rf"我(?:的|([\u4e00-\u9fff]{{1,3}})的)([\u4e00-\u9fff]{{1,6}}?){_ADVERB_ZH}?(?:是|叫)"
                         r"([^。！？!?；;\n]{1,40})")
# a comma then a function word opens another clause ("ORD-55121, can you track it?"), which is
# not part of the value; a comma before anything else may be ("42 Rua do Ouro, Lisbon"); so
# does "and" before another subject ("Li Wei and my birthday is May 29")
_NEXT_CLAUSE = re.compile(r"(?:,\s*(?:and|but|so|or|because|since|though|although|which|if|when|while|i|i'm|you|we|he|"
                          r"she|it|they|can|could|would|will|please|do|does|did|is|are|what|how|why|where|who)\b|"
                          r"(?<!\s)\s+(?:and|but)\s+(?:my|i|i'm|we|it's)\b).*",
                          re.IGNORECASE | re.DOTALL)
_CURRENT = re.compile(r"^(?:(?:new|current|correct|right|updated|actual|real) (?=\S)|(?:最新的|新的|现在的|正确的)(?=\S)"
                      r"|新(?=手机|电话|号码|邮箱|地址|微信))", re.IGNORECASE)
_DIGIT = re.compile(r"\d")
_CAPITAL = re.compile(r"(?:^|\s)[A-Z][a-z]")
_LATIN = re.compile(r"[A-Za-z]")


@dataclass(frozen=True)
class Attribute:
    """One "my X is Y" of a sentence: the key, the value, and how sure the classifier is
    that it is an attribute rather than talk."""

    key: str
    value: str
    score: float


def current_key(key: str) -> str:
    """``key`` without a word that says its value is the current one ("my new email is …",
    "我的新手机号是…"): the value is the key's, and replaces the one given before."""
    m = _CURRENT.match(_in_place(key))
    rest = key[m.end():] if m else key
    return rest if rest.strip() else key


def _in_place(text: str) -> str:
    """``text`` as the frames read it: Traditional Chinese as Simplified, when that keeps every
    character where it was (it almost always does), so that a match's span is the original's too."""
    read = simplified(text)
    return read if len(read) == len(text) else text


def find_attributes(sentence: str, *, chinese: bool = True) -> list[tuple[str, str]]:
    """The (key, value) pairs of ``sentence`` in the frame, English (and Chinese, with
    ``chinese``), before judging."""
    out = []
    at = 0
    while (m := _MY_X_IS.search(sentence, at)) is not None:
        value = _NEXT_CLAUSE.sub("", m.group(2)).strip()
        if value:
            out.append((m.group(1), value))
        at = m.start(2) + max(1, len(value))  # "… and my birthday is May 29" is read next
    for m in _MY_X_IS_ZH.finditer(_in_place(sentence)) if chinese else ():  # "我的手機號其實是…" as "我的手机号其实是…"
        said = [sentence[m.start(g):m.end(g)] if m.group(g) else None for g in (1, 2, 3)]
        key = f"{said[0]}的{said[1]}" if said[0] else str(said[1])
        value = str(said[2]).strip()
        if value:
            out.append((key, value))
    return out


def attribute_features(key: str, value: str) -> dict[str, float]:
    """The classifier's features of a (key, value) pair. Training and prediction share this."""
    out = {f"k|{g}": v for g, v in features(key).items() if g.startswith(("c:", "w:"))}
    out.update({f"v|{g}": v for g, v in features(value).items()})
    words = value.split()
    shape = {
        "s:digit": bool(_DIGIT.search(value)),
        "s:capital": bool(_CAPITAL.search(value)),
        "s:quote": any(q in value for q in "\"“”「」《》"),
        "s:latin_in_cjk": bool(_LATIN.search(value)) and not _LATIN.match(value[:1] or " ") and bool(_CJK.match(key)),
        "s:short": len(words) <= 3 and len(value) <= 24,
        "s:long": len(words) > 8 or len(value) > 30,
    }
    out.update({k: 1.0 for k, on in shape.items() if on})
    return out


class AttributeClassifier(LinearModel):
    """The shipped linear model: ``score`` is the probability that a (key, value) pair is an
    attribute of the user (or of someone of theirs) worth a keyed fact. Its thresholds, one
    per language, are the scores from which a pair counts as one, chosen at training time
    (:meth:`threshold_for`: Chinese for a key with Han characters, English otherwise);
    ``threshold`` replaces both."""

    def __init__(self, model: dict[str, Any] | None = None, *, threshold: float | None = None) -> None:
        super().__init__(ATTRIBUTES_FILE, model, threshold=threshold)

    def threshold_for(self, key: str) -> float:
        """The threshold for a pair with this key (Chinese or English)."""
        return self.thresholds["zh" if _CJK.search(key) else "en"]

    def score(self, key: str, value: str) -> float:
        """Probability that ``value`` is the user's attribute ``key``."""
        return self.probability(attribute_features(key, value))

    def attributes(self, sentence: str, *, chinese: bool = True) -> list[Attribute]:
        """The attributes ``sentence`` states: pairs in the frame (Chinese ones only with
        ``chinese``) that the model keeps."""
        found = [Attribute(k, v, round(self.score(k, v), 4)) for k, v in find_attributes(sentence, chinese=chinese)]
        return [Attribute(current_key(a.key), a.value, a.score) for a in found if a.score >= self.threshold_for(a.key)]


@functools.lru_cache(maxsize=1)
def default_attribute_classifier() -> AttributeClassifier:
    """The shipped classifier, loaded once per process."""
    return AttributeClassifier()
