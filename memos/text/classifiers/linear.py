"""The shipped linear models' common part: weights as the training scripts write them."""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["LinearModel"]


class LinearModel:
    """A logistic regression over named features, read from gzipped JSON (``bias``,
    ``weights`` by feature name, ``thresholds`` by language) or given as ``model``;
    ``threshold`` replaces every language's."""

    def __init__(self, path: Path, model: dict[str, Any] | None = None, *, threshold: float | None = None) -> None:
        data = model if model is not None else json.loads(gzip.decompress(path.read_bytes()).decode("utf-8"))
        self.bias = float(data["bias"])
        self.weights: dict[str, float] = {str(k): float(v) for k, v in data["weights"].items()}
        self.thresholds = {str(k): float(v) if threshold is None else float(threshold)
                           for k, v in data["thresholds"].items()}
        for t in self.thresholds.values():
            if not 0.0 < t < 1.0:
                raise ValueError(f"threshold must be in (0, 1), got {t}")

    def probability(self, features: Mapping[str, float]) -> float:
        """The model's probability for a sentence with these features."""
        z = self.bias + sum(self.weights.get(f, 0.0) * v for f, v in features.items())
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))
