"""Fit the revocation classifier's head on the fine-tuned MiniLM rule model's sentence vectors.

    pip install -e '.[train]'   # scikit-learn; no torch: the encoder is the shipped rule model, unchanged
    python -m benchmarks.revocations_minilm --model-dir ../shared/models/all-MiniLM-L6-v2/onnx

Reads the English *train* splits of ``tests/data/rules/revocations.tsv`` (revocations and hard
negatives, among them requests that restate a rule in its words) and of the rule corpus (every
sentence a negative), takes each sentence's vector from
:meth:`memos.text.classifiers.rules_minilm.MiniLMRuleClassifier.vectors`, and fits a class-balanced
logistic regression on them (``C``). Its threshold, on the mean of its log-odds and the n-gram
model's, is chosen as the n-gram model's is: the lowest score at which the 5-fold
cross-validated precision of that mean reaches ``PRECISION`` (both models fitted on four
fifths, scored on the fifth). Writes ``memos/text/revocations_minilm.npz``, with the SHA-256 of
the rule weights whose vectors it was fitted on (refit it whenever ``benchmarks.rules_minilm``
writes new ones); ``python -m benchmarks.revocations evaluate`` then measures it.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memos.text.classifiers.revocations import REVOCATIONS_MINILM_FILE
from memos.text.classifiers.rules import features
from memos.text.classifiers.rules_minilm import MINILM_FILE

from .revocations import PRECISION, load_revocations
from .revocations import C as NGRAM_C
from .rules import fit_on_model_dir, load_corpus

MIX = 0.5  # the two models' log-odds count equally, as for rules
# Cross-validated on the English train sentences, precision at recall 0.8 of the head alone
# was 0.71 at C 0.3, 0.62 at 1, 0.61 at 3 and 0.58 at 10
C = 0.3


def rule_weights_sha256() -> str:
    """The SHA-256 of the shipped rule weights, whose vectors the head reads."""
    return hashlib.sha256(MINILM_FILE.read_bytes()).hexdigest()


def english_train() -> list[dict[str, str]]:
    """The sentences the head is fitted on, with label ``revoke`` or ``none``."""
    rows = [r for r in load_revocations() if r["lang"] == "en" and r["split"] == "train"]
    return rows + [{**r, "label": "none"} for r in load_corpus() if r["lang"] == "en" and r["split"] == "train"]


def train(model_dir: Path, out: Path = REVOCATIONS_MINILM_FILE) -> dict[str, Any]:
    """Fit and write the head (see the module docs); returns its cross-validated numbers."""
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    from memos.text.classifiers.rules_minilm import MiniLMRuleClassifier

    rows = english_train()
    texts = [r["text"] for r in rows]
    y = np.array([r["label"] == "revoke" for r in rows], dtype=int)
    encoder = MiniLMRuleClassifier(model_dir)
    x = np.vstack([encoder.vectors(texts[i : i + 64]) for i in range(0, len(texts), 64)])
    folds = StratifiedKFold(5, shuffle=True, random_state=0)
    head = LogisticRegression(C=C, max_iter=5000, class_weight="balanced")
    neural = cross_val_predict(head, x, y, cv=folds, method="decision_function")
    grams = DictVectorizer().fit_transform([features(t) for t in texts])
    p = cross_val_predict(LogisticRegression(C=NGRAM_C, max_iter=5000, class_weight="balanced"), grams, y, cv=folds,
                          method="predict_proba")[:, 1]
    p = np.clip(p, 1e-6, 1 - 1e-6)
    mixed = MIX * neural + (1 - MIX) * np.log(p / (1 - p))
    gold = y == 1

    def precision(t: float) -> float:
        chosen = mixed >= math.log(t / (1 - t))
        return float(gold[chosen].mean()) if chosen.any() else 0.0

    threshold = float(round(min(t for t in np.arange(0.30, 0.991, 0.01) if precision(t) >= PRECISION), 2))
    chosen = mixed >= math.log(threshold / (1 - threshold))
    cv = {"n": len(rows), "revocations": int(gold.sum()), "precision": round(precision(threshold), 3),
          "recall": round(float(chosen[gold].mean()), 3)}
    head.fit(x, y)
    # the vectors are the rule model's: a head is valid only beside the rule weights it was fitted on
    np.savez_compressed(out, mix=np.float32(MIX), threshold=np.float32(threshold),
                        head_w=head.coef_[0].astype(np.float32), head_b=np.float32(head.intercept_[0]),
                        encoder_sha256=np.array(rule_weights_sha256()))
    print(f"wrote {out}: threshold {threshold}, cross-validated on the English train split {cv}")
    return cv


def main(argv: Sequence[str] | None = None) -> int:
    return fit_on_model_dir("python -m benchmarks.revocations_minilm", (__doc__ or "").split("\n\n")[0],
                            REVOCATIONS_MINILM_FILE, train, argv)


if __name__ == "__main__":
    raise SystemExit(main())
