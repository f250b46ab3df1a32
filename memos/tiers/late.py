"""Late interaction: archived items matched to a query token by token.

A sentence vector is the mean of its tokens' states, so a message that answers a question
in one clause among several others sits far from the question in vector space. Late
interaction keeps each token's state (ColBERT's MaxSim, Khattab and Zaharia, 2020): an
item scores the mean, over the query's tokens, of each one's best cosine similarity to any
of the item's tokens, weighted by the query token's inverse document frequency among the
namespace's items (a token found everywhere, "the" or "?", says little; no word list).

The states are those the embedding model computes anyway for the item's vector (one
forward pass gives both; see :meth:`memos.text.embeddings.OnnxEmbedder.with_tokens`), used as
the model gives them, with no ColBERT training. Search uses the score as a third ranking
of the candidates dense and keyword search found, fused with theirs by reciprocal rank.

Stored per token: its vocabulary id (4 bytes) and its state as one int8 per dimension with
a float16 scale (386 bytes for a 384-dimensional model), which ranks as float32 does.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from ..storage.items import ArchiveItem
from ..storage.log import chunks
from ..text.embeddings import TokenStates

__all__ = ["TokenIndex", "idf_weights", "maxsim", "maxsim_packed", "pack", "unpack"]


class TokenIndex:
    """The token states of one namespace's archived items (stored in their rows by the
    flush), ranked against a query's, with each query token weighted by how many of the
    namespace's items hold it."""

    def __init__(self, engine: Engine, namespace: str) -> None:
        self.engine = engine
        self.namespace = namespace
        self._lock = threading.Lock()
        self._df: tuple[int, dict[int, int]] | None = None  # (items counted, document frequency per token id)

    def ranking(self, query: TokenStates, ids: Iterable[str]) -> list[str]:
        """``ids`` ranked by late interaction with ``query``, best first; those without
        token states (or of another namespace) are left out."""
        wanted = list(dict.fromkeys(ids))
        if not wanted or not len(query.ids):
            return []
        with Session(self.engine) as s:
            # looked up by id alone (the primary key): a namespace condition lets SQLite scan the namespace
            rows = [r for part in chunks(wanted) for r in s.exec(
                select(ArchiveItem.id, ArchiveItem.namespace, ArchiveItem.token_ids, ArchiveItem.token_states)
                .where(col(ArchiveItem.id).in_(part))).all() if r[1] == self.namespace and r[2] is not None]
            if not rows:
                return []
            df, documents = self._document_frequency(s)
        scores = maxsim_packed(query.vectors, idf_weights(query.ids, df, documents), [(r[2], r[3]) for r in rows])
        return [rows[i][0] for i in np.argsort(-scores, kind="stable")]

    def written(self, token_ids: Sequence[bytes]) -> None:
        """Count the token ids of items this process just stored (what other processes or
        deletions change meanwhile moves the weights too little to matter)."""
        with self._lock:
            if self._df is not None:
                for blob in token_ids:
                    _count_tokens(self._df[1], blob)
                self._df = (self._df[0] + len(token_ids), self._df[1])

    def reset(self) -> None:
        """Count again on next use (the namespace's token states were dropped)."""
        with self._lock:
            self._df = None

    def _document_frequency(self, s: Session) -> tuple[dict[int, int], int]:
        with self._lock:
            if self._df is None:
                df: dict[int, int] = {}
                n = 0
                for blob in s.exec(select(ArchiveItem.token_ids).where(ArchiveItem.namespace == self.namespace,
                                                                       col(ArchiveItem.token_ids).is_not(None))):
                    _count_tokens(df, blob)
                    n += 1
                self._df = (n, df)
            return self._df[1], self._df[0]


def _count_tokens(df: dict[int, int], token_ids: bytes) -> None:
    for t in np.unique(np.frombuffer(token_ids, dtype="<i4")).tolist():
        df[t] = df.get(t, 0) + 1


def pack(states: TokenStates) -> tuple[bytes, bytes]:
    """The token ids and the quantised states of one item, as stored."""
    vectors = np.asarray(states.vectors, dtype=np.float32)
    scale = np.abs(vectors).max(axis=1) / 127.0 if len(vectors) else np.zeros(0, dtype=np.float32)
    scale = np.where(scale > 0, scale, 1.0).astype(np.float16)
    quantised = np.clip(np.round(vectors / scale.astype(np.float32)[:, None]), -127, 127).astype(np.int8)
    return np.asarray(states.ids, dtype="<i4").tobytes(), scale.astype("<f2").tobytes() + quantised.tobytes()


def unpack(ids: bytes, vectors: bytes) -> tuple[np.ndarray, np.ndarray]:
    """The token ids and the (n, dim) float32 states stored by :func:`pack`."""
    token_ids = np.frombuffer(ids, dtype="<i4")
    n = len(token_ids)
    if n == 0:
        return token_ids, np.zeros((0, 0), dtype=np.float32)
    scale = np.frombuffer(vectors[: 2 * n], dtype="<f2").astype(np.float32)
    quantised = np.frombuffer(vectors[2 * n :], dtype=np.int8).reshape(n, -1)
    return token_ids, quantised.astype(np.float32) * scale[:, None]


def idf_weights(token_ids: Sequence[int] | np.ndarray, document_frequency: Mapping[int, int], documents: int) -> np.ndarray:
    """Each query token's weight: its inverse document frequency among ``documents`` items."""
    return np.array([math.log((documents + 1) / (document_frequency.get(int(t), 0) + 0.5)) for t in token_ids],
                    dtype=np.float32)


def maxsim(query: np.ndarray, weights: np.ndarray, items: Sequence[np.ndarray]) -> np.ndarray:
    """Each item's late-interaction score for ``query`` ((q, dim) token states): the
    ``weights``-weighted mean over query tokens of their best similarity to the item's
    tokens. An item with no tokens scores 0."""
    filled = [m for m in items if len(m)]
    stacked = np.concatenate(filled) if filled else np.zeros((0, query.shape[-1]), dtype=np.float32)
    return _scores(query, weights, stacked, np.ones(len(stacked), dtype=np.float32), [len(m) for m in items])


def maxsim_packed(query: np.ndarray, weights: np.ndarray, items: Sequence[tuple[bytes, bytes]]) -> np.ndarray:
    """:func:`maxsim` of items as :func:`pack` stored them, without unpacking each: one int8
    matrix for all, scaled after the product. An item of another dimension scores 0."""
    dim = query.shape[-1]
    lengths = [len(ids) // 4 for ids, _ in items]
    ok = [n > 0 and len(v) == n * (dim + 2) for (_, v), n in zip(items, lengths, strict=True)]
    lengths = [n if good else 0 for n, good in zip(lengths, ok, strict=True)]
    kept = [(v, n) for (_, v), n in zip(items, lengths, strict=True) if n]
    scale = np.frombuffer(b"".join(v[: 2 * n] for v, n in kept), dtype="<f2").astype(np.float32)
    stacked = np.frombuffer(b"".join(v[2 * n :] for v, n in kept), dtype=np.int8).reshape(-1, dim)
    return _scores(query, weights, stacked, scale, lengths)


def _scores(query: np.ndarray, weights: np.ndarray, stacked: np.ndarray, scale: np.ndarray,
            lengths: Sequence[int]) -> np.ndarray:
    """Scores of items whose tokens are the rows of ``stacked`` (times ``scale``), ``lengths``
    rows each in order (0 for an item with none)."""
    scores = np.zeros(len(lengths), dtype=np.float32)
    filled = [i for i, n in enumerate(lengths) if n]
    if not filled or not len(query) or float(weights.sum()) <= 0:
        return scores
    sims = (stacked.astype(np.float32) @ query.T) * scale[:, None]  # (all tokens of all items, q)
    starts = np.cumsum([0] + [lengths[i] for i in filled[:-1]])
    best = np.maximum.reduceat(sims, starts, axis=0)  # (items, q): each query token's best match per item
    scores[filled] = (best @ weights) / float(weights.sum())
    return scores
