"""The compaction journal and rollback.

Every soft compaction and demotion is recorded in the store (tokens before and after, the
messages moved, the summary version written, the facts changed, which summariser and
extractor ran). :func:`rollback` undoes an event and every later one in one transaction:
the messages come back into the hot tier, the summary from before the event becomes the
newest version, and the facts the events changed are restored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .store import CompactionRow, Namespace, Store
from .tiers.cold import ColdTier

__all__ = ["Rollback", "rollback"]


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
