"""What one database serves every session on it: the cold tier of each scope, the archive
of each scope, the archive backend and the embedding model (each opened once, on first use),
one indexing thread for the archival vectors of all its sessions, and a small pool that
prepares demotions in the background.

Open sessions register as :class:`SessionListener` s, so that a change made behind them (a
deletion, a forgotten value) reaches what they hold in memory; the store knows them by that
small protocol only. :class:`memos.MemoryStore` adds the sessions themselves.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, TypeVar

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from ..core.config import environment
from ..storage.log import Namespace, Store, namespace_key
from ..text.embeddings import ChromaEmbedder, Embedder, load_embedder
from .archival import ArchivalTier, ArchiveBackend, ArchiveItem, ChromaBackend, Indexer
from .cold import ColdTier

__all__ = ["SessionListener", "TierStore", "default_backend", "scope_key"]

T = TypeVar("T")


class SessionListener(Protocol):
    """An open session, as the store sees it: whose it is, and how to make it read again."""

    namespace: Namespace
    scope: str

    def reload(self) -> None:
        """Read the session's state from the store again."""
        ...


def scope_key(namespace: Namespace, share: str) -> str:
    """The stored key of what a session of ``namespace`` = (user, agent, session) shares:
    ``user``, ``user/agent`` or ``user/agent/session``."""
    depth = {"user": 1, "agent": 2, "session": 3}[share]
    return namespace_key(namespace[:depth])


class TierStore(Store):
    """A database and the tiers its sessions share (see the module docs).

    ``store`` is an SQLAlchemy URL, a SQLite file path or an engine (default:
    ``MEMOS_STORE`` or ``./memos.db``). ``archive`` is where archival vectors live (a Chroma
    path, an ``http://`` Chroma server URL or an :class:`~memos.tiers.archival.ArchiveBackend`;
    default ``MEMOS_CHROMA_URL``, ``MEMOS_CHROMA_PATH`` or a folder beside the SQLite file).
    ``embedder`` replaces the all-MiniLM-L6-v2 model, whose folder is ``embedding_model_dir``
    or ``MEMOS_EMBEDDING_MODEL_DIR``. ``token_index`` (default ``MEMOS_TOKEN_INDEX``, on)
    stores each archived item's token states beside its vector and ranks search candidates
    by them too (:mod:`memos.tiers.late`), where the embedder gives them. A SQLite file's
    folder must exist (a typo would start an empty memory): ``create_folder`` makes it.
    """

    def __init__(self, store: str | Path | Engine | None = None, *, archive: str | Path | ArchiveBackend | None = None,
                 embedder: Embedder | None = None, embedding_model_dir: str | Path | None = None,
                 token_index: bool | None = None, create_folder: bool = False) -> None:
        super().__init__(store if store is not None else environment().store.url, create_folder=create_folder)
        if token_index is None:
            token_index = environment().store.token_index
        self.token_index = token_index
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
        self._sessions: weakref.WeakSet[SessionListener] = weakref.WeakSet()
        self._shared_key: str | None = None
        self._holders = 0
        self.closed = False
        self._reconciled = False

    # -- the tiers of each scope ----------------------------------------------------

    def attach(self, session: SessionListener) -> None:
        """Register an open session (so a deletion reaches what it holds in memory); it is
        let go when it is no longer referenced."""
        self._sessions.add(session)

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
                                    indexer=self.indexer if background else None, token_index=self.token_index)
                self._archives[key] = tier
                if background:  # a read-only opening (memos inspect, export) indexes nothing
                    self._reconcile()
            return tier

    def archive_for(self, scope: str, *, archive: str | Path | ArchiveBackend | None = None,
                    embedder: Embedder | Callable[[list[str]], Any] | None = None,
                    model_dir: str | Path | None = None, background: bool = True) -> ArchivalTier:
        """The archive of ``scope`` for one session: the shared one (:meth:`archive`), or one of
        the session's own when it was given its own backend or model. Chroma and the model
        are opened on first dense use, not here."""
        if archive is None and embedder is None and model_dir is None:
            return self.archive(scope, background=background)

        def backend() -> ArchiveBackend | None:
            if archive is None:
                return self.backend()
            return archive if isinstance(archive, ArchiveBackend) else default_backend(self, archive)

        def model() -> Embedder | None:
            if embedder is None:
                return load_embedder(model_dir) if model_dir is not None else self.embedder()
            return embedder if isinstance(embedder, Embedder) else ChromaEmbedder(embedder)

        return ArchivalTier(self.engine, scope, backend, model, indexer=self.indexer if background else None,
                            token_index=self.token_index, owns_backend=archive is not None
                            and not isinstance(archive, ArchiveBackend))

    def _reconcile(self) -> None:
        """Once per store, when a session with background indexing first opens an archive:
        scopes whose vectors an earlier process left unwritten are queued."""
        if self._reconciled:
            return
        self._reconciled = True
        with Session(self.engine) as s:
            scopes = s.exec(select(ArchiveItem.namespace).where(ArchiveItem.indexed == False).distinct()).all()  # noqa: E712
        for scope in scopes:
            self.archive(scope).schedule()

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

    # -- sessions and closing -------------------------------------------------------

    def invalidate_facts(self, scope: str) -> None:
        """Drop the cached facts of ``scope`` and the scopes below it (changed behind them)."""
        with self._lock:
            for key, tier in self._cold.items():
                if key == scope or key.startswith(scope + "/"):
                    tier.invalidate_caches()

    def reload_sessions(self, which: Callable[[SessionListener], bool]) -> None:
        """Open sessions (of this process) for which ``which`` holds read the store again."""
        for session in list(self._sessions):
            if which(session):
                session.reload()

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
        with self._lock:  # a backend the store opened is the store's to close, not one passed in
            opened, self._backend, self._backend_opened = self._backend, None, False
        if opened is not None and not isinstance(self._archive_spec, ArchiveBackend):
            close = getattr(opened, "close", None)
            if close is not None:
                close()
        if dispose:
            super().close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.engine.url.render_as_string(hide_password=True)!r})"


def default_backend(store: Store, spec: str | Path | None) -> ArchiveBackend:
    """The archive backend for ``spec`` (a Chroma path or server URL), else from
    ``MEMOS_CHROMA_URL`` / ``MEMOS_CHROMA_PATH``, else a Chroma folder beside the SQLite file."""
    env = environment().store
    target = str(spec) if spec is not None else env.chroma_url or env.chroma_path
    prefix = env.chroma_prefix
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
