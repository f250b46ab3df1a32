"""The compaction journal and the edits of a session's log: rollback, clear, withdraw.

Every soft compaction and demotion is recorded in the store (tokens before and after, the
messages moved, the summary version written, the facts changed, which summariser and
extractor ran). :func:`rollback` undoes an event and every later one in one transaction:
the messages come back into the hot tier, the summary from before the event becomes the
newest version, and the facts the events changed are restored. :meth:`Store.clear
<memos.storage.log.Store.clear>` sets a session's messages aside (a ``clear`` event; the user's
facts and archive keep what they learnt), and :func:`withdraw` takes the newest message back as if it had never been said.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlmodel import Session, col, select

from ..core.messages import Message
from ..storage.facts import Fact
from ..storage.log import CompactionRow, Namespace, Store
from ..tiers.archival import ArchiveItem, archive_keywords
from ..tiers.cold import ColdTier

if TYPE_CHECKING:
    from ..tiers.shared import TierStore

__all__ = ["Rollback", "rollback", "withdraw"]


@dataclass(frozen=True)
class Rollback:
    """What :meth:`Memory.rollback` did: the ``rollback`` event it logged, the events it
    undid, how many messages came back into the hot tier, the summary version it wrote."""

    event_id: int
    undone: tuple[int, ...]
    messages_restored: int
    summary_version: int | None


def rollback(store: Store, namespace: Namespace, cold: ColdTier, event_id: int) -> Rollback:
    """Undo compaction event ``event_id`` of ``namespace`` and every later one (see the
    module docs); raises ``TypeError`` for a non-integer id and ``KeyError`` for an event the
    session does not have or one already rolled back. The caller reads the session again."""
    if isinstance(event_id, bool) or not isinstance(event_id, int):
        raise TypeError(f"event_id must be an int, got {type(event_id).__name__}")

    def undo_facts(session: Any, events: list[CompactionRow]) -> None:
        for ev in events:
            cold.undo(json.loads(ev.facts or "{}"), session)

    record = store.rollback(namespace, event_id, also=undo_facts)
    cold.invalidate_caches()
    undone = json.loads(record.facts)["undone"]
    return Rollback(event_id=record.id or 0, undone=tuple(undone), messages_restored=len(json.loads(record.message_ids)),
                    summary_version=record.summary_version)


def withdraw(store: TierStore, namespace: Namespace, cold: ColdTier, scope: str, newest: Message) -> bool:
    """Take back ``newest``, the session's newest message, in one transaction: its row
    leaves the log, its archived copy leaves the archive (keyword entry and vector), and
    facts read from it alone are invalidated (their history stays inspectable). False when
    it is no longer the newest message in the hot tier. The caller reads the session again."""
    item_id = f"unit:{newest.id}"

    def also(s: Session) -> None:
        item = s.get(ArchiveItem, item_id)
        if item is not None:
            archive_keywords(store.engine).remove(s, [item_id])
            s.delete(item)
        for fact in s.exec(select(Fact).where(Fact.namespace == cold.namespace, Fact.status == "current",
                                              col(Fact.source_ids).contains(newest.id))).all():
            if fact.sources == [newest.id]:
                fact.status, fact.valid_to = "invalidated", time.time()
                s.add(fact)

    with store.indexer.paused():  # no batch embeds the item while it is deleted
        done = store.withdraw(namespace, newest.id, also=also)
        backend = store.backend() if done else None
        if backend is not None:
            backend.delete_ids(scope, [item_id])
    if done:
        cold.invalidate_caches()
    return done
