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

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.config import environment
from ..tiers import erasure
from ..tiers.cold import ColdTier, ForgetRecord
from ..tiers.erasure import UserDeletion
from ..tiers.shared import TierStore, default_backend, scope_key

if TYPE_CHECKING:
    from .memory import Memory

__all__ = ["MemoryStore", "UserDeletion", "default_backend", "scope_key"]

_SHARED: dict[str, MemoryStore] = {}
_SHARED_LOCK = threading.Lock()


class MemoryStore(TierStore):
    """A database, the tiers its sessions share, and its sessions (see the module docs and
    :class:`~memos.tiers.shared.TierStore` for the arguments)."""

    # -- one per URL ---------------------------------------------------------------

    @classmethod
    def shared(cls, store: str | Path | None = None) -> MemoryStore:
        """The process's store object for ``store`` (a URL or a path), opened on first use.
        Each call holds it once; :meth:`release` lets go, and the last release closes it."""
        key = _url_key(store if store is not None else environment().store.url)
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

    # -- deletion ------------------------------------------------------------------

    def delete_user(self, user: str) -> UserDeletion:
        """Delete everything of ``user``: every session's messages, summaries and compaction
        log, the facts and their history, the archive and its vectors. Nothing of it is left
        in the database files (see :meth:`scrub`). Open sessions of the user start empty."""
        return erasure.delete_user(self, user)

    def forget_fact(self, cold: ColdTier, fact_id: int, reason: str = "user request") -> ForgetRecord:
        """Forget a fact of ``cold``'s scope everywhere (see :meth:`memos.Memory.forget`)."""
        return erasure.forget_fact(self, cold, fact_id, reason)

    def erase(self, scope: str, values: str | Sequence[str]) -> dict[str, int]:
        """Redact ``values`` to ``[forgotten]`` in everything ``scope`` holds (see
        :func:`memos.tiers.erasure.erase`); returns what was changed."""
        return erasure.erase(self, scope, values)

    def scrub(self) -> None:
        """Leave no deleted bytes in the database files (see :func:`memos.tiers.erasure.scrub`)."""
        erasure.scrub(self)


def _url_key(store: str | Path) -> str:
    url = str(store)
    if "://" in url or url == ":memory:":
        return url
    return str(Path(url).expanduser().resolve())
