"""What the archive holds: :class:`ArchiveItem` rows (the source of truth for archived
text, with the token states late interaction ranks by), the :class:`Hit` a search returns,
and the archive's keyword index."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Column, Index, LargeBinary, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import defer
from sqlmodel import Field

from ..text.passage import best_passage
from ..text.search import KeywordIndex
from .log import MemosModel

__all__ = ["ARCHIVE_KINDS", "TURN_KINDS", "WITHOUT_TOKENS", "ArchiveItem", "Hit", "archive_keywords"]

ARCHIVE_KINDS = ("message", "tool_chain", "summary", "tool_result", "note", "excerpt")
TURN_KINDS = ("message", "tool_chain")  # the kinds that hold a place in a conversation


class ArchiveItem(MemosModel, table=True):
    """One archived piece of a session."""

    __tablename__ = "memos_archive"
    # a message's neighbours are found by where they start and where they end
    __table_args__ = (Index("ix_memos_archive_turn", "namespace", "session", "first_seq"),
                      Index("ix_memos_archive_turn_end", "namespace", "session", "last_seq"))

    id: str = Field(primary_key=True)
    namespace: str = Field(index=True)  # whose memory: the user (or agent, or session) it belongs to
    session: str = ""  # the session it came from, as 'user/agent/session'
    kind: str
    text: str
    message_ids: str = "[]"  # JSON list
    first_seq: int = -1
    last_seq: int = -1
    roles: str = ""  # comma-separated roles of the source messages
    tags: str = "[]"  # JSON list
    created_at: float  # time of the newest source message
    archived_at: float = Field(default_factory=time.time)
    indexed: bool = Field(default=False, index=True)  # vector written to the archive backend
    # the item's token ids and token states (memos.tiers.late), written with its vector
    token_ids: bytes | None = Field(default=None, sa_column=Column(LargeBinary, nullable=True))
    token_states: bytes | None = Field(default=None, sa_column=Column(LargeBinary, nullable=True))


@dataclass(frozen=True)
class Hit:
    """One search result: an archived item or a fact, with where it came from."""

    id: str
    kind: str
    text: str
    score: float
    message_ids: tuple[str, ...]
    first_seq: int
    last_seq: int
    roles: tuple[str, ...]
    created_at: float
    source: str  # 'archive' or 'fact'
    session: str = ""  # the session it came from ('user/agent/session'), when known
    # cosine similarity of the item to the query, when the dense search found it
    similarity: float | None = None
    # which searches found it: 'dense', 'keyword' (archive items) or 'facts'; 'bridge' for the
    # second hop from a better hit (ArchivalTier._bridged); 'context' for a turn none found,
    # ranked by the turns around it (ArchivalTier.in_context)
    found_by: tuple[str, ...] = ()

    def to_dict(self, preview_chars: int | None = None, query: str | None = None) -> dict[str, Any]:
        """The hit as plain JSON-able data, its text cut to ``preview_chars`` if given: to the
        passage that bears on ``query`` (:func:`~memos.text.passage.best_passage`) when there
        is one, else to its head. ``score`` is in [0, 1]: 1 for an item first in every search
        that ran, 0.5 for one first in one of two; ``similarity`` is its cosine similarity to
        the query, when known."""
        body = self.text
        if preview_chars is not None and len(body) > preview_chars:
            passage = best_passage(body, query, preview_chars, len) if query else None
            body = passage or body[:preview_chars] + "…"
        return {
            "id": self.id, "kind": self.kind, "text": body, "score": round(self.score, 3),
            **({"similarity": round(self.similarity, 3)} if self.similarity is not None else {}),
            **({"found_by": list(self.found_by)} if self.found_by else {}),
            "message_ids": list(self.message_ids), "seq": [self.first_seq, self.last_seq],
            "roles": list(self.roles), "time": _iso(self.created_at), "source": self.source,
            **({"session": self.session.rsplit("/", 1)[-1]} if self.session else {}),
        }


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts)) if ts > 0 else ""


def archive_keywords(engine: Engine) -> KeywordIndex:
    """The archive's keyword index (see :mod:`memos.text.search`)."""

    def documents(conn: Any) -> Any:
        return conn.execute(text("SELECT id, namespace, text FROM memos_archive"))

    return KeywordIndex(engine, "memos_archive_kw", source="memos_archive", ref_column="id", doc_sql="text",
                        documents=documents, replaces=("memos_archive_vocab", "memos_archive_fts"))


# loader options that leave an item's token states unread (they are read only to rank by them)
WITHOUT_TOKENS = (defer(ArchiveItem.token_ids), defer(ArchiveItem.token_states))  # type: ignore[arg-type]
