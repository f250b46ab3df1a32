"""The memory store: one database and what every session on it shares.

A :class:`MemoryStore` owns the engine and the schema (on memos' own ``MetaData``), the
archive backend and the embedding model (each opened once, on first use), one indexing
thread for the archival vectors of all its sessions and a small pool that prepares
demotions in the background. Sessions are cheap views over it::

    store = MemoryStore("memos.db")
    mem = store.session("chat-2", user="ana")       # knows what ana set and told in chat-1

``Memory(session, user=..., store="memos.db")`` opens the same shared object (one per
URL in the process), so a thousand sessions run one indexing thread, not a thousand.

Whose memory a session reads and writes is its *scope* (``MemosSettings.share``): the hot
tier and the rolling summary always belong to the session; the facts (pinned rules
included) and the archive belong to the user (default), to the user's sessions with one
agent, or to the session alone.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import or_, text
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from .embeddings import Embedder, load_embedder
from .store import MessageRow, Namespace, Store, SummaryRow, namespace_key
from .text.search import KeywordIndex
from .tiers.archival import ArchivalTier, ArchiveBackend, ArchiveItem, ChromaBackend, Indexer, archive_keywords
from .tiers.cold import ColdTier, fact_keywords

if TYPE_CHECKING:
    from .memory import Memory

__all__ = ["MemoryStore", "UserDeletion", "scope_key"]

T = TypeVar("T")
log = logging.getLogger("memos.store")

_SHARED: dict[str, MemoryStore] = {}
_SHARED_LOCK = threading.Lock()


def scope_key(namespace: Namespace, share: str) -> str:
    """The stored key of what a session of ``namespace`` = (user, agent, session) shares:
    ``user``, ``user/agent`` or ``user/agent/session``."""
    depth = {"user": 1, "agent": 2, "session": 3}[share]
    return namespace_key(namespace[:depth])


@dataclass(frozen=True)
class UserDeletion:
    """What :meth:`MemoryStore.delete_user` removed."""

    user: str
    messages: int
    facts: int
    archive_items: int
    summaries: int


class MemoryStore(Store):
    """A database and the services its sessions share (see the module docs).

    ``store`` is an SQLAlchemy URL, a SQLite file path or an engine (default:
    ``MEMOS_STORE`` or ``./memos.db``). ``archive`` is where archival vectors live (a Chroma
    path, an ``http://`` Chroma server URL or an :class:`~memos.tiers.archival.ArchiveBackend`;
    default ``MEMOS_CHROMA_URL``, ``MEMOS_CHROMA_PATH`` or a folder beside the SQLite file).
    ``embedder`` replaces the all-MiniLM-L6-v2 model, whose folder is ``embedding_model_dir``
    or ``MEMOS_EMBEDDING_MODEL_DIR``.
    """

    def __init__(self, store: str | Path | Engine | None = None, *, archive: str | Path | ArchiveBackend | None = None,
                 embedder: Embedder | None = None, embedding_model_dir: str | Path | None = None) -> None:
        super().__init__(store if store is not None else os.environ.get("MEMOS_STORE") or "memos.db")
        self._archive_spec = archive
        self._embedder_spec = embedder
        self._model_dir = embedding_model_dir
        self._lock = threading.RLock()
        self._backend: ArchiveBackend | None = None
        self._backend_opened = False
        self._embedder: Embedder | None = None
        self._embedder_loaded = False
        self._cold: dict[str, ColdTier] = {}
        self._archives: dict[str, ArchivalTier] = {}
        self.indexer = Indexer()
        self._pool: ThreadPoolExecutor | None = None
        self._sessions: weakref.WeakSet[Memory] = weakref.WeakSet()
        self._shared_key: str | None = None
        self._holders = 0
        self.closed = False
        self._reconciled = False

    # -- one per URL ---------------------------------------------------------------

    @classmethod
    def shared(cls, store: str | Path | None = None) -> MemoryStore:
        """The process's store object for ``store`` (a URL or a path), opened on first use.
        Each call holds it once; :meth:`release` lets go, and the last release closes it."""
        key = _url_key(store if store is not None else os.environ.get("MEMOS_STORE") or "memos.db")
        if key in (":memory:", "sqlite://", "sqlite:///:memory:"):  # each in-memory database is its own
            found = cls(store)
            found._holders = 1
            return found
        with _SHARED_LOCK:
            held = _SHARED.get(key)
            if held is None or held.closed:
                held = cls(store)
                held._shared_key = key
                _SHARED[key] = held
            held._holders += 1
            return held

    def release(self) -> None:
        """Let go of a hold taken by :meth:`shared`; the last one closes the store."""
        with _SHARED_LOCK:
            self._holders -= 1
            if self._holders > 0:
                return
            if self._shared_key is not None and _SHARED.get(self._shared_key) is self:
                del _SHARED[self._shared_key]
        self.close()

    # -- sessions ------------------------------------------------------------------

    def session(self, session: str = "default", *, user: str = "default", agent: str = "default",
                **options: Any) -> Memory:
        """A :class:`~memos.Memory` for one session of ``user`` on this store; ``options`` are
        the other keyword arguments of ``Memory``."""
        from .memory import Memory

        return Memory(session, user=user, agent=agent, store=self, **options)

    def attach(self, memory: Memory) -> None:
        """Register an open session (so a deletion reaches what it holds in memory)."""
        self._sessions.add(memory)

    def cold(self, scope: str) -> ColdTier:
        """The fact table of one scope, shared by every session of it in this process."""
        with self._lock:
            tier = self._cold.get(scope)
            if tier is None:
                tier = self._cold[scope] = ColdTier(self.engine, scope)
            return tier

    def archive(self, scope: str, *, background: bool = True) -> ArchivalTier:
        """The archive of one scope, shared by every session of it in this process."""
        with self._lock:
            key = f"{scope}\0{background}"
            tier = self._archives.get(key)
            if tier is None:
                tier = ArchivalTier(self.engine, scope, self.backend, self.embedder,
                                    indexer=self.indexer if background else None)
                self._archives[key] = tier
                self._reconcile()
            return tier

    def _reconcile(self) -> None:
        """Once per store: scopes whose vectors an earlier process left unwritten are queued."""
        if self._reconciled:
            return
        self._reconciled = True
        with Session(self.engine) as s:
            scopes = s.exec(select(ArchiveItem.namespace).where(ArchiveItem.indexed == False).distinct()).all()  # noqa: E712
        for scope in scopes:
            tier = self._archives.get(f"{scope}\0True") or ArchivalTier(self.engine, scope, self.backend, self.embedder,
                                                                         indexer=self.indexer)
            self._archives.setdefault(f"{scope}\0True", tier)
            tier.schedule()

    def backend(self) -> ArchiveBackend | None:
        """The archive backend, opened on first use (Chroma takes a moment to start)."""
        with self._lock:
            if not self._backend_opened:
                spec = self._archive_spec
                self._backend = spec if isinstance(spec, ArchiveBackend) else default_backend(self, spec)
                self._backend_opened = True
            return self._backend

    def embedder(self) -> Embedder | None:
        """The embedding model, loaded on first use (None when it cannot be: keyword-only)."""
        with self._lock:
            if not self._embedder_loaded:
                self._embedder = self._embedder_spec or load_embedder(self._model_dir)
                self._embedder_loaded = True
            return self._embedder

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """Run ``fn(*args)`` on the store's background pool (two threads, shared by its sessions)."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="memos-compaction")
            return self._pool.submit(fn, *args)

    # -- deletion ------------------------------------------------------------------

    def delete_user(self, user: str) -> UserDeletion:
        """Delete everything of ``user``: every session's messages, summaries and compaction
        log, the facts and their history, the archive and its vectors. Nothing of it is left
        in the database files (see :meth:`scrub`). Open sessions of the user start empty."""
        prefix = namespace_key((user,))
        like = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "/%"
        with self.indexer.paused():
            return self._delete_user(user, prefix, like)

    def _delete_user(self, user: str, prefix: str, like: str) -> UserDeletion:
        counts: dict[str, int] = {}
        from .store import CompactionRow
        from .tiers.cold import Fact, ForgetRecord

        with Session(self.engine) as s:
            item_rows = s.exec(select(ArchiveItem.id, ArchiveItem.namespace).where(
                (col(ArchiveItem.namespace) == prefix) | col(ArchiveItem.namespace).like(like, escape="\\"))).all()
            scopes = sorted({ns for _, ns in item_rows})
            for name, table in (("messages", MessageRow), ("summaries", SummaryRow), ("events", CompactionRow),
                                ("facts", Fact), ("forget", ForgetRecord), ("archive_items", ArchiveItem)):
                ns_col = col(table.namespace)  # type: ignore[attr-defined]
                cond = (ns_col == prefix) | ns_col.like(like, escape="\\")
                rows = list(s.exec(select(table).where(cond)).all())
                counts[name] = len(rows)
                for r in rows:
                    s.delete(r)
            for index in self._keyword_indexes():
                index.remove_namespaces(s, prefix)
            s.commit()
        backend = self.backend() if scopes else None
        if backend is not None:
            for scope in scopes:
                backend.delete(scope)
        with self._lock:
            for key in [k for k in self._cold if k == prefix or k.startswith(prefix + "/")]:
                self._cold[key].invalidate_caches()
        self.scrub()
        self._reload_sessions(lambda mem: mem.namespace[0] == user)
        return UserDeletion(user=user, messages=counts["messages"], facts=counts["facts"],
                            archive_items=counts["archive_items"], summaries=counts["summaries"])

    def erase(self, scope: str, values: Sequence[str]) -> dict[str, int]:
        """Replace every occurrence of ``values`` (case-insensitive) with ``[forgotten]`` in
        what ``scope`` holds, in one transaction: the messages of its sessions (the log keeps
        the message, with the value redacted), their summaries (every version) and the
        archive (its keyword index too; the vectors are deleted and written again from the
        redacted text). Open sessions of the scope read their state again. Returns how many
        messages, summaries and archive items were changed. Call :meth:`scrub` after."""
        patterns = [re.compile(re.escape(v), re.IGNORECASE) for v in sorted(set(values), key=len, reverse=True)
                    if len(v.strip()) >= 3]
        if not patterns:
            return {"messages": 0, "summaries": 0, "archive_items": 0}

        def redact(text_: str) -> str:
            for p in patterns:
                text_ = p.sub(REDACTED, text_)
            return text_

        def holds(text_: str) -> bool:
            return any(p.search(text_) for p in patterns)

        like = scope.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "/%"
        counts = {"messages": 0, "summaries": 0, "archive_items": 0}
        changed_items: list[str] = []
        with Session(self.engine, expire_on_commit=False) as s:
            def in_scope(column: Any) -> Any:
                return (column == scope) | column.like(like, escape="\\")

            # each value is looked for by SQL first (a LIKE per value), then redacted in Python
            needles = [or_(*[col(MessageRow.data).contains(_json_fragment(v)) for v in values if len(v.strip()) >= 3])]
            for row in s.exec(select(MessageRow).where(in_scope(col(MessageRow.namespace)), *needles)).all():
                data = json.loads(row.data)
                redacted = _redact_json(data, redact)
                if redacted != data:
                    row.data = json.dumps(redacted, ensure_ascii=False)
                    s.add(row)
                    counts["messages"] += 1
            for srow in s.exec(select(SummaryRow).where(in_scope(col(SummaryRow.namespace)))).all():
                if holds(srow.text):
                    srow.text = redact(srow.text)
                    s.add(srow)
                    counts["summaries"] += 1
            for item in s.exec(select(ArchiveItem).where(ArchiveItem.namespace == scope)).all():
                if holds(item.text):
                    item.text = redact(item.text)
                    item.indexed = False
                    s.add(item)
                    changed_items.append(item.id)
            counts["archive_items"] = len(changed_items)
            keywords = archive_keywords(self.engine)
            keywords.remove(s, changed_items)
            keywords.add(s, [(i, scope, row.text) for i in changed_items if (row := s.get(ArchiveItem, i)) is not None])
            s.commit()
        if changed_items:
            backend = self.backend()
            if backend is not None:
                try:
                    backend.delete_ids(scope, changed_items)
                except Exception as exc:  # the rows are redacted; the vectors are rewritten by the next flush
                    log.warning("archived vectors could not be deleted (%s); they are rewritten from the redacted text",
                                exc)
            self.archive(scope).schedule()
        self._reload_sessions(lambda mem: mem.scope == scope)
        return counts

    def _keyword_indexes(self) -> list[KeywordIndex]:
        return [archive_keywords(self.engine), fact_keywords(self.engine)]

    def _reload_sessions(self, which: Callable[[Memory], bool]) -> None:
        for mem in list(self._sessions):
            if which(mem):
                mem.reload()

    def scrub(self) -> None:
        """Leave no deleted bytes in the database files: SQLite zeroes what is deleted
        (``secure_delete``, set on every connection), the full-text indexes are merged (their
        old segments still hold deleted terms) and the write-ahead log is checkpointed and
        truncated. On other databases this is the database's own business (``VACUUM``)."""
        if self.engine.dialect.name != "sqlite":
            return
        with self.engine.connect() as conn:
            for index in self._keyword_indexes():
                index.optimize(conn)
            conn.commit()
        with self.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")

    # -- lifecycle -----------------------------------------------------------------

    def close(self, *, dispose: bool = True) -> None:
        """Stop the indexer (queued vectors stay queued for the next open) and the
        background pool, and release the engine's connections (unless ``dispose`` is false:
        the engine belongs to someone else)."""
        if self.closed:
            return
        self.closed = True
        self.indexer.stop()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if dispose:
            super().close()

    def __repr__(self) -> str:
        return f"MemoryStore({self.engine.url.render_as_string(hide_password=True)!r})"


REDACTED = "[forgotten]"


def _json_fragment(value: str) -> str:
    """``value`` as it appears inside a JSON string (the log stores messages as JSON)."""
    return json.dumps(value, ensure_ascii=False)[1:-1]


def _redact_json(data: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(data, str):
        return redact(data)
    if isinstance(data, list):
        return [_redact_json(x, redact) for x in data]
    if isinstance(data, dict):
        return {k: _redact_json(v, redact) for k, v in data.items()}
    return data


def _has_table(s: Session, name: str) -> bool:
    return s.execute(text("SELECT 1 FROM sqlite_master WHERE name = :n"), {"n": name}).first() is not None


def _url_key(store: str | Path) -> str:
    url = str(store)
    if "://" in url or url == ":memory:":
        return url
    return str(Path(url).expanduser().resolve())


def default_backend(store: Store, spec: str | Path | None) -> ArchiveBackend:
    """The archive backend for ``spec`` (a Chroma path or server URL), else from
    ``MEMOS_CHROMA_URL`` / ``MEMOS_CHROMA_PATH``, else a Chroma folder beside the SQLite file."""
    target = str(spec) if spec is not None else os.environ.get("MEMOS_CHROMA_URL") or os.environ.get("MEMOS_CHROMA_PATH")
    prefix = os.environ.get("MEMOS_CHROMA_PREFIX") or "memos"
    if target:
        if target.startswith(("http://", "https://")):
            return ChromaBackend.http(target, prefix=prefix)
        return ChromaBackend.persistent(target, prefix=prefix)
    url = store.engine.url
    if url.get_backend_name() == "sqlite":
        if not url.database or url.database == ":memory:":
            return ChromaBackend.ephemeral(prefix=prefix)
        return ChromaBackend.persistent(str(url.database) + ".chroma", prefix=prefix)
    return ChromaBackend.persistent("memos.chroma", prefix=prefix)
