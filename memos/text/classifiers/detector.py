"""The rule detector memos uses: the n-gram classifier, with the fine-tuned MiniLM head for
English sentences when the embedding model is on disk (``MEMOS_RULE_MODEL``)."""

from __future__ import annotations

import threading

from ...core.config import environment
from . import rules_minilm
from .rules import RuleDetector, default_classifier

__all__ = ["default_detector"]

_DEFAULT: RuleDetector | None = None
_LOCK = threading.RLock()


def default_detector() -> RuleDetector:
    """The detector memos uses, loaded once per process. ``MEMOS_RULE_MODEL`` chooses it:
    ``auto`` (the default) is the n-gram classifier with fine-tuned all-MiniLM-L6-v2 for
    English sentences (:class:`~memos.text.classifiers.rules_minilm.MiniLMRuleClassifier`) when the
    embedding model is already on disk, else the n-gram classifier alone; ``minilm`` asks for
    the model (downloaded the usual way when missing; the n-gram classifier, logged, when it
    cannot load); ``ngrams`` is the n-gram classifier alone."""
    global _DEFAULT
    if _DEFAULT is None:
        with _LOCK:
            if _DEFAULT is None:
                wanted = environment().text.rule_model
                if wanted == "ngrams":
                    _DEFAULT = default_classifier()
                else:
                    _DEFAULT = rules_minilm.load(download=wanted == "minilm") or default_classifier()
    return _DEFAULT
