"""The store: SQLModel tables for the message log, summaries and compaction events.

The message log is the source of truth. Every message is written here, in its own
transaction, before any paging happens; a demotion changes only the ``tier`` and
``compacted`` columns of logged rows and adds a summary version and a compaction event,
all in one transaction. Any SQLAlchemy URL works; a plain path means a SQLite file
(opened in WAL mode with a busy timeout).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import UniqueConstraint, bindparam, func
from sqlalchemy import select as select_columns
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Field, Session, col, select

from ..core.errors import InvalidNamespace
from ..core.messages import Message, clean_text
from .schema import METADATA, MemosModel, ensure_schema, make_engine

__all__ = [
    "NAMESPACE_SEP",
    "METADATA",
    "CompactionRow",
    "MemosModel",
    "MessageRow",
    "Namespace",
    "Store",
    "SummaryRow",
    "chunks",
    "ensure_schema",
    "namespace_key",
    "validate_namespace",
]

NAMESPACE_SEP = "/"
_APPEND_ATTEMPTS = 20
Namespace = tuple[str, ...]


def validate_namespace(namespace: Sequence[Any]) -> Namespace:
    """Check a namespace (e.g. ``(user, agent, session)``) and return it as a tuple.

    Raises :class:`~memos.core.errors.InvalidNamespace` for an empty namespace, a label that is
    not a non-empty string, or a label containing ``/`` (the separator of the stored form).
    """
    ns = tuple(namespace)
    if not ns:
        raise InvalidNamespace("a namespace needs at least one label")
    for label in ns:
        if not isinstance(label, str) or not label.strip():
            raise InvalidNamespace(f"namespace labels must be non-empty strings, got {label!r}")
        if NAMESPACE_SEP in label:
            raise InvalidNamespace(f"namespace label {label!r} must not contain {NAMESPACE_SEP!r}")
        if clean_text(label) != label:  # a NUL or a lone surrogate: no store can keep it
            raise InvalidNamespace(f"namespace label {label!r} must not contain a NUL character or a lone surrogate")
    return ns


def namespace_key(ns: Namespace) -> str:
    """The stored form of a namespace: its labels joined with ``/``."""
    return NAMESPACE_SEP.join(ns)


_ns_key = namespace_key


class MessageRow(MemosModel, table=True):
    """One logged message. ``data`` is the OpenAI dict as JSON; never rewritten."""

    __tablename__ = "memos_message"
    __table_args__ = (UniqueConstraint("namespace", "seq"),)

    id: str = Field(primary_key=True)
    namespace: str = Field(index=True)
    seq: int
    role: str
    data: str
    tokens: int
    created_at: float
    # 'hot' (raw in the context), 'warm' (demoted: summarised), 'pinned' (demoted but pinned),
    # 'cleared' (set aside when the session was cleared)
    tier: str = Field(default="hot")
    # pinned by the user (Memory.pin) or by a guard when it was demoted
    pinned: bool = Field(default=False)
    # replaced by a placeholder in the hot tier (soft compaction); the data stays here
    compacted: bool = Field(default=False)


# the log's newest sequence number of a session, asked before every add() and context()
_NEWEST_SEQ = select(func.max(MessageRow.seq)).where(col(MessageRow.namespace) == bindparam("ns"))
# a session's rows as Store.load_messages reads them (the first six are _message's arguments)
_SESSION_ROWS = (select_columns(col(MessageRow.id), col(MessageRow.seq), col(MessageRow.data), col(MessageRow.tokens),
                                col(MessageRow.created_at), col(MessageRow.pinned), col(MessageRow.tier),
                                col(MessageRow.compacted))
                 .where(col(MessageRow.namespace) == bindparam("ns")).order_by(col(MessageRow.seq)))


class SessionRow(MemosModel, table=True):
    """A session's settings as its app last used them (what ``memos inspect`` measures against)."""

    __tablename__ = "memos_session"

    namespace: str = Field(primary_key=True)
    budget_tokens: int
    updated_at: float


class SummaryRow(MemosModel, table=True):
    """One version of a session's rolling summary."""

    __tablename__ = "memos_summary"

    id: int | None = Field(default=None, primary_key=True)
    namespace: str = Field(index=True)
    version: int
    text: str
    tokens: int
    # the newest message seq folded into this version
    through_seq: int
    # 'incremental' (old summary + new segment) or 'full' (rebuilt from the logged originals)
    kind: str
    created_at: float


class CompactionRow(MemosModel, table=True):
    """One paging event: a soft compaction or a demotion."""

    __tablename__ = "memos_compaction"

    id: int | None = Field(default=None, primary_key=True)
    namespace: str = Field(index=True)
    kind: str  # 'soft' or 'hard'
    tokens_before: int
    tokens_after: int
    message_ids: str  # JSON list of the message ids compacted or demoted
    summary_version: int | None = None
    summarizer: str = ""  # what wrote the summary: 'extractive', 'llm', or 'extractive (fallback: ...)'
    extractor: str = ""  # what extracted the facts, the same way
    duration_ms: float = 0.0
    created_at: float
    # JSON: {"added": [fact ids], "updated": [[new, old]], "invalidated": [fact ids]}
    facts: str = "{}"
    # set on events a rollback undid: the id of the 'rollback' event
    rolled_back_by: int | None = None


@dataclass(frozen=True)
class Demotion:
    """What one demotion writes, in one transaction."""

    warm_ids: Sequence[str]
    pinned_ids: Sequence[str]
    summary_text: str | None  # None: the summary is unchanged (only pinned units moved)
    summary_tokens: int
    summary_kind: str
    through_seq: int
    tokens_before: int
    tokens_after: int
    summarizer: str
    duration_ms: float
    extractor: str = ""


def _messages_by_id(s: Session, key: str, ids: Iterable[str]) -> list[MessageRow]:
    """The logged rows of namespace ``key`` with these ids. Looked up by primary key, the
    namespace checked on each row: with ``namespace = ? AND id IN (...)`` SQLite used the
    namespace index and read the whole session (20 ms a demotion at 100k messages)."""
    rows = [r for part in chunks(list(ids)) for r in s.exec(select(MessageRow).where(col(MessageRow.id).in_(part))).all()]
    return [r for r in rows if r.namespace == key]


def chunks(items: Sequence[str], size: int = 500) -> Iterator[Sequence[str]]:
    """``items`` in slices of at most ``size``, to keep ``IN (...)`` lists within the
    databases' parameter limits."""
    for lo in range(0, len(items), size):
        yield items[lo : lo + size]


class Store:
    """Reads and writes one database. Every method is scoped by a namespace."""

    def __init__(self, store: str | Path | Engine, *, create_folder: bool = False) -> None:
        self.engine = store if isinstance(store, Engine) else make_engine(store, create_folder=create_folder)
        ensure_schema(self.engine)

    def close(self) -> None:
        """Release the engine's connections."""
        self.engine.dispose()

    # -- message log ---------------------------------------------------------------

    def load_messages(self, ns: Namespace) -> list[tuple[Message, str, bool]]:
        """Every logged message of ``ns`` in order, with its tier and compacted flag."""
        with self.engine.connect() as c:  # plain rows: ORM objects cost three times as much (a long session's reload)
            rows = c.execute(_SESSION_ROWS, {"ns": _ns_key(ns)}).all()
        return [(_message(*r[:6]), r[6], r[7]) for r in rows]  # by position: a row's attributes cost 40 % more

    def record_budget(self, ns: Namespace, budget_tokens: int) -> None:
        """Remember the budget ``ns`` is used with (written only when it changed)."""
        key = _ns_key(ns)
        with Session(self.engine, expire_on_commit=False) as s:
            row = s.get(SessionRow, key)
            if row is not None and row.budget_tokens == budget_tokens:
                return
            row = row or SessionRow(namespace=key, budget_tokens=budget_tokens, updated_at=time.time())
            row.budget_tokens, row.updated_at = budget_tokens, time.time()
            s.add(row)
            try:
                s.commit()
            except IntegrityError:  # another process recorded it first: theirs is as good
                s.rollback()

    def recorded_budget(self, ns: Namespace) -> int | None:
        """The budget ``ns`` was last used with, if recorded."""
        with Session(self.engine, expire_on_commit=False) as s:
            row = s.get(SessionRow, _ns_key(ns))
            return row.budget_tokens if row is not None else None

    def newest_messages(self, ns: Namespace, limit: int) -> list[Message]:
        """The newest ``limit`` messages of ``ns`` not set aside by a clear, oldest first."""
        with Session(self.engine, expire_on_commit=False) as s:
            rows = s.exec(select(MessageRow).where(MessageRow.namespace == _ns_key(ns), MessageRow.tier != "cleared")
                          .order_by(col(MessageRow.seq).desc()).limit(limit)).all()
            return [_to_message(r) for r in reversed(rows)]

    def warm_tail(self, ns: Namespace, limit: int) -> list[Message]:
        """The newest ``limit`` demoted (warm) messages of ``ns``, in order."""
        with Session(self.engine, expire_on_commit=False) as s:
            q = (select(MessageRow).where(MessageRow.namespace == _ns_key(ns), MessageRow.tier == "warm")
                 .order_by(col(MessageRow.seq).desc()).limit(limit))
            return [_to_message(r) for r in reversed(s.exec(q).all())]

    def time_from(self, ns: Namespace, seq: int) -> float:
        """When the oldest message of ``ns`` numbered ``seq`` or later was added (0 when none is)."""
        with Session(self.engine, expire_on_commit=False) as s:
            first = s.exec(select(func.min(MessageRow.created_at)).where(MessageRow.namespace == _ns_key(ns),
                                                                         MessageRow.seq >= seq)).one()
            return 0.0 if first is None else float(first)

    def next_seq(self, ns: Namespace) -> int:
        """The sequence number the next message of ``ns`` gets."""
        with self.engine.connect() as c:  # a plain query, built once: an ORM session costs five times as much
            top = c.execute(_NEWEST_SEQ, {"ns": _ns_key(ns)}).scalar()
            return 0 if top is None else int(top) + 1

    def append(self, ns: Namespace, items: Sequence[tuple[dict[str, Any], int, bool]], first_seq: int, *,
               also: Callable[[Session, list[Message]], Any] | None = None) -> list[Message]:
        """Log new messages (data, tokens, pinned) in one transaction and return them.

        They get the sequence numbers from ``first_seq`` on; when another process has taken
        those meanwhile (two writers on one session), the next free ones, so nothing is lost.
        ``also(session, messages)`` runs in the same transaction (the archive's outbox rows).
        """

        for attempt in range(_APPEND_ATTEMPTS):
            now = time.time()
            out = []
            rows = []
            for offset, (data, tokens, pinned) in enumerate(items):
                mid = uuid.uuid4().hex
                seq = first_seq + offset
                rows.append({"id": mid, "namespace": _ns_key(ns), "seq": seq, "role": data["role"],
                             "data": json.dumps(data, ensure_ascii=False), "tokens": tokens, "created_at": now,
                             "tier": "hot", "pinned": pinned, "compacted": False})
                out.append(Message(id=mid, seq=seq, data=data, tokens=tokens, created_at=now, pinned=pinned))
            try:
                with Session(self.engine, expire_on_commit=False) as s:
                    # a plain INSERT: the ORM's unit of work is not needed here
                    s.execute(MessageRow.__table__.insert(), rows)  # type: ignore[attr-defined]
                    if also is not None:
                        also(s, out)
                    s.commit()
                return out
            except IntegrityError:
                if attempt == _APPEND_ATTEMPTS - 1:
                    raise
                first_seq = self.next_seq(ns)
        raise AssertionError("unreachable")

    def set_flags(self, ns: Namespace, ids: Iterable[str], **values: Any) -> None:
        """Set ``pinned`` / ``compacted`` / ``tier`` on logged rows of ``ns``."""
        ids = list(ids)
        if not ids:
            return
        with Session(self.engine, expire_on_commit=False) as s:
            rows = _messages_by_id(s, _ns_key(ns), ids)
            for r in rows:
                for k, v in values.items():
                    setattr(r, k, v)
                s.add(r)
            s.commit()

    def compact(self, ns: Namespace, ids: Sequence[str], tokens_before: int, tokens_after: int, *,
                also: Callable[[Session], Any] | None = None) -> None:
        """Record a soft compaction: mark ``ids`` compacted and log the event, in one
        transaction with ``also(session)``."""
        with Session(self.engine, expire_on_commit=False) as s:
            facts = also(s) if also is not None else None
            rows = _messages_by_id(s, _ns_key(ns), ids)
            for r in rows:
                r.compacted = True
                s.add(r)
            s.add(CompactionRow(namespace=_ns_key(ns), kind="soft", tokens_before=tokens_before,
                                tokens_after=tokens_after, message_ids=json.dumps(list(ids)),
                                facts=json.dumps(facts or {}), created_at=time.time()))
            s.commit()

    def db(self) -> Session:
        """A new database session on the store's engine (the caller commits)."""
        return Session(self.engine, expire_on_commit=False)

    def demote(self, ns: Namespace, d: Demotion, *, also: Callable[[Session], Any] | None = None) -> SummaryRow | None:
        """Apply a demotion in one transaction; returns the new summary version, if any.

        ``also(session)`` runs inside the same transaction (the cold tier's facts); what it
        returns is recorded with the event as the facts it changed.
        """
        key = _ns_key(ns)
        with Session(self.engine, expire_on_commit=False) as s:
            facts = also(s) if also is not None else None
            ids = list(d.warm_ids) + list(d.pinned_ids)
            rows = _messages_by_id(s, key, ids)
            pinned = set(d.pinned_ids)
            for r in rows:
                r.tier = "pinned" if r.id in pinned else "warm"
                s.add(r)
            summary = None
            if d.summary_text is not None:
                top = s.exec(select(func.max(SummaryRow.version)).where(SummaryRow.namespace == key)).one()
                summary = SummaryRow(namespace=key, version=1 if top is None else int(top) + 1, text=d.summary_text,
                                     tokens=d.summary_tokens, through_seq=d.through_seq, kind=d.summary_kind,
                                     created_at=time.time())
                s.add(summary)
            s.add(CompactionRow(namespace=key, kind="hard", tokens_before=d.tokens_before, tokens_after=d.tokens_after,
                                message_ids=json.dumps(ids), summary_version=summary.version if summary else None,
                                summarizer=d.summarizer, extractor=d.extractor, duration_ms=d.duration_ms,
                                facts=json.dumps(facts or {}), created_at=time.time()))
            s.commit()
            if summary is not None:
                s.refresh(summary)
                s.expunge(summary)
        return summary

    def rollback(self, ns: Namespace, event_id: int, *, also: Callable[[Session, list[CompactionRow]], Any] | None = None
                 ) -> CompactionRow:
        """Undo compaction event ``event_id`` of ``ns`` and every later one, in one transaction:
        their messages are hot (and not compacted) again, the summary is the one from before
        the event (as a new version), and ``also(session, undone_events)`` reverses their facts.
        Returns the ``rollback`` event recorded. Raises ``KeyError`` when ``ns`` has no such event."""
        key = _ns_key(ns)
        with Session(self.engine, expire_on_commit=False) as s:
            target = s.get(CompactionRow, event_id)
            if target is None or target.namespace != key or target.kind not in ("soft", "hard"):
                raise KeyError(f"no compaction event {event_id} in this session")
            if target.rolled_back_by is not None:
                raise KeyError(f"compaction event {event_id} was already rolled back (by event {target.rolled_back_by})")
            cleared = s.exec(select(CompactionRow.id).where(CompactionRow.namespace == key, CompactionRow.kind == "clear",
                                                            col(CompactionRow.id) > event_id)).first()
            if cleared is not None:
                raise KeyError(f"compaction event {event_id} comes before the session was cleared (event {cleared})")
            undone = list(s.exec(select(CompactionRow).where(
                CompactionRow.namespace == key, col(CompactionRow.id) >= event_id, col(CompactionRow.kind).in_(["soft", "hard"]),
                col(CompactionRow.rolled_back_by).is_(None)).order_by(col(CompactionRow.id).desc())).all())
            restored: list[str] = []
            for ev in undone:
                ids = json.loads(ev.message_ids)
                restored += ids
                rows = _messages_by_id(s, key, ids)
                for r in rows:
                    if ev.kind == "hard":
                        r.tier = "hot"
                    r.compacted = False
                    s.add(r)
            if also is not None:
                also(s, undone)
            versions = [ev.summary_version for ev in undone if ev.summary_version is not None]
            summary_version = None
            if versions:
                before = s.exec(select(SummaryRow).where(SummaryRow.namespace == key,
                                                         SummaryRow.version == min(versions) - 1)).first()
                top = s.exec(select(func.max(SummaryRow.version)).where(SummaryRow.namespace == key)).one()
                summary_version = int(top or 0) + 1
                s.add(SummaryRow(namespace=key, version=summary_version, text=before.text if before else "",
                                 tokens=before.tokens if before else 0, through_seq=before.through_seq if before else -1,
                                 kind="rollback", created_at=time.time()))
            record = CompactionRow(namespace=key, kind="rollback", tokens_before=0, tokens_after=0,
                                   message_ids=json.dumps(restored), summary_version=summary_version,
                                   facts=json.dumps({"rolled_back_to": event_id, "undone": [ev.id for ev in undone]}),
                                   created_at=time.time())
            s.add(record)
            s.flush()
            for ev in undone:
                ev.rolled_back_by = record.id
                s.add(ev)
            s.commit()
            s.refresh(record)
            s.expunge(record)
            return record

    def clear(self, ns: Namespace) -> CompactionRow | None:
        """Set every message of ``ns`` aside (tier ``cleared``) and start an empty summary
        version, in one transaction, logged as a ``clear`` event; ``None`` when there was
        nothing to clear. The rows stay in the log (and their archived copies in the archive)."""
        key = _ns_key(ns)
        with Session(self.engine, expire_on_commit=False) as s:
            rows = list(s.exec(select(MessageRow).where(MessageRow.namespace == key, MessageRow.tier != "cleared")
                               .order_by(col(MessageRow.seq))).all())
            if not rows:
                return None
            for r in rows:
                r.tier = "cleared"
                s.add(r)
            top = s.exec(select(func.max(SummaryRow.version)).where(SummaryRow.namespace == key)).one()
            version = 1 if top is None else int(top) + 1
            s.add(SummaryRow(namespace=key, version=version, text="", tokens=0, through_seq=rows[-1].seq, kind="clear",
                             created_at=time.time()))
            record = CompactionRow(namespace=key, kind="clear", tokens_before=sum(r.tokens for r in rows),
                                   tokens_after=0, message_ids=json.dumps([r.id for r in rows]),
                                   summary_version=version, created_at=time.time())
            s.add(record)
            s.commit()
            s.refresh(record)
            s.expunge(record)
            return record

    def withdraw(self, ns: Namespace, message_id: str, *, also: Callable[[Session], Any] | None = None) -> bool:
        """Delete message ``message_id`` of ``ns`` from the log if it is the newest one and
        not set aside, with ``also(session)`` in the same transaction; whether it was."""
        key = _ns_key(ns)
        with Session(self.engine, expire_on_commit=False) as s:
            newest = s.exec(select(MessageRow).where(MessageRow.namespace == key)
                            .order_by(col(MessageRow.seq).desc())).first()
            if newest is None or newest.id != message_id or newest.tier != "hot":
                return False
            if also is not None:
                also(s)
            s.delete(newest)
            s.commit()
            return True

    # -- summaries and events ------------------------------------------------------

    def latest_summary(self, ns: Namespace) -> SummaryRow | None:
        """The newest summary version of ``ns``, if any."""
        with Session(self.engine, expire_on_commit=False) as s:
            return s.exec(
                select(SummaryRow).where(SummaryRow.namespace == _ns_key(ns)).order_by(col(SummaryRow.version).desc())
            ).first()

    def summaries(self, ns: Namespace) -> list[SummaryRow]:
        """Every summary version of ``ns``, oldest first."""
        with Session(self.engine, expire_on_commit=False) as s:
            q = select(SummaryRow).where(SummaryRow.namespace == _ns_key(ns)).order_by(col(SummaryRow.version))
            return list(s.exec(q).all())

    def compactions(self, ns: Namespace) -> list[CompactionRow]:
        """Every compaction event of ``ns``, oldest first."""
        with Session(self.engine, expire_on_commit=False) as s:
            q = select(CompactionRow).where(CompactionRow.namespace == _ns_key(ns)).order_by(col(CompactionRow.id))
            return list(s.exec(q).all())


def _message(id_: str, seq: int, data: str, tokens: int, created_at: float, pinned: bool) -> Message:
    return Message(id=id_, seq=seq, data=json.loads(data), tokens=tokens, created_at=created_at, pinned=pinned)


def _to_message(r: MessageRow) -> Message:
    return _message(r.id, r.seq, r.data, r.tokens, r.created_at, r.pinned)
