"""Where the archive's vectors live, and who writes them.

:class:`ArchiveBackend` is the protocol (one collection per scope: upsert by id, query by
vector, delete); :class:`ChromaBackend` implements it on Chroma (embedded, in memory or a
server). :class:`Indexer` is the one background thread of a store that embeds queued
archive items and writes their vectors (see :meth:`memos.tiers.archival.ArchivalTier.schedule`).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import re
import shutil
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = ["ArchiveBackend", "ChromaBackend", "Flushable", "Indexer"]

log = logging.getLogger("memos.archive")


@runtime_checkable
class ArchiveBackend(Protocol):
    """Where vectors live, one collection per namespace: ``upsert`` by id, ``query`` by
    vector, ``delete`` a namespace's vectors, ``count`` them."""

    def upsert(self, namespace: str, ids: list[str], embeddings: Any, documents: list[str],
               metadatas: list[dict[str, Any]]) -> None:
        """Insert or replace vectors by id."""
        ...

    def query(self, namespace: str, embedding: Any, n: int) -> list[tuple[str, float]]:
        """The ``n`` nearest ids of the namespace with their cosine distances."""
        ...

    def delete(self, namespace: str) -> None:
        """Delete every vector of the namespace."""
        ...

    def delete_ids(self, namespace: str, ids: list[str]) -> None:
        """Delete these vectors of the namespace (ids it does not hold are ignored)."""
        ...

    def count(self, namespace: str) -> int:
        """Number of vectors the namespace holds."""
        ...


# Chroma shares one System per path between clients and publishes it before starting it, so
# a client opened on another thread meanwhile gets a half-started one; opening is serialised.
_CLIENT_LOCK = threading.Lock()


class ChromaBackend:
    """Chroma collections (cosine space), one per namespace, on disk, in memory or on a
    Chroma server. A collection per namespace keeps every query an unfiltered HNSW
    search (a metadata filter made Chroma 20x slower at 10k vectors) and keeps users apart."""

    def __init__(self, client: Any, prefix: str = "memos") -> None:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,60}", prefix):
            raise ValueError(f"a Chroma collection prefix is letters, digits, '.', '_' or '-' (at most 61), got {prefix!r}")
        self.client = client
        self.prefix = prefix
        self._collections: dict[str, Any] = {}

    def collection_name(self, namespace: str) -> str:
        """The Chroma collection that holds ``namespace``'s vectors."""
        return f"{self.prefix}-{hashlib.sha256(namespace.encode()).hexdigest()[:40]}"

    def _collection(self, namespace: str) -> Any:
        col_ = self._collections.get(namespace)
        if col_ is None:
            col_ = self.client.get_or_create_collection(
                self.collection_name(namespace), embedding_function=None,
                configuration={"hnsw": {"space": "cosine"}}, metadata={"namespace": namespace},
            )
            self._collections[namespace] = col_
        return col_

    @classmethod
    def persistent(cls, path: str | Path, *, prefix: str = "memos") -> ChromaBackend:
        """Chroma's embedded client storing under ``path`` (telemetry off)."""
        import chromadb
        from chromadb.config import Settings

        with _CLIENT_LOCK:
            return cls(chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False)), prefix)

    @classmethod
    def ephemeral(cls, *, prefix: str = "memos") -> ChromaBackend:
        """An in-memory Chroma (lost when the process ends; for in-memory stores)."""
        import chromadb
        from chromadb.config import Settings

        with _CLIENT_LOCK:
            return cls(chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False)), prefix)

    @classmethod
    def http(cls, url: str, *, prefix: str = "memos") -> ChromaBackend:
        """A Chroma server, e.g. ``http://127.0.0.1:8000`` (started with ``chroma run``).
        ``prefix`` starts every collection name, so several stores can share one server."""
        import chromadb
        from chromadb.config import Settings

        m = re.match(r"^(https?)://([^:/]+)(?::(\d+))?", url)
        if not m:
            raise ValueError(f"not a Chroma server URL: {url!r}")
        ssl = m.group(1) == "https"
        port = int(m.group(3) or (443 if ssl else 8000))
        return cls(chromadb.HttpClient(host=m.group(2), port=port, ssl=ssl, settings=Settings(anonymized_telemetry=False)),
                   prefix)

    def upsert(self, namespace: str, ids: list[str], embeddings: Any, documents: list[str],
               metadatas: list[dict[str, Any]]) -> None:
        """Insert or replace vectors by id. The texts are not stored in Chroma (the store
        holds them): a forgotten value is then erased from one place, not two."""
        self._collection(namespace).upsert(ids=ids, embeddings=embeddings, metadatas=metadatas)

    def query(self, namespace: str, embedding: Any, n: int) -> list[tuple[str, float]]:
        """The ``n`` nearest ids with their cosine distances."""
        res = self._collection(namespace).query(query_embeddings=[embedding], n_results=n, include=["distances"])
        ids = res["ids"][0] if res["ids"] else []
        dists = (res.get("distances") or [[]])[0] or [0.0] * len(ids)
        return list(zip(ids, (float(d) for d in dists), strict=True))

    def close(self) -> None:
        """Release the client (Chroma keeps an embedded client's database, caches and threads
        for the process's life otherwise: about 5 MB per store opened and closed)."""
        self._collections.clear()
        close = getattr(self.client, "close", None)  # chromadb >= 1.1
        if close is not None:
            close()

    def delete(self, namespace: str) -> None:
        """Drop the namespace's collection, and on disk its segment folders (Chroma's
        embedded client leaves them behind, chroma-core/chroma#5520: the index file of a
        deleted collection keeps its vectors and whatever the process's memory held when it
        was written)."""
        self._collections.pop(namespace, None)
        try:
            collection = self.client.get_collection(self.collection_name(namespace))
        except Exception:  # it does not exist
            return
        folders = self._segment_folders(str(collection.id))
        self.client.delete_collection(collection.name)
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)

    def _segment_folders(self, collection_id: str) -> list[Path]:
        settings = self.client.get_settings()
        if not settings.is_persistent or not settings.persist_directory:
            return []
        root = Path(settings.persist_directory)
        try:
            with contextlib.closing(sqlite3.connect(f"file:{root / 'chroma.sqlite3'}?mode=ro", uri=True)) as db:
                ids = [r[0] for r in db.execute("SELECT id FROM segments WHERE collection = ?", (collection_id,))]
        except sqlite3.Error:  # another layout: leave the folders to Chroma
            return []
        return [root / i for i in ids if (root / i).is_dir()]

    def delete_ids(self, namespace: str, ids: list[str]) -> None:
        """Delete these vectors of the namespace."""
        if ids:
            self._collection(namespace).delete(ids=ids)

    def count(self, namespace: str) -> int:
        """Number of vectors the namespace holds."""
        return int(self._collection(namespace).count())

    def ids(self, namespace: str) -> set[str]:
        """The ids of every vector the namespace holds (to check it against the store)."""
        return set(self._collection(namespace).get(include=[])["ids"])

    def tag_model(self, namespace: str, model: str) -> str | None:
        """The embedding model the namespace's vectors were written with (``None`` while it
        holds none), recording ``model`` when none is recorded. Collections from before
        models were recorded hold all-MiniLM-L6-v2's vectors."""
        collection = self._collection(namespace)
        meta = dict(collection.metadata or {})
        recorded = meta.get("model")
        if recorded is None:
            recorded = "all-MiniLM-L6-v2" if collection.count() else None
            collection.modify(metadata={**meta, "model": recorded or model})
        return str(recorded) if recorded is not None else None


# The indexer thread is a daemon (a script that forgets close() must still exit), so the
# interpreter would kill it mid-call into ONNX Runtime at teardown, which aborts the process.
# Before teardown, every running indexer is asked to stop and joined (after its current batch);
# what it had not embedded stays queued for the next open.
_INDEXERS: weakref.WeakSet[Indexer] = weakref.WeakSet()


@atexit.register
def _stop_indexers() -> None:
    for indexer in list(_INDEXERS):
        indexer.stop()


class Flushable(Protocol):
    """What the indexer writes vectors for (an archival tier): ``flush`` writes up to ``limit``
    queued vectors and returns how many it wrote."""

    def flush(self, limit: int) -> int:
        """Write up to ``limit`` queued vectors; the number written."""
        ...


class Indexer:
    """One background thread that writes the archival vectors of every tier that asks
    (:meth:`memos.tiers.archival.ArchivalTier.schedule`), a batch at a time, so that a store serving a thousand
    sessions runs one indexing thread, not a thousand. Started on first use. It waits for a
    quiet moment before a batch (see ``quiet``), so that in an agent loop the vectors are
    written while the model answers rather than while the next prompt is assembled."""

    def __init__(self, batch: int = 16, *, quiet: float = 0.05, max_delay: float = 0.25) -> None:
        """``quiet``: seconds without a new :meth:`schedule` before a batch starts (a message
        logged by ``add`` is then embedded after the ``context()`` call that follows it, not
        during it); ``max_delay``: the longest a scheduled tier waits however busy the
        callers are."""
        if quiet < 0 or max_delay < quiet:
            raise ValueError(f"need 0 <= quiet <= max_delay, got quiet={quiet}, max_delay={max_delay}")
        self.batch = batch
        self.quiet = quiet
        self.max_delay = max_delay
        self._last = 0.0  # when schedule() was last called
        self._since: float | None = None  # when the oldest unanswered schedule() was made
        self._dirty: dict[int, Flushable] = {}
        self._cond = threading.Condition()
        self._busy = threading.Lock()  # held for each batch
        self._thread: threading.Thread | None = None
        self._stopping = False

    def schedule(self, tier: Flushable) -> None:
        """Flush ``tier`` soon, on the indexer thread."""
        with self._cond:
            self._dirty[id(tier)] = tier
            self._last = time.monotonic()
            if self._since is None:
                self._since = self._last
            if self._thread is None or not self._thread.is_alive():
                self._stopping = False
                self._thread = threading.Thread(target=self._run, name="memos-archival-indexer", daemon=True)
                self._thread.start()
                _INDEXERS.add(self)
            self._cond.notify()

    def discard(self, tier: Flushable) -> None:
        """Forget that ``tier`` has vectors to write (what is queued stays in the store)."""
        with self._cond:
            self._dirty.pop(id(tier), None)

    def _run(self) -> None:
        backlog = False  # the last batch left more of its tier queued: go on at once
        while True:
            with self._cond:
                while not self._stopping:
                    if not self._dirty:
                        self._cond.wait()
                        backlog = False
                        continue
                    now = time.monotonic()
                    wait = min(self._last + self.quiet, (self._since or now) + self.max_delay) - now
                    if backlog or wait <= 0:
                        break
                    self._cond.wait(wait)
                if self._stopping:
                    return
                key = next(iter(self._dirty))
                tier = self._dirty.pop(key)
                if not self._dirty:
                    self._since = None
            try:
                with self._busy:
                    more = tier.flush(limit=self.batch)
            except Exception:  # the tier logs its own failures; one bad tier must not stop the others
                log.exception("archival indexing failed")
                more = 0
            backlog = bool(more)
            if more:
                with self._cond:
                    self._dirty.setdefault(key, tier)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No batch runs inside this block (one running is finished first): deletions take
        it, so that no batch writes a vector or holds a read transaction while they scrub."""
        with self._busy:
            yield

    def stop(self) -> None:
        """Stop after the current batch; what is queued stays queued (in the store)."""
        with self._cond:
            thread = self._thread
            self._stopping = True
            self._dirty.clear()
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        self._thread = None
        _INDEXERS.discard(self)

    @property
    def running(self) -> bool:
        """Whether the indexing thread is alive."""
        return self._thread is not None and self._thread.is_alive()
