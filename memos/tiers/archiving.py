"""What a session writes into the archive: every message as it is logged, demoted units and
tool chains (for the compactor), and the notes and excerpts the agent or the app saves with
:meth:`memos.Memory.archive`. Each becomes an :class:`~memos.storage.items.ArchiveItem` of the
session's scope, staged in the caller's transaction; the vectors follow through the
archive's outbox."""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from ..core.messages import Message, clean_text, memory_traffic
from ..storage.items import ArchiveItem
from ..storage.log import Store
from .archival import ArchivalTier
from .hot import render_text
from .state import SessionState

__all__ = ["Archiver", "item_line"]


def item_line(m: Message) -> str:
    """``m`` as an archive item writes it: the role named (a tool result as it is)."""
    return f"{m.role}: {render_text(m.data)}" if m.role != "tool" else render_text(m.data)


class Archiver:
    """Builds and stages one session's archive items."""

    def __init__(self, state: SessionState, scope: str, store: Store, archival: ArchivalTier,
                 own_tool: Callable[[str], bool] = lambda name: False) -> None:
        self.state = state
        self.scope = scope
        self.store = store
        self.archival = archival
        self.own_tool = own_tool  # whether a tool name is one of memos' own

    def item(self, messages: list[Message], kind: str, item_id: str) -> ArchiveItem:
        """An item holding ``messages`` verbatim (roles named, tool results as they are)."""
        body = "\n".join(item_line(m) for m in messages)
        return ArchiveItem(
            id=item_id, namespace=self.scope, session=self.state.key, kind=kind, text=body,
            message_ids=json.dumps([m.id for m in messages]), first_seq=messages[0].seq, last_seq=messages[-1].seq,
            roles=",".join(dict.fromkeys(m.role for m in messages)), created_at=max(m.created_at for m in messages),
        )

    def logged(self, session: Any, messages: list[Message]) -> None:
        """Stage each newly logged message as an item, in the transaction that logs it: it is
        the user's recall memory from that moment. The app's system prompt is not, nor the
        calls to memos' own tools and their results: a ``retrieve`` result quotes memory that
        is searchable already, and found again it would fill a prompt with copies. The log
        keeps them."""
        left_out = self.state.prompt_ids(messages) | memory_traffic(messages, self.own_tool, earlier=self.state.hot)
        self.archival.stage(session, [self.item([m], "message", f"unit:{m.id}") for m in messages if m.id not in left_out])

    def save(self, content: str | None, message_ids: str | Sequence[str] | None, tags: str | Sequence[str]) -> str:
        """Archive a note (``content``) or logged messages verbatim (``message_ids``) now;
        returns the item's id. Raises ``ValueError`` for neither, both, an empty note or an
        id this session has not logged. One id, or one tag, may be given as a string."""
        tags = [clean_text(t) for t in ([tags] if isinstance(tags, str) else [str(t) for t in tags])]
        if content is not None and message_ids:
            raise ValueError("give content or message_ids, not both")
        if content is not None:
            if not isinstance(content, str) or not content.strip():
                raise ValueError("content must be a non-empty string")
            seq = self.state.next_seq - 1
            item = ArchiveItem(id=f"note:{uuid.uuid4().hex}", namespace=self.scope, session=self.state.key,
                               kind="note", text=clean_text(content), roles="assistant", created_at=time.time(),
                               first_seq=seq, last_seq=seq)
        elif message_ids:
            wanted = [message_ids] if isinstance(message_ids, str) else list(dict.fromkeys(str(i) for i in message_ids))
            found = {m.id: m for m, _, _ in self.store.load_messages(self.state.namespace) if m.id in set(wanted)}
            missing = [i for i in wanted if i not in found]
            if missing:
                raise ValueError(f"unknown message id(s) in this session: {missing}")
            item = self.item(sorted(found.values(), key=lambda m: m.seq), "excerpt",
                             "excerpt:" + hashlib.sha256("|".join(wanted).encode()).hexdigest()[:32])
        else:
            raise ValueError("give content or message_ids")
        item.tags = json.dumps(tags)
        with self.store.db() as session:
            self.archival.stage(session, [item])
            session.commit()
        self.archival.schedule()
        return item.id
