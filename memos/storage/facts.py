"""The fact model: what a fact is, how candidates are keyed, and what applying one does.

A :class:`Fact` row has a kind, a key and a value, with its history (``current``,
``superseded``, ``invalidated``); :class:`FactCandidate` is what an extractor proposes,
:func:`fact_key` gives rules and slots one key whatever wording or kind, and :func:`decide`
says whether a candidate adds, updates, invalidates or changes nothing. The cold tier
(:mod:`memos.tiers.cold`) stores and searches them.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from sqlalchemy import Index
from sqlmodel import Field

from ..text.terms import content_terms
from .log import MemosModel

FACT_KINDS = ("constraint", "preference", "identifier", "task_state", "decision", "failed_attempt", "fact")
# Kinds that share keys: a rule is one rule whether it was judged a constraint or a preference,
# and a single-valued slot ("address") is one slot whether a rule called it a fact or an identifier.
RULE_KINDS = ("constraint", "preference")
SLOT_KINDS = ("fact", "identifier")
# How far back, in messages, a correction that names no key looks for the value it corrects.
CORRECTION_WINDOW = 20
# A rule set by a sentence that changes another ("Change the budget to $250.") is stored as
# that sentence, then this, then the rule it changed and ")": the change alone does not say
# what the budget is for.
CHANGES = " (changing the rule: "


def changed_rule(change: str, old: str) -> str:
    """The value of the rule set by ``change``, a sentence that changes the rule stored as
    ``old``: the change, then the rule first stated (:func:`rule_statement`)."""
    return f"{change}{CHANGES}{rule_statement(old)})"


def rule_said(value: str) -> str:
    """What the user said of a stored rule: the change alone, for a rule set by changing
    another (:func:`changed_rule`)."""
    i = value.find(CHANGES)
    return value[:i] if i >= 0 else value


def rule_statement(value: str) -> str:
    """The rule a stored rule first stated: a rule set by changing another holds the one it
    changed (:data:`CHANGES`), and a change of a change names that first one."""
    i = value.find(CHANGES)
    return value[i + len(CHANGES):-1] if i >= 0 and value.endswith(")") else value


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
    ``corrects`` marks a correction, with the kind of value it gives ("phone", "email": see
    :func:`memos.text.patterns.value_kind`): it replaces the newest value of that kind stated in
    the last :data:`CORRECTION_WINDOW` messages, under that value's key when it has one (an
    identifier candidate's key is its bare value), superseding it when it is a bare
    identifier; when there is none, it is applied as it is.
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
    # Unix time of the newest source message (0: unknown). It orders values of one key across
    # sessions, where seq numbers start over; ``source_seq`` orders them when it is unknown.
    source_time: float = 0.0
    corrects: str = ""
    # Unix time of the first of the correction window's messages in the correction's own
    # session (0: unknown; the window is then counted in seq numbers, which start over in
    # each session, so a value from another session with a low seq would fall in it)
    window_from: float = 0.0
    # no rule by itself, the sentence may change one in force ("Change the budget to $250." after
    # "My hotel budget is at most $180 per night."): applied only when the cold tier finds the
    # rule it replaces, and then as a rule of that rule's kind
    revises: bool = False

    def __post_init__(self) -> None:
        if self.kind not in FACT_KINDS:
            raise ValueError(f"unknown fact kind {self.kind!r}; expected one of {FACT_KINDS}")
        if not self.key.strip() or not self.value.strip():
            raise ValueError("a fact needs a non-empty key and value")


@dataclass(frozen=True)
class Invalidation:
    """A statement revoking earlier facts ("I no longer …"); matched against current
    constraints and preferences by shared words (:meth:`lifts`)."""

    text: str
    source_ids: tuple[str, ...] = ()
    source_seq: int = -1
    # the exact fact to revoke, when the extractor knows it (an LLM given the fact ids)
    fact_id: int | None = None
    source_time: float = 0.0  # Unix time of the revoking message (0: unknown)
    # the rule the statement sets if it lifts none, or if it reads more surely as that rule
    # (its confidence) than as a revocation (this one's): a sentence can read as both
    # ("酒店一律要能免费取消的。", "hotels must all allow free cancellation")
    otherwise: FactCandidate | None = None
    confidence: float = 1.0  # how surely the statement lifts a rule (the revocation classifier's score)
    # the statement also says what holds instead ("报告不用表格了，直接写段落就行。"): it sets
    # ``otherwise`` whether or not it lifted a rule
    holds_instead: bool = False

    def lifts(self, value: str) -> bool:
        """Whether this statement names the rule ``value``: they share two content words (or
        Chinese character pairs), or half of the rule's; a hyphenated word's parts count
        ("Scrap the window-seat rule." names "Always get me a window seat.")."""
        words, rule = content_terms(self.text, parts=True), content_terms(value, parts=True)
        shared = words & rule
        return bool(rule) and (len(shared) >= 2 or len(shared) / len(rule) >= 0.5)

    def lifted(self, values: Sequence[str]) -> list[int]:
        """The indices of the rules among ``values`` this statement lifts: those it names
        (:meth:`lifts`); when it names none and does not read more surely as a rule of its
        own (``otherwise``), the one rule that shares the largest part of its words with it,
        if any and if no other shares as large a part ("我现在可以吃辣了。" and "我不吃辣。"
        share one character pair of three, and no other rule shares one)."""
        named = [i for i, v in enumerate(values) if self.lifts(v)]
        if named or (self.otherwise is not None and self.otherwise.confidence > self.confidence):
            return named
        words = content_terms(self.text, parts=True)
        parts = []
        for v in values:
            rule = content_terms(v, parts=True)
            parts.append(len(words & rule) / len(rule) if rule else 0.0)
        best = max(parts, default=0.0)
        return [parts.index(best)] if best > 0 and parts.count(best) == 1 else []


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


_SPACE = re.compile(r"\s+")
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
    if candidate.source_time > 0:  # in time: a later session's seq numbers start over
        newest = max(current, key=lambda r: r.valid_from)
        later = candidate.source_time >= newest.valid_from
    else:
        newest = max(current, key=lambda r: r.source_seq)
        later = candidate.source_seq >= newest.source_seq
    return (FactOp.UPDATE, newest) if later else (FactOp.ADD, newest)
