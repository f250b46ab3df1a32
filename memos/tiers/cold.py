"""The cold tier: structured facts in a SQLModel table, with history.

A fact is a kind (constraint, preference, identifier, task_state, decision,
failed_attempt, fact), a key and a value, with the messages it came from. Facts are
never overwritten: an UPDATE closes the current row (``valid_to``, ``superseded_by``)
and adds a new one, INVALIDATE closes a row the user revoked, NOOP leaves a fact that
is already known alone. :meth:`ColdTier.forget` deletes a fact on request and records
that it did.

Full-text search uses an SQLite FTS5 table (trigram tokenizer, so identifiers and
Chinese text match by substring); on other databases a plain ``LIKE`` search is used.
:func:`decide` is the pure rule that picks the operation for a candidate.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from sqlalchemy import Index, event, text
from sqlalchemy.engine import Engine
from sqlmodel import Field, Session, col, func, select

from ..store import MemosModel
from ..text.search import KeywordIndex
from ..text.terms import content_terms

__all__ = [
    "FACT_KINDS",
    "RULE_KINDS",
    "SLOT_KINDS",
    "ColdTier",
    "Fact",
    "FactBase",
    "FactCandidate",
    "FactChange",
    "FactOp",
    "ForgetRecord",
    "Invalidation",
    "decide",
    "fact_key",
    "key_family",
    "normalize",
]

FACT_KINDS = ("constraint", "preference", "identifier", "task_state", "decision", "failed_attempt", "fact")
# Kinds that share keys: a rule is one rule whether it was judged a constraint or a preference,
# and a single-valued slot ("address") is one slot whether a rule called it a fact or an identifier.
RULE_KINDS = ("constraint", "preference")
SLOT_KINDS = ("fact", "identifier")


class FactBase(MemosModel):
    """The fields of a fact (a data model: validate through it, see :class:`Fact`)."""

    namespace: str = Field(index=True)
    kind: str = Field(index=True)
    key: str = Field(index=True)
    value: str
    source_ids: str = "[]"  # JSON list of the message ids the fact came from
    source_seq: int = -1  # seq of the newest source message; orders values of one key in time
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    created_at: float = Field(default_factory=time.time)
    valid_from: float = Field(default_factory=time.time)
    valid_to: float | None = None
    superseded_by: int | None = None
    pinned: bool = False
    status: str = Field(default="current", index=True)  # current | superseded | invalidated
    # who stated or found it: 'explicit' (pin(text=...)), 'classifier', 'llm', 'rules', ...
    origin: str = ""


class Fact(FactBase, table=True):
    """One row of the fact table. Build rows with ``Fact.model_validate(...)``."""

    __tablename__ = "memos_fact"
    # Without statistics SQLite picks the index matching the most equality columns, so each
    # hot query gets one that matches all of its own: a key's rows, the slots, the pinned facts.
    __table_args__ = (
        Index("ix_memos_fact_lookup", "namespace", "kind", "key", "status", "pinned"),
        Index("ix_memos_fact_slot", "namespace", "kind", "status", "pinned"),
        Index("ix_memos_fact_pinned", "namespace", "pinned", "status"),
    )

    id: int | None = Field(default=None, primary_key=True)

    @property
    def sources(self) -> list[str]:
        """The message ids the fact came from."""
        return list(json.loads(self.source_ids))

    def line(self) -> str:
        """The fact as one compact line, identifiers verbatim."""
        if self.kind in ("constraint", "preference", "decision"):
            return f"{self.kind}: {self.value}"
        if self.key == self.value or self.value.startswith(self.key):
            return f"{self.kind}: {self.value}"
        return f"{self.kind} {self.key}: {self.value}"


class ForgetRecord(MemosModel, table=True):
    """A fact deleted on request: its kind, a hash of its key (an identifier's key is the
    identifier) and of its value, never the value itself."""

    __tablename__ = "memos_forget"

    id: int | None = Field(default=None, primary_key=True)
    namespace: str = Field(index=True)
    fact_id: int
    kind: str
    key: str
    value_sha256: str
    reason: str
    # facts for this kind and key from messages up to this seq are not extracted again
    through_seq: int = -1
    created_at: float = Field(default_factory=time.time)
    # JSON: how many messages, summaries and archive items had the value redacted
    erased: str = "{}"


class FactOp(str, Enum):
    """What applying a candidate did to the table."""

    ADD = "ADD"
    UPDATE = "UPDATE"
    INVALIDATE = "INVALIDATE"
    NOOP = "NOOP"


@dataclass(frozen=True)
class FactCandidate:
    """A fact an extractor proposes.

    ``single`` makes the key single-valued: a new value supersedes the current one (an
    address, "my email is ..."). ``once`` records the key once: later candidates for a
    key that has a current row are NOOP (an identifier seen again in another sentence).
    """

    kind: str
    key: str
    value: str
    source_ids: tuple[str, ...] = ()
    source_seq: int = -1
    confidence: float = 1.0
    pinned: bool = False
    single: bool = False
    once: bool = False
    origin: str = ""

    def __post_init__(self) -> None:
        if self.kind not in FACT_KINDS:
            raise ValueError(f"unknown fact kind {self.kind!r}; expected one of {FACT_KINDS}")
        if not self.key.strip() or not self.value.strip():
            raise ValueError("a fact needs a non-empty key and value")


@dataclass(frozen=True)
class Invalidation:
    """A statement revoking earlier facts ("I no longer …"); matched against current
    constraints and preferences by shared words."""

    text: str
    source_ids: tuple[str, ...] = ()
    source_seq: int = -1
    # the exact fact to revoke, when the extractor knows it (an LLM given the fact ids)
    fact_id: int | None = None


@dataclass(frozen=True)
class FactChange:
    """The outcome of one candidate or invalidation."""

    op: FactOp
    fact: Fact
    previous: Fact | None = None


def fact_log(changes: Iterable[FactChange]) -> dict[str, Any]:
    """What a batch of changes did, as the compaction log records it: fact ids added,
    ``[new, old]`` pairs updated, ids invalidated."""
    out: dict[str, Any] = {"added": [], "updated": [], "invalidated": []}
    for ch in changes:
        if ch.op is FactOp.ADD and ch.fact.status == "current":
            out["added"].append(ch.fact.id)
        elif ch.op is FactOp.UPDATE:
            out["updated"].append([ch.fact.id, ch.previous.id if ch.previous else None])
        elif ch.op is FactOp.INVALIDATE:
            out["invalidated"].append(ch.fact.id)
    return out


@dataclass
class _Index:
    """Normalised values of every fact ever seen (any status) and of forgotten ones."""

    values: set[str] = field(default_factory=set)
    keys: set[str] = field(default_factory=set)


_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"[\w$€£¥.-]+|[\u4e00-\u9fff]+", re.UNICODE)
def _digest(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def normalize(value: str) -> str:
    """A value compared for equality: lower case, single spaces, no trailing punctuation."""
    return _SPACE.sub(" ", value).strip().strip(".,;:!?。！？；，").lower()


def fact_key(kind: str, text: str) -> str:
    """The key a fact of ``kind`` stated as ``text`` is stored under. Every path that writes
    facts uses it (the rules, an LLM's operations, ``pin(text=...)``), so the same rule or the
    same slot always lands on the same key: identifiers are their own key, verbatim; anything
    else is its normalised text."""
    if kind not in FACT_KINDS:
        raise ValueError(f"unknown fact kind {kind!r}; expected one of {FACT_KINDS}")
    return text.strip()[:160] if kind == "identifier" else normalize(text)[:160]


def key_family(candidate: FactCandidate) -> tuple[str, ...]:
    """The kinds whose rows a candidate is compared with: every rule kind for a rule, both
    slot kinds for a single-valued slot, else its own kind."""
    if candidate.kind in RULE_KINDS:
        return RULE_KINDS
    if candidate.single and candidate.kind in SLOT_KINDS:
        return SLOT_KINDS
    return (candidate.kind,)


def decide(candidate: FactCandidate, same_key: Sequence[Fact]) -> tuple[FactOp, Fact | None]:
    """The operation for ``candidate`` given the rows with its namespace, kind and key.

    Returns the op and the row it concerns: NOOP with the row already holding the value;
    UPDATE with the current row the candidate supersedes; ADD with None, or, for an
    older value of a single-valued key arriving late, with the newer current row (the
    candidate is then stored as history, superseded by it).
    """
    value = normalize(candidate.value)
    if candidate.kind in RULE_KINDS:  # a rule's key is its text: the same key is the same rule
        current = [r for r in same_key if r.status == "current"]
        if current:
            return FactOp.NOOP, current[0]
    for row in same_key:
        if normalize(row.value) == value and row.status != "invalidated":
            return FactOp.NOOP, row
    current = [r for r in same_key if r.status == "current"]
    if candidate.once and current:
        return FactOp.NOOP, current[0]
    if not candidate.single or not current:
        return FactOp.ADD, None
    newest = max(current, key=lambda r: r.source_seq)
    if candidate.source_seq >= newest.source_seq:
        return FactOp.UPDATE, newest
    return FactOp.ADD, newest


class ColdTier:
    """The facts of one namespace."""

    def __init__(self, engine: Engine, namespace: str) -> None:
        self.engine = engine
        self.namespace = namespace
        self.version = 0  # bumped on every change, so callers can cache renderings
        self.keywords = fact_keywords(engine)
        self._known: _Index | None = None

    # -- writes --------------------------------------------------------------------

    def apply(
        self,
        candidates: Iterable[FactCandidate],
        invalidations: Iterable[Invalidation] = (),
        *,
        session: Session | None = None,
    ) -> list[FactChange]:
        """Apply invalidations, then candidates, in one transaction (``session``'s, if given)."""
        if session is None:
            with Session(self.engine, expire_on_commit=False) as s:
                done = self.apply(candidates, invalidations, session=s)
                s.commit()
                return done
        changes: list[FactChange] = []
        now = time.time()
        forgotten = self._forgotten_keys(session)
        for inv in invalidations:
            changes.extend(self._invalidate_matching(session, inv, now))
        for cand in candidates:
            gone = max(forgotten.get((cand.kind, cand.key), -2), forgotten.get((cand.kind, _digest(cand.key)), -2))
            if gone >= cand.source_seq:
                continue
            changes.append(self._apply_one(session, cand, now))
        session.flush()
        written = [ch.fact for ch in changes if ch.op is not FactOp.NOOP]
        for fact in written:
            self._index_fts(session, fact)
        if written:
            # the caches learn the new values once the transaction commits, and are rebuilt if it fails
            learned = [(normalize(f.value), f.key) for f in written]
            event.listen(session, "after_commit", lambda _s: self._learn(learned), once=True)
            event.listen(session, "after_rollback", lambda _s: self.invalidate_caches(), once=True)
        return changes

    def _learn(self, learned: list[tuple[str, str]]) -> None:
        if self._known is not None:
            for value, key in learned:
                self._known.values.add(value)
                self._known.keys.add(key)
        self.version += 1

    def invalidate_caches(self) -> None:
        """Forget what is cached of the table (after a failed transaction, or a change made
        elsewhere): the next read rebuilds it."""
        self._known = None
        self._forgot = None
        self.version += 1

    def undo(self, log: dict[str, Any], session: Session) -> int:
        """Reverse the changes a compaction event recorded (see :func:`fact_log`): facts it
        added are invalidated, values it replaced are current again, facts it invalidated
        are restored. Returns how many rows changed."""
        now = time.time()
        n = 0

        def set_status(fact_id: int, status: str, *, expect: str) -> None:
            nonlocal n
            row = session.get(Fact, fact_id)
            if row is None or row.namespace != self.namespace or row.status != expect:
                return
            row.status = status
            row.valid_to = now if status != "current" else None
            if status == "current":
                row.superseded_by = None
            session.add(row)
            n += 1

        for new_id, old_id in log.get("updated", []):
            set_status(int(new_id), "invalidated", expect="current")
            set_status(int(old_id), "current", expect="superseded")
        for fact_id in log.get("added", []):
            set_status(int(fact_id), "invalidated", expect="current")
        for fact_id in log.get("invalidated", []):
            set_status(int(fact_id), "current", expect="invalidated")
        session.flush()
        if n:
            self.version += 1
            self._known = None
        return n

    def _apply_one(self, s: Session, cand: FactCandidate, now: float) -> FactChange:
        family = key_family(cand)
        kind_is = Fact.kind == cand.kind if len(family) == 1 else col(Fact.kind).in_(family)
        same = s.exec(select(Fact).where(Fact.namespace == self.namespace, kind_is, Fact.key == cand.key)).all()
        op, row = decide(cand, same)
        if op is FactOp.NOOP:
            assert row is not None
            return FactChange(op, row)
        fact = Fact.model_validate({
            "namespace": self.namespace, "kind": cand.kind, "key": cand.key, "value": cand.value.strip(),
            "source_ids": json.dumps(list(cand.source_ids)), "source_seq": cand.source_seq,
            "confidence": cand.confidence, "pinned": cand.pinned, "created_at": now, "valid_from": now,
            "origin": cand.origin,
        })
        if op is FactOp.ADD and row is not None:  # an older value arriving late: history only
            fact.status = "superseded"
            fact.valid_to = row.valid_from
            fact.superseded_by = row.id
            s.add(fact)
            return FactChange(op, fact, None)
        s.add(fact)
        s.flush()
        if op is FactOp.UPDATE and row is not None:
            row.status = "superseded"
            row.valid_to = now
            row.superseded_by = fact.id
            s.add(row)
        return FactChange(op, fact, row)

    def _invalidate_matching(self, s: Session, inv: Invalidation, now: float) -> list[FactChange]:
        if inv.fact_id is not None:
            row = s.get(Fact, inv.fact_id)
            if row is None or row.namespace != self.namespace or row.status != "current":
                return []
            row.status = "invalidated"
            row.valid_to = now
            s.add(row)
            return [FactChange(FactOp.INVALIDATE, row)]
        words = content_terms(inv.text)
        if not words:
            return []
        rows = s.exec(
            select(Fact).where(Fact.namespace == self.namespace, Fact.status == "current",
                               col(Fact.kind).in_(("constraint", "preference")))
        ).all()
        out = []
        for row in rows:
            if row.source_seq > inv.source_seq >= 0:
                continue
            fw = content_terms(row.value)
            shared = words & fw
            if fw and (len(shared) >= 2 or len(shared) / len(fw) >= 0.5):
                row.status = "invalidated"
                row.valid_to = now
                s.add(row)
                out.append(FactChange(FactOp.INVALIDATE, row))
        return out

    def invalidate(self, fact_id: int) -> Fact:
        """Close a current fact as revoked by the user."""
        with Session(self.engine, expire_on_commit=False) as s:
            row = self._get(s, fact_id)
            if row.status == "current":
                row.status = "invalidated"
                row.valid_to = time.time()
                s.add(row)
                s.commit()
                s.refresh(row)
                self.version += 1
            return row

    def get(self, fact_id: int) -> Fact:
        """One fact of this namespace by id (any status); ``ValueError`` when there is none."""
        with Session(self.engine, expire_on_commit=False) as s:
            return self._get(s, fact_id)

    def set_pinned(self, fact_id: int, pinned: bool, *, origin: str | None = None) -> Fact:
        """Pin or unpin a fact (pinned facts appear in every context while current);
        ``origin`` records who pinned it (``'explicit'`` for :meth:`memos.Memory.pin`)."""
        with Session(self.engine, expire_on_commit=False) as s:
            row = self._get(s, fact_id)
            row.pinned = pinned
            if origin is not None:
                row.origin = origin
            s.add(row)
            s.commit()
            s.refresh(row)
            self.version += 1
            return row

    def forget(self, fact_id: int, reason: str = "user request", *, through_seq: int | None = None,
               erased: dict[str, int] | None = None) -> ForgetRecord:
        """Delete a fact (and the rows of its history chain) and record the deletion.

        Messages up to ``through_seq`` (default: the newest source of the deleted rows)
        do not bring the fact back when they are read again.
        """
        with Session(self.engine, expire_on_commit=False) as s:
            row = self._get(s, fact_id)
            chain = self._chain(s, row)
            upto = max(r.source_seq for r in chain) if through_seq is None else through_seq
            record = None
            for r in chain:
                rec = ForgetRecord(namespace=self.namespace, fact_id=int(r.id or 0), kind=r.kind, key=_digest(r.key),
                                   value_sha256=hashlib.sha256(normalize(r.value).encode()).hexdigest(), reason=reason,
                                   through_seq=upto, erased=json.dumps(erased or {}))
                s.add(rec)
                record = record or rec
                self.keywords.remove(s, [r.id])
                s.delete(r)
            s.commit()
            assert record is not None
            s.refresh(record)
            self.version += 1
            self._known = None
            self._forgot = None
            return record

    # -- reads ---------------------------------------------------------------------

    def facts(self, kind: str | None = None, *, include_history: bool = False, pinned: bool | None = None) -> list[Fact]:
        """Facts of this namespace, oldest first; current ones only unless ``include_history``."""
        with Session(self.engine, expire_on_commit=False) as s:
            q = select(Fact).where(Fact.namespace == self.namespace)
            if kind is not None:
                q = q.where(Fact.kind == kind)
            if not include_history:
                q = q.where(Fact.status == "current")
            if pinned is not None:
                q = q.where(Fact.pinned == pinned)
            return list(s.exec(q.order_by(col(Fact.source_seq), col(Fact.id))).all())

    def slots(self) -> list[Fact]:
        """Current, unpinned values of single-valued keys (an address, "my X is Y")."""
        current = (Fact.namespace == self.namespace, Fact.status == "current", Fact.pinned == False)  # noqa: E712
        with Session(self.engine, expire_on_commit=False) as s:
            # two queries, not one with OR: each then runs on an index (an OR made SQLite scan every current fact)
            rows = [*s.exec(select(Fact).where(*current, Fact.kind == "fact")).all(),
                    *s.exec(select(Fact).where(*current, Fact.kind == "identifier", Fact.key == "address")).all()]
        return sorted(rows, key=lambda f: (f.source_seq, f.id or 0))

    def history(self, fact_id: int) -> list[Fact]:
        """The rows of the key a fact belongs to, oldest first (for a single-valued key, its chain)."""
        with Session(self.engine, expire_on_commit=False) as s:
            return self._chain(s, self._get(s, fact_id))

    def search(self, query: str, limit: int = 10, *, kinds: Sequence[str] | None = None) -> list[Fact]:
        """Current facts matching ``query`` (key or value), best first (see :mod:`memos.text.search`)."""
        with Session(self.engine, expire_on_commit=False) as s:
            ids = [int(i) for i in self.keywords.search(s, self.namespace, query, limit * 4, where="status = 'current'")]
            if not ids:
                return []
            by_id = {f.id: f for f in s.exec(select(Fact).where(col(Fact.id).in_(ids))).all()}
        found = [by_id[i] for i in ids if i in by_id]
        return [f for f in found if f.status == "current" and (kinds is None or f.kind in kinds)][:limit]

    def _index(self) -> _Index:
        if self._known is None:
            idx = _Index()
            with Session(self.engine, expire_on_commit=False) as s:
                for key, value in s.exec(select(Fact.key, Fact.value).where(Fact.namespace == self.namespace)).all():
                    idx.values.add(normalize(value))
                    idx.keys.add(key)
                q = select(ForgetRecord.value_sha256).where(ForgetRecord.namespace == self.namespace)
                self._forgotten = set(s.exec(q).all())
            self._known = idx
        return self._known

    def knows(self, value: str) -> bool:
        """Whether a value was ever a fact here (any status, or forgotten)."""
        n = normalize(value)
        return n in self._index().values or hashlib.sha256(n.encode()).hexdigest() in self._forgotten

    def has_key(self, key: str) -> bool:
        """Whether any fact here (any status) has this key."""
        return key in self._index().keys

    def superseded_values(self, *, max_chars: int = 120, limit: int = 200) -> list[str]:
        """Values that were replaced by newer ones (the newest ``limit``, each at most ``max_chars``)."""
        with Session(self.engine, expire_on_commit=False) as s:
            q = (select(Fact.value).where(Fact.namespace == self.namespace, Fact.status == "superseded",
                                          func.length(Fact.value) <= max_chars)
                 .order_by(col(Fact.id).desc()).limit(limit))
            return list(s.exec(q).all())[::-1]

    def forgotten(self) -> list[ForgetRecord]:
        """The deletions recorded for this namespace."""
        with Session(self.engine, expire_on_commit=False) as s:
            return list(s.exec(select(ForgetRecord).where(ForgetRecord.namespace == self.namespace)).all())

    # -- helpers -------------------------------------------------------------------

    _forgot: dict[tuple[str, str], int] | None = None

    def _forgotten_keys(self, s: Session) -> dict[tuple[str, str], int]:
        if self._forgot is None:
            out: dict[tuple[str, str], int] = {}
            for r in s.exec(select(ForgetRecord).where(ForgetRecord.namespace == self.namespace)).all():
                out[(r.kind, r.key)] = max(out.get((r.kind, r.key), -1), r.through_seq)
            self._forgot = out
        return self._forgot

    def _get(self, s: Session, fact_id: int) -> Fact:
        row = s.get(Fact, fact_id)
        if row is None or row.namespace != self.namespace:
            raise ValueError(f"no fact with id {fact_id!r} in this namespace")
        return row

    def _chain(self, s: Session, row: Fact) -> list[Fact]:
        rows = s.exec(select(Fact).where(Fact.namespace == self.namespace, Fact.kind == row.kind, Fact.key == row.key)).all()
        return sorted(rows, key=lambda r: (r.source_seq, r.id or 0))

    def _index_fts(self, s: Session, fact: Fact) -> None:
        self.keywords.remove(s, [fact.id])
        self.keywords.add(s, [(fact.id, self.namespace, f"{fact.key} {fact.value}")])


def fact_keywords(engine: Engine) -> KeywordIndex:
    """The fact table's keyword index, over each fact's key and value (see :mod:`memos.text.search`)."""

    def documents(conn: Any) -> Any:
        return conn.execute(text("SELECT id, namespace, key || ' ' || value FROM memos_fact"))

    return KeywordIndex(engine, "memos_fact_kw", source="memos_fact", ref_column="id", doc_sql="key || ' ' || value",
                        documents=documents, replaces=("memos_fact_vocab", "memos_fact_fts"))
