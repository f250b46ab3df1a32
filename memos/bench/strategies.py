"""Context strategies compared in the benchmarks, all on the same token counter and budget.

- ``full_history``: every message (no budget): the upper bound and the cost reference;
- ``sliding_window``: the most recent messages that fit;
- ``summary_buffer``: one running summary (memos' offline summariser) + recent messages,
  LangChain's ConversationSummaryBuffer;
- ``rag_only``: recent messages + the older messages nearest to the query (dense top-k
  from Chroma, all-MiniLM-L6-v2), no summary, no facts;
- ``search``: plain search, no recent window: every earlier message ranked by dense +
  BM25 (SQLite FTS5; Chinese as character bigrams) fused by reciprocal rank, as many as fit
  the whole budget;
- ``bm25``: the same with BM25 alone (the character-bigram BM25 of Chinese benchmarks);
- ``memos``: :class:`memos.Memory`.

``new_session()`` starts a new chat of the same user (the cross-session benchmark): the
window and the summary buffer start empty, the searches keep every earlier message, memos
opens a new session on the same store.

Every strategy appends the query (when there is one) as the last user message and stays
within the budget (except ``full_history``). The strategies that embed share one
:class:`CachedEmbedder`, so a benchmark that replays the same text many times embeds it once.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import tempfile
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..core.config import MemosSettings
from ..core.messages import Message
from ..core.tokens import TokenCounter
from ..session.store import MemoryStore
from ..text.embeddings import Embedder, TokenStates, load_embedder
from ..tiers.archival import ChromaBackend, rrf
from ..tiers.extract import RuleExtractor
from ..tiers.warm import ExtractiveSummarizer, SummaryPlan

__all__ = ["ALL_STRATEGIES", "STRATEGIES", "bigram_terms", "CachedEmbedder", "Strategy", "embedding_model_name", "make_strategy",
           "shared_embedder"]


class CachedEmbedder:
    """An :class:`~memos.text.embeddings.Embedder` that remembers the vector of every text it saw."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.covers = getattr(inner, "covers", lambda text: True)
        self._vectors: dict[str, np.ndarray] = {}
        self._tokens: dict[str, TokenStates] = {}
        self._lock = threading.Lock()
        if callable(getattr(inner, "with_tokens", None)):  # token states, where the model gives them
            self.with_tokens = self._with_tokens

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            vectors = self.inner(missing)
            with self._lock:
                self._vectors.update(zip(missing, vectors, strict=True))
        with self._lock:
            return np.stack([self._vectors[t] for t in texts]) if texts else self.inner([])

    def _with_tokens(self, texts: Sequence[str]) -> tuple[np.ndarray, list[TokenStates]]:
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._tokens))
        if missing:
            vectors, states = self.inner.with_tokens(missing)  # type: ignore[attr-defined]
            with self._lock:
                self._vectors.update(zip(missing, vectors, strict=True))
                self._tokens.update(zip(missing, states, strict=True))
        with self._lock:
            if not texts:
                return np.zeros((0, 0), dtype=np.float32), []
            return np.stack([self._vectors[t] for t in texts]), [self._tokens[t] for t in texts]


_SHARED: dict[str, CachedEmbedder | None] = {}


def shared_embedder() -> CachedEmbedder | None:
    """The process-wide cached embedding model: ``MEMOS_EMBEDDING_MODEL_DIR``'s, else
    all-MiniLM-L6-v2 (None when no model can be loaded)."""
    if "default" not in _SHARED:
        inner = load_embedder()
        _SHARED["default"] = CachedEmbedder(inner) if inner is not None else None
    return _SHARED["default"]


def embedding_model_name() -> str | None:
    """The name of the model the strategies embed with (:func:`shared_embedder`), None when
    they run on keywords alone; recorded with each benchmark's results."""
    embedder = shared_embedder()
    return embedder.name if embedder is not None else None


class Strategy(Protocol):
    """Takes messages one by one and builds a prompt for a query."""

    name: str

    def add(self, message: dict[str, Any]) -> None:
        """Take the next message of the conversation."""
        ...

    def context(self, query: str | None) -> list[dict[str, Any]]:
        """The prompt for ``query`` (appended as the last user message), or for the
        conversation as it stands when ``query`` is None."""
        ...

    def new_session(self, label: str) -> None:
        """Start a new chat of the same user, called ``label``."""
        ...

    def close(self) -> None:
        """Release resources."""
        ...


def _query(query: str | None) -> list[dict[str, Any]]:
    return [] if query is None else [{"role": "user", "content": query}]


def _fit_recent(messages: list[dict[str, Any]], sizes: list[int], room: int) -> list[dict[str, Any]]:
    kept: list[dict[str, Any]] = []
    for m, n in zip(reversed(messages), reversed(sizes), strict=True):
        if n > room:
            break
        kept.append(m)
        room -= n
    return kept[::-1]


class FullHistory:
    """Every message; no budget."""

    name = "full_history"

    def __init__(self, counter: TokenCounter) -> None:
        self.messages: list[dict[str, Any]] = []

    def add(self, message: dict[str, Any]) -> None:
        self.messages.append(message)

    def context(self, query: str | None) -> list[dict[str, Any]]:
        return [*self.messages, *_query(query)]

    def new_session(self, label: str) -> None:
        pass  # every message of every session

    def close(self) -> None:
        pass


class SlidingWindow:
    """The most recent messages that fit the budget."""

    name = "sliding_window"

    def __init__(self, counter: TokenCounter, budget: int) -> None:
        self.counter, self.budget = counter, budget
        self.messages: list[dict[str, Any]] = []
        self.sizes: list[int] = []

    def add(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        self.sizes.append(self.counter.count_message(message))

    def context(self, query: str | None) -> list[dict[str, Any]]:
        q = _query(query)
        room = self.budget - self.counter.count_messages(q)
        return [*_fit_recent(self.messages, self.sizes, room), *q]

    def new_session(self, label: str) -> None:
        self.messages, self.sizes = [], []  # a chat window sees its own chat only

    def close(self) -> None:
        pass


class SummaryBuffer:
    """A running summary of older messages plus the recent ones (LangChain style)."""

    name = "summary_buffer"

    def __init__(self, counter: TokenCounter, budget: int) -> None:
        self.counter, self.budget = counter, budget
        self.summarizer = ExtractiveSummarizer(counter)
        self.summary = ""
        self.recent: list[Message] = []
        self.seq = 0

    def add(self, message: dict[str, Any]) -> None:
        self.recent.append(Message(id=str(self.seq), seq=self.seq, data=message, tokens=self.counter.count_message(message)))
        self.seq += 1
        if sum(m.tokens for m in self.recent) > self.budget * 0.6:
            fold: list[Message] = []
            while self.recent and sum(m.tokens for m in self.recent) > self.budget * 0.4:
                fold.append(self.recent.pop(0))
            plan = SummaryPlan("incremental" if self.summary else "full", self.summary or None, tuple(fold),
                               int(self.budget * 0.25), fold[-1].seq)
            self.summary = self.summarizer.summarize(plan)

    def context(self, query: str | None) -> list[dict[str, Any]]:
        q = _query(query)
        head = [{"role": "system", "content": "Summary of the conversation so far:\n" + self.summary}] if self.summary else []
        room = self.budget - self.counter.count_messages([*head, *q])
        msgs = [m.data for m in self.recent]
        return [*head, *_fit_recent(msgs, [m.tokens for m in self.recent], room), *q]

    def new_session(self, label: str) -> None:
        self.summary, self.recent = "", []  # a summary buffer belongs to its chat

    def close(self) -> None:
        pass


class RagOnly:
    """Recent messages (half the budget) plus the older messages nearest to the query."""

    name = "rag_only"

    def __init__(self, counter: TokenCounter, budget: int, top_k: int = 30) -> None:
        self.counter, self.budget, self.top_k = counter, budget, top_k
        self.messages: list[dict[str, Any]] = []
        self.sizes: list[int] = []
        self.embedded = 0
        self.boundary = 0  # where the current chat starts (its recent window cannot reach before it)
        self.backend = ChromaBackend.ephemeral()
        self.namespace = f"rag-{uuid.uuid4().hex}"
        self.embedder = shared_embedder()

    def add(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        self.sizes.append(self.counter.count_message(message))

    def _index(self) -> None:
        if self.embedder is None or self.embedded == len(self.messages):
            return
        texts = [str(m.get("content") or "") for m in self.messages[self.embedded :]]
        ids = [str(i) for i in range(self.embedded, len(self.messages))]
        self.backend.upsert(self.namespace, ids, self.embedder(texts), texts, [{"i": int(i)} for i in ids])
        self.embedded = len(self.messages)

    def context(self, query: str | None) -> list[dict[str, Any]]:
        q = _query(query)
        room = self.budget - self.counter.count_messages(q)
        recent = _fit_recent(self.messages[self.boundary :], self.sizes[self.boundary :], room // 2)
        first_recent = len(self.messages) - len(recent)
        lines: list[str] = []
        if query is None:  # no question: the latest user message is what to look up
            query = next((str(m.get("content") or "") for m in reversed(self.messages) if m.get("role") == "user"), "")
        if self.embedder is not None and first_recent > 0 and query:
            self._index()
            vec = self.embedder([query])[0]
            header = self.counter.count_message({"role": "system", "content": "Relevant earlier messages:\n"})
            left = room - sum(self.sizes[first_recent:]) - header
            for i, _ in self.backend.query(self.namespace, vec, self.top_k):
                idx = int(i)
                if idx >= first_recent:
                    continue
                line = f"- {self.messages[idx].get('content')}"
                cost = self.counter.count(line) + 1
                if cost <= left:
                    lines.append(line)
                    left -= cost
        head = [{"role": "system", "content": "Relevant earlier messages:\n" + "\n".join(lines)}] if lines else []
        return [*head, *recent, *q]

    def new_session(self, label: str) -> None:
        self.boundary = len(self.messages)  # RAG searches every earlier message; the recent window restarts

    def close(self) -> None:
        self.backend.delete(self.namespace)


_WORDS = re.compile(r"\w+", re.UNICODE)
_HAN_RUN = re.compile(r"[\u3400-\u9fff]+")


def bigram_terms(text: str) -> list[str]:
    """BM25 terms of ``text``: words, and each run of Chinese as its character bigrams (a
    single character alone), the usual way to search Chinese without a word segmenter."""
    out: list[str] = []
    for word in _WORDS.findall(text.lower()):
        for part in re.split(r"([\u3400-\u9fff]+)", word):
            if not part:
                continue
            if _HAN_RUN.fullmatch(part):
                out += [part[i : i + 2] for i in range(len(part) - 1)] if len(part) > 1 else [part]
            else:
                out.append(part)
    return out


class PlainSearch:
    """Every earlier message ranked for the query by dense (all-MiniLM-L6-v2) and BM25
    (SQLite FTS5 over :func:`bigram_terms`) search fused by reciprocal rank, as many as fit
    the budget: plain search over the raw turns, with no window, summary or facts. With
    ``dense=False``, BM25 alone."""

    name = "search"

    def __init__(self, counter: TokenCounter, budget: int, *, dense: bool = True) -> None:
        self.counter, self.budget = counter, budget
        self.messages: list[dict[str, Any]] = []
        self.embedded = 0
        self.backend = ChromaBackend.ephemeral()
        self.namespace = f"search-{uuid.uuid4().hex}"
        self.embedder = shared_embedder() if dense else None
        if not dense:
            self.name = "bm25"
        self.db = sqlite3.connect(":memory:", check_same_thread=False)
        self.db.execute("CREATE VIRTUAL TABLE turns USING fts5(body, tokenize='unicode61')")

    def add(self, message: dict[str, Any]) -> None:
        terms = " ".join(bigram_terms(_body(message)))
        self.db.execute("INSERT INTO turns(rowid, body) VALUES (?, ?)", (len(self.messages), terms))
        self.messages.append(message)

    def _index(self) -> None:
        if self.embedder is None or self.embedded == len(self.messages):
            return
        texts = [_body(m) for m in self.messages[self.embedded :]]
        ids = [str(i) for i in range(self.embedded, len(self.messages))]
        self.backend.upsert(self.namespace, ids, self.embedder(texts), texts, [{"i": int(i)} for i in ids])
        self.embedded = len(self.messages)

    def context(self, query: str | None) -> list[dict[str, Any]]:
        q = _query(query)
        if query is None:
            query = next((_body(m) for m in reversed(self.messages) if m.get("role") == "user"), "")
        rankings: list[list[str]] = []
        if query and self.messages:
            terms = list(dict.fromkeys(bigram_terms(query)))
            if terms:
                match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
                rows = self.db.execute("SELECT rowid FROM turns WHERE turns MATCH ? ORDER BY bm25(turns) LIMIT 200",
                                       (match,)).fetchall()
                rankings.append([str(r[0]) for r in rows])
            if self.embedder is not None:
                self._index()
                vec = self.embedder([query])[0]
                rankings.append([i for i, _ in self.backend.query(self.namespace, vec, 200)])
        fused = rrf(rankings)
        header = "Relevant earlier messages:\n"
        left = self.budget - self.counter.count_messages([*q, {"role": "system", "content": header}])
        lines: list[str] = []
        for i in sorted(fused, key=lambda k: -fused[k]):
            line = f"- {_body(self.messages[int(i)])}"
            cost = self.counter.count(line) + 1
            if cost <= left:
                lines.append(line)
                left -= cost
        head = [{"role": "system", "content": header + "\n".join(lines)}] if lines else []
        return [*head, *q]

    def new_session(self, label: str) -> None:
        pass  # it searches every earlier message

    def close(self) -> None:
        self.backend.delete(self.namespace)
        self.db.close()


def _body(message: dict[str, Any]) -> str:
    return str(message.get("content") or "")


class MemosStrategy:
    """memos itself, on a SQLite file and a Chroma folder of its own; each chat of the user a
    session of its own on that store."""

    name = "memos"

    def __init__(self, counter: TokenCounter, budget: int, settings: MemosSettings | None = None) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="memos-bench-"))
        base = settings or MemosSettings.from_env()
        from dataclasses import replace

        self.counter = counter
        self.settings = replace(base, budget_tokens=budget)
        self.store = MemoryStore(self.dir / "memos.db", embedder=shared_embedder())
        self.memory = self._open("bench")
        self.flushed = False

    def _open(self, label: str) -> Any:
        # the offline summariser and rules, as the other strategies (an LLM in the environment is not used)
        return self.store.session(label, user="bench", settings=self.settings, counter=self.counter,
                                  summarizer=ExtractiveSummarizer(self.counter), extractor=RuleExtractor())

    def add(self, message: dict[str, Any]) -> None:
        self.memory.add(message)
        self.flushed = False

    def context(self, query: str | None) -> list[dict[str, Any]]:
        if not self.flushed:
            self.memory.flush()  # every archived vector written before it is asked
            self.flushed = True
        return self.memory.context(query=query, tools=[])  # the baselines send no tools either

    def new_session(self, label: str) -> None:
        self.memory.close()
        self.memory = self._open(label)
        self.flushed = False

    def close(self) -> None:
        try:
            self.memory.close()
            self.store.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


STRATEGIES = ("full_history", "sliding_window", "summary_buffer", "rag_only", "search", "memos")
# bm25 is run where keyword search is the question (the Chinese benchmark)
ALL_STRATEGIES = (*STRATEGIES, "bm25")


def make_strategy(name: str, counter: TokenCounter, budget: int) -> Strategy:
    """A fresh strategy by name."""
    if name == "full_history":
        return FullHistory(counter)
    if name == "sliding_window":
        return SlidingWindow(counter, budget)
    if name == "summary_buffer":
        return SummaryBuffer(counter, budget)
    if name == "rag_only":
        return RagOnly(counter, budget)
    if name == "search":
        return PlainSearch(counter, budget)
    if name == "bm25":
        return PlainSearch(counter, budget, dense=False)
    if name == "memos":
        return MemosStrategy(counter, budget)
    raise ValueError(f"unknown strategy {name!r}; expected one of {ALL_STRATEGIES}")
