"""The rule classifier with all-MiniLM-L6-v2 behind it, for English sentences.

The character n-gram model (:class:`~memos.text.classifiers.rules.RuleClassifier`) sees words, not what a
sentence does: "Please cancel my 2pm meeting" and "Never book morning meetings" share its cue
words. all-MiniLM-L6-v2, the embedding model memos already runs, was fine-tuned for the
question "is this a rule the user sets?" by training only its biases and layer norms (30,720
numbers, "BitFit") and a linear head on its mean-pooled output; those numbers ship with the
package (``rules_minilm.npz``), and ONNX Runtime puts them in place of the model's own when it
loads the model (the model file is the user's, unchanged). The sentence's score is the mean of
the two models' log-odds; the threshold was chosen on the fifth of the corpus's English train
split that these weights were not fitted on (``benchmarks/rules_minilm.py``). Chinese, Japanese and Korean
sentences are judged by the n-gram model alone (the model's vocabulary is English), as is
every sentence when the model cannot be loaded.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .rules import RuleClassifier, RuleJudgement, bare, could_be_users, default_classifier

__all__ = ["MINILM_FILE", "MiniLMRuleClassifier", "mixed"]

log = logging.getLogger("memos.rules")

MINILM_FILE = Path(__file__).with_name("rules_minilm.npz")


def mixed(logit: float, p: float, mix: float) -> float:
    """The probability whose log-odds are ``mix`` times ``logit`` plus ``1 - mix`` times those
    of probability ``p`` (a neural head's and an n-gram model's)."""
    p = min(1 - 1e-6, max(1e-6, p))
    z = mix * logit + (1 - mix) * math.log(p / (1 - p))
    return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))


class MiniLMRuleClassifier:
    """Judges English sentences with fine-tuned all-MiniLM-L6-v2 and the n-gram model
    together, other sentences with the n-gram model (see the module docs). Raises
    ``FileNotFoundError`` when the embedding model is not there, ``ValueError`` when it
    is not all-MiniLM-L6-v2."""

    name = "classifier"

    def __init__(self, model_dir: str | Path | None = None, *, ngrams: RuleClassifier | None = None,
                 weights: Path = MINILM_FILE, threshold: float | None = None,
                 long_message_threshold: float = 0.85) -> None:
        from ..embeddings import OnnxEmbedder

        data = np.load(weights)
        self.ngrams = ngrams or default_classifier()
        self.mix = float(data["mix"])
        self.threshold = float(data["threshold"] if threshold is None else threshold)
        if not 0.0 < self.threshold < 1.0:
            raise ValueError(f"threshold must be in (0, 1), got {self.threshold}")
        # a sentence of a long message (a story, a review): the n-gram model's bar
        self.long_message_threshold = max(self.threshold, float(long_message_threshold))
        if not self.long_message_threshold < 1.0:
            raise ValueError(f"long_message_threshold must be below 1, got {long_message_threshold}")
        self._head_w = data["head_w"].astype(np.float32)
        self._head_b = float(data["head_b"])
        overrides = {k: data[k] for k in data.files if k.startswith("m.")}
        self._model = OnnxEmbedder(model_dir, threads=1, initializers=overrides)
        if self._model.dim != self._head_w.shape[0] or self._model.name != "all-MiniLM-L6-v2":
            raise ValueError(f"the rule model was fine-tuned from all-MiniLM-L6-v2, not {self._model.name}")
        self._cache: dict[str, float] = {}
        self._vectors: dict[str, np.ndarray] = {}

    def reads(self, sentence: str) -> bool:
        """Whether the model judges ``sentence``: it could be the user's rule at all
        (:func:`~memos.text.classifiers.rules.could_be_users`: it has words, in a language the models read),
        and is not mostly in Chinese (which the n-gram model judges alone)."""
        return could_be_users(sentence) and bool(self._model.covers(sentence))

    def vectors(self, sentences: Sequence[str]) -> np.ndarray:
        """The fine-tuned model's sentence vectors (mean-pooled, one row per sentence, read as
        :func:`~memos.text.classifiers.rules.bare` gives them), kept for the newest texts: the revocation
        classifier's head reads them too (:class:`~memos.text.classifiers.revocations.MiniLMRevocationClassifier`)."""
        if not sentences:
            return np.zeros((0, self._head_w.shape[0]), dtype=np.float32)
        # read from ``got``: another thread may clear the cache meanwhile
        got = {s: v for s in sentences if (v := self._vectors.get(s)) is not None}
        todo = [s for s in dict.fromkeys(sentences) if s not in got]
        if todo:
            new = dict(zip(todo, self._model.pooled([bare(s) for s in todo]), strict=True))
            got.update(new)
            if len(self._vectors) > 4096:
                self._vectors.clear()
            self._vectors.update(new)
        return np.stack([got[s] for s in sentences])

    def _logits(self, sentences: list[str]) -> list[float]:
        return [float(z) for z in self.vectors(sentences) @ self._head_w + self._head_b]

    def scores(self, sentences: Sequence[str]) -> list[float]:
        """Probability that each sentence states a rule (computed once per text)."""
        # read from ``got``: another thread may clear the cache meanwhile (as in vectors())
        got = {s: p for s in sentences if (p := self._cache.get(s)) is not None}
        todo = [s for s in dict.fromkeys(sentences) if s not in got]
        if todo:
            english = [s for s in todo if self.reads(s)]
            neural = dict(zip(english, self._logits(english), strict=True)) if english else {}
            for s in todo:
                p = self.ngrams.score(s)
                got[s] = mixed(neural[s], p, self.mix) if s in neural else min(1 - 1e-6, max(1e-6, p))
            if len(self._cache) > 16384:
                self._cache.clear()
            self._cache.update({s: got[s] for s in todo})
        return [got[s] for s in sentences]

    def score(self, sentence: str) -> float:
        """Probability that ``sentence`` states a rule."""
        return self.scores([sentence])[0]

    def judge(self, sentences: Sequence[str]) -> list[RuleJudgement]:
        """One judgement per sentence of one message (in one of more than two sentences, a
        sentence must reach ``long_message_threshold``, as with the n-gram model); the n-gram
        model's judgement for a sentence the MiniLM model does not cover."""
        return self._judge(sentences, self.long_message_threshold if len(sentences) > 2 else self.threshold)

    def judge_each(self, texts: Sequence[str]) -> list[RuleJudgement]:
        """One judgement per text, each as a message of its own (scored in one batch)."""
        return self._judge(texts, self.threshold, each=True)

    def _judge(self, sentences: Sequence[str], bar: float, *, each: bool = False) -> list[RuleJudgement]:
        covered = [self._model.covers(s) for s in sentences]
        alone = ((self.ngrams.judge_each if each else self.ngrams.judge)(sentences)) if not all(covered) else []
        return [RuleJudgement(s, self.ngrams.kind(s) if p >= bar else "none", round(p, 4), self.name)
                if c else alone[i] for i, (s, p, c) in enumerate(zip(sentences, self.scores(sentences), covered, strict=True))]

    rules = RuleClassifier.rules  # the sentences of a text that state rules, through this judge()


def load(model_dir: str | Path | None = None, *, download: bool = True) -> MiniLMRuleClassifier | None:
    """The MiniLM rule classifier, or ``None`` (logged) when the model cannot be loaded.
    With ``download=False``, only a model already on disk (``MEMOS_EMBEDDING_MODEL_DIR`` or
    Chroma's cache) is used."""
    from ..embeddings import resolve_model_dir

    try:
        return MiniLMRuleClassifier(resolve_model_dir(model_dir, download=download))
    except Exception as exc:  # no model here, another model, no weights file: the n-gram model judges alone
        log.info("rules are judged by the n-gram model alone (%s)", exc)
        return None
