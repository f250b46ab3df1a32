"""Revocations: which sentences lift a rule the user set earlier.

"I'm not vegetarian anymore", "You can book red-eye flights again", "出差不用只坐高铁了" lift a
rule; "I no longer eat meat" and "不再订早班机" set one in the same words, and "the airline
cancelled my flight" lifts nothing. As for rules (:mod:`memos.text.classifiers.rules`), telling them apart
is done by a measured classifier, not a phrase list: a logistic regression over the rule
classifier's features (:func:`memos.text.classifiers.rules.features`: character and word n-grams and
closed-class cues). Its weights ship with the package (``revocations_model.json.gz``); they
were fitted by ``benchmarks/revocations.py`` on the *train* splits of
``tests/data/rules/revocations.tsv`` (revocations and hard negatives, English and Chinese)
and of the rule corpus (every sentence of it a negative), and each language's threshold is
the lowest score at which the cross-validated precision on that split reaches 0.80
(a false revocation closes a rule it shares words with). Precision and recall
on the held-back *test* split are recorded in ``benchmarks/results/revocations.json``.

Where memos judges rules with fine-tuned all-MiniLM-L6-v2 (:mod:`memos.text.classifiers.rules_minilm`),
English sentences are judged by :class:`MiniLMRevocationClassifier`: the n-gram model together
with a linear head on that model's sentence vector, which it computes for the rule anyway
(``revocations_minilm.npz``, fitted by ``benchmarks/revocations_minilm.py``). The n-grams
still take some requests that restate a rule in its words ("Plan the drive to Faro avoiding
tolls again.") for ones that lift it; the head reads more of what the sentence does.

Which rule a revocation lifts is decided by the cold tier, which knows the current rules
(:meth:`memos.storage.facts.Invalidation.lifted`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .detector import default_detector
from .linear import LinearModel
from .rules import _CJK, could_be_users, features

if TYPE_CHECKING:
    from .rules_minilm import MiniLMRuleClassifier

__all__ = ["REVOCATIONS_FILE", "REVOCATIONS_MINILM_FILE", "MiniLMRevocationClassifier", "RevocationClassifier",
           "default_revocation_classifier"]

REVOCATIONS_FILE = Path(__file__).with_name("revocations_model.json.gz")
REVOCATIONS_MINILM_FILE = Path(__file__).with_name("revocations_minilm.npz")


class RevocationClassifier(LinearModel):
    """The shipped linear model: ``score`` is the probability that a sentence lifts a rule
    set earlier. Its thresholds, one per language (Chinese for a sentence with Han
    characters, English otherwise), were chosen at training time; ``threshold`` replaces
    both. ``judge`` is given the sentences of one message: when there are more than two, a
    sentence must reach ``long_message_threshold`` too, as for rules (a long chatty message
    holds many sentences that share a revocation's cue words: LoCoMo turns taken 25 -> 6 of
    4,124, MemDaily messages 2 -> 0 of 4,036)."""

    def __init__(self, model: dict[str, Any] | None = None, *, threshold: float | None = None,
                 long_message_threshold: float = 0.85) -> None:
        super().__init__(REVOCATIONS_FILE, model, threshold=threshold)
        if not 0.0 < long_message_threshold < 1.0:
            raise ValueError(f"long_message_threshold must be in (0, 1), got {long_message_threshold}")
        self.long_message_threshold = float(long_message_threshold)
        self._scores = functools.lru_cache(maxsize=16384)(self._score)

    def _score(self, sentence: str) -> float:
        if not could_be_users(sentence):
            return 0.0
        return self.probability(features(sentence))

    def score(self, sentence: str) -> float:
        """Probability that ``sentence`` lifts a rule set earlier."""
        return self._scores(sentence)

    def threshold_for(self, sentence: str) -> float:
        """The score from which ``sentence`` counts as a revocation: its language's threshold."""
        return self.thresholds["zh" if _CJK.search(sentence) else "en"]

    def judge(self, sentences: Sequence[str]) -> list[bool]:
        """Whether each sentence of one message lifts a rule set earlier."""
        floor = self.long_message_threshold if len(sentences) > 2 else 0.0
        return [self.score(s) >= max(self.threshold_for(s), floor) for s in sentences]


class MiniLMRevocationClassifier(RevocationClassifier):
    """The n-gram model, and for an English sentence that ``encoder`` (the fine-tuned MiniLM
    rule model) reads, the mean of its log-odds and those of a linear head on that sentence's
    vector (:meth:`~memos.text.classifiers.rules_minilm.MiniLMRuleClassifier.vectors`). The English
    threshold is the head file's, chosen for the mean; Chinese sentences keep the n-gram
    model's score and threshold."""

    def __init__(self, encoder: MiniLMRuleClassifier, *, weights: Path = REVOCATIONS_MINILM_FILE,
                 threshold: float | None = None, long_message_threshold: float = 0.85) -> None:
        super().__init__(threshold=threshold, long_message_threshold=long_message_threshold)
        data = np.load(weights)
        self.encoder = encoder
        self.mix = float(data["mix"])
        self._head_w = data["head_w"].astype(np.float32)
        self._head_b = float(data["head_b"])
        if threshold is None:
            self.thresholds["en"] = round(float(data["threshold"]), 4)

    def _score(self, sentence: str) -> float:
        from .rules_minilm import mixed

        p = super()._score(sentence)
        if not self.encoder.reads(sentence):
            return p
        return mixed(float(self.encoder.vectors([sentence])[0] @ self._head_w + self._head_b), p, self.mix)


def default_revocation_classifier() -> RevocationClassifier:
    """The classifier memos uses, loaded once per rule detector: :class:`MiniLMRevocationClassifier`
    when the rule detector (:func:`~memos.text.classifiers.rules.default_detector`) is the fine-tuned MiniLM
    model, else the n-gram model alone."""
    from .rules_minilm import MiniLMRuleClassifier

    global _DEFAULT
    detector = default_detector()
    with _LOCK:
        if _DEFAULT is None or _DEFAULT[0] is not detector:
            if isinstance(detector, MiniLMRuleClassifier) and REVOCATIONS_MINILM_FILE.is_file():
                clf: RevocationClassifier = MiniLMRevocationClassifier(detector)
            else:
                clf = RevocationClassifier()
            _DEFAULT = (detector, clf)
        return _DEFAULT[1]


_LOCK = threading.Lock()
_DEFAULT: tuple[Any, RevocationClassifier] | None = None  # the rule detector it was made for, and it
