"""The cold tier: structured facts in a SQLModel table, with history.

A fact is a kind (constraint, preference, identifier, task_state, decision,
failed_attempt, fact), a key and a value, with the messages it came from. Facts are
never overwritten: an UPDATE closes the current row (``valid_to``, ``superseded_by``)
and adds a new one, INVALIDATE closes a row the user revoked, NOOP leaves a fact that
is already known alone. :meth:`ColdTier.forget` deletes a fact on request and records
that it did.

The fact model (kinds, keys, the ADD/UPDATE/INVALIDATE/NOOP rule) is in
:mod:`memos.storage.facts`; keyword search is :mod:`memos.text.search`'s.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import case, event, text
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, func, select

from ..storage.facts import (
    CHANGES,
    CORRECTION_WINDOW,
    FACT_KINDS,
    RULE_KINDS,
    SLOT_KINDS,
    Fact,
    FactBase,
    FactCandidate,
    FactChange,
    FactOp,
    ForgetRecord,
    Invalidation,
    _digest,
    changed_rule,
    decide,
    fact_key,
    fact_log,
    key_family,
    normalize,
    rule_said,
    rule_statement,
)
from ..text.classifiers.replacements import (
    ReplacementClassifier,
    changes_quantity,
    default_replacement_classifier,
    new_terms,
    no_change_reason,
    quantities,
)
from ..text.patterns import value_kind
from ..text.search import KeywordIndex
from ..text.sentences import split_sentences
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
    "fact_keywords",
    "fact_log",
    "key_family",
    "normalize",
]

@dataclass
class _Index:
    """Normalised values of every fact ever seen (any status) and of forgotten ones."""

    values: set[str] = field(default_factory=set)
    keys: set[str] = field(default_factory=set)


class ColdTier:
    """The facts of one namespace."""

    def __init__(self, engine: Engine, namespace: str, *, replacements: ReplacementClassifier | None = None) -> None:
        """``replacements`` decides which earlier rule a new one replaces (default: the shipped
        classifier, :mod:`memos.text.classifiers.replacements`)."""
        self.engine = engine
        self.namespace = namespace
        self.replacements = replacements
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
        candidates = list(candidates)
        for inv in invalidations:
            lifted = self._invalidate_matching(session, inv, now)
            changes.extend(lifted)
            # a sentence that also states a rule sets it when it lifted none, when it says what
            # holds instead, or when it reads more surely as a rule than as a revocation: a rule
            # taken for a revocation ("I'm not comfortable with pets that can jump on
            # furniture.") is not lost
            if inv.otherwise is not None and (not lifted or inv.holds_instead
                                              or inv.otherwise.confidence > inv.confidence
                                              or any(self._replaces(ch.fact.key, inv.otherwise.key)
                                                     and new_terms(ch.fact.key, inv.otherwise.key) for ch in lifted)):
                rule = inv.otherwise
                candidates.append(rule if rule.source_time else replace(rule, source_time=inv.source_time))
            elif inv.otherwise is None:
                candidates.extend(self._given_anew(inv, lifted))
        for cand in candidates:
            revised = None
            if cand.revises:
                revised = self._revised(session, cand, now)
                if revised is None:
                    continue
                cand = replace(cand, kind=revised.kind, pinned=revised.pinned, revises=False,
                               value=changed_rule(cand.value, revised.value))
            corrected = self._corrected(session, cand) if cand.corrects else None
            keyed = corrected is not None and (corrected.kind == "fact" or corrected.key == "address")
            if keyed and corrected is not None:  # filed under its key; an identifier's key is its bare value
                cand = replace(cand, kind=corrected.kind, key=corrected.key, single=True, once=False,
                               value=cand.key if cand.kind == "identifier" else cand.value)
            gone = max(forgotten.get((cand.kind, cand.key), -2), forgotten.get((cand.kind, _digest(cand.key)), -2))
            if gone >= cand.source_seq:
                continue
            change = self._apply_one(session, cand, now)
            changes.append(change)
            if revised is not None and change.op is FactOp.ADD and change.fact.status == "current":
                changes.extend(self._supersede_rule(session, revised, change.fact))
            elif (change.op is FactOp.ADD and change.fact.status == "current" and change.fact.kind in RULE_KINDS
                    and change.fact.origin != "explicit"):
                changes.extend(self._replaced(session, change.fact))
            if corrected is not None and not keyed and corrected.id != change.fact.id:  # a bare identifier
                changes.append(self._supersede(session, corrected, change.fact))
            if change.op is FactOp.UPDATE and change.previous is not None and change.fact.kind in SLOT_KINDS:
                # a slot's old value only: a task state's update (every tool call) needs no lookup
                changes.extend(self._retire_identifier(session, change.previous.value, change.fact))
        session.flush()
        written = [ch.fact for ch in changes if ch.op is not FactOp.NOOP]
        self._index_fts(session, written)
        if written:
            # the caches learn the new values once the transaction commits, and are rebuilt if it fails
            learned = [(form, f.key) for f in written for form in _known_forms(f.kind, f.value)]
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
            "confidence": cand.confidence, "pinned": cand.pinned, "created_at": now,
            "valid_from": cand.source_time if 0 < cand.source_time <= now else now,
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
            self._supersede(s, row, fact)
        return FactChange(op, fact, row)

    def _replaces(self, old: str, new: str) -> bool:
        return (self.replacements or default_replacement_classifier()).replaces(old, new)

    def _replaced(self, s: Session, rule: Fact) -> list[FactChange]:
        """The earlier rule a rule just added replaces ("From now on, reply in Spanish." and
        "Always reply in English."), superseded by it: of the current rules set before it that
        the replacement classifier takes for replaced, the one it scores highest, with the
        identifiers read from it. A rule pinned with ``pin()`` is the application's, and stays."""
        old = self._replaceable(s, rule.key, rule.valid_from, rule.source_ids, rule.id)
        return [] if old is None else self._supersede_rule(s, old, rule)

    def _revised(self, s: Session, cand: FactCandidate, now: float) -> Fact | None:
        """The rule in force a sentence that is no rule by itself changes ("Change the budget
        to $250."), if the replacement classifier takes it for replaced."""
        when = cand.source_time if 0 < cand.source_time <= now else now
        return self._replaceable(s, cand.key, when, json.dumps(list(cand.source_ids)), None, revision=True)

    def _replaceable(self, s: Session, key: str, when: float, source_ids: str, rule_id: int | None, *,
                     revision: bool = False) -> Fact | None:
        """Of the current rules set at or before ``when``, by other messages and not with
        ``pin()``, the one the replacement classifier takes the rule keyed ``key`` for replacing
        (with ``revision``, ``key`` states no rule by itself: for changing), its highest score;
        ``None`` when there is none."""
        clf = self.replacements or default_replacement_classifier()
        rows = s.exec(select(Fact).where(Fact.namespace == self.namespace, Fact.status == "current",
                                         col(Fact.kind).in_(RULE_KINDS), Fact.key != key)).all()
        # judged on the keys, the sentences that state the rules (a short message's rules each
        # hold the whole message); rules of one message hold together
        judge = clf.revises if revision else clf.replaces
        found = []
        for r in rows:
            if r.id == rule_id or r.origin == "explicit" or r.valid_from > when or r.source_ids == source_ids:
                continue
            # a rule set by a change is judged as the change and as the rule first stated ("Make
            # the hotel budget $200." after "Change the budget to $220." for "My hotel budget is …")
            olds = [r.key] + ([fact_key(r.kind, rule_statement(r.value))] if CHANGES in r.value else [])
            scores = [clf.score(old, key) for old in olds if judge(old, key)]
            if scores:
                found.append((max(scores), r))
        return max(found, key=lambda f: (f[0], f[1].id or 0))[1] if found else None

    @staticmethod
    def _given_anew(inv: Invalidation, lifted: Sequence[FactChange]) -> list[FactCandidate]:
        """The rule a revocation sets when it gives the rule it lifted a new quantity ("You can
        go up to 200 words now." after "Keep my replies under 100 words."; "打车现在可以到80块了。"):
        the rule with the new quantity, as a change of it (:func:`changed_rule`). A question,
        someone else's setting or this one time sets none; tense is not asked, since a
        revocation speaks of the present (the 了 of "可以…了" marks a new state)."""
        body = " ".join(inv.text.split())
        if no_change_reason(body) not in (None, "past"):
            return []
        for ch in lifted:
            old = ch.fact
            if old.kind in RULE_KINDS and changes_quantity(rule_said(old.value), body):
                return [FactCandidate(old.kind, fact_key(old.kind, body), changed_rule(body, old.value), inv.source_ids,
                                      inv.source_seq, confidence=inv.confidence, pinned=old.pinned, origin=old.origin,
                                      source_time=inv.source_time)]
        return []

    def _supersede_rule(self, s: Session, old: Fact, rule: Fact) -> list[FactChange]:
        """``old`` superseded by ``rule``, with what was read from it: the identifiers ("90
        euros"), and the facts of its message that hold a quantity ``rule`` gives anew ("taxi
        budget: 60 euros a ride" after "Set my taxi budget to 70 euros a ride."): no current
        row gives the old value."""
        stale = list(s.exec(select(Fact).where(Fact.namespace == self.namespace, Fact.kind == "identifier",
                                               Fact.status == "current", Fact.value == old.value)).all())
        changed = quantities(rule_said(old.value)) - quantities(rule_said(rule.value))
        if changed:
            facts = s.exec(select(Fact).where(Fact.namespace == self.namespace, Fact.kind == "fact",
                                              Fact.status == "current", Fact.source_ids == old.source_ids)).all()
            stale += [row for row in facts if quantities(row.value) & changed]
        return [self._supersede(s, row, rule) for row in (old, *stale)]

    def _corrected(self, s: Session, cand: FactCandidate) -> Fact | None:
        """The current value a keyless correction replaces: the newest one of its kind (a phone
        number, an email) stated in the last :data:`CORRECTION_WINDOW` messages before it; of
        one message, its keyed fact rather than the bare identifier. The window is counted in
        time from its first message when the candidate says when that was, else in seq numbers."""
        window = ((Fact.valid_from >= cand.window_from,) if cand.window_from > 0 else
                  (Fact.source_seq >= cand.source_seq - CORRECTION_WINDOW, Fact.source_seq <= cand.source_seq))
        rows = s.exec(select(Fact).where(
            Fact.namespace == self.namespace, Fact.status == "current", col(Fact.kind).in_(SLOT_KINDS), *window)).all()
        new = normalize(cand.key if cand.kind == "identifier" else cand.value)  # an identifier's key is its value
        found = [r for r in rows
                 if value_kind(r.value if r.kind == "fact" else r.key) == cand.corrects
                 and new not in (normalize(r.value), normalize(r.key))
                 and (cand.source_time <= 0 or r.valid_from <= cand.source_time)]
        if cand.source_time > 0:
            return max(found, key=lambda r: (r.valid_from, r.source_seq, r.kind == "fact", r.id or 0), default=None)
        return max(found, key=lambda r: (r.source_seq, r.kind == "fact", r.id or 0), default=None)

    def _supersede(self, s: Session, row: Fact, by: Fact) -> FactChange:
        row.status = "superseded"
        row.valid_to = by.valid_from
        row.superseded_by = by.id
        s.add(row)
        return FactChange(FactOp.UPDATE, by, row)

    def _retire_identifier(self, s: Session, old_value: str, by: Fact) -> list[FactChange]:
        """A slot's old value seen as an identifier ("identifier +351 912 345 678: My phone
        number is …") is superseded with the slot, so no current row still gives it."""
        rows = s.exec(select(Fact).where(Fact.namespace == self.namespace, Fact.kind == "identifier",
                                         Fact.key == old_value.strip(), Fact.status == "current")).all()
        return [self._supersede(s, row, by) for row in rows if row.id != by.id]

    def _invalidate_matching(self, s: Session, inv: Invalidation, now: float) -> list[FactChange]:
        if inv.fact_id is not None:
            row = s.get(Fact, inv.fact_id)
            if row is None or row.namespace != self.namespace or row.status != "current":
                return []
            row.status = "invalidated"
            row.valid_to = now
            s.add(row)
            return [FactChange(FactOp.INVALIDATE, row)]
        if not content_terms(inv.text):
            return []
        rows = s.exec(
            select(Fact).where(Fact.namespace == self.namespace, Fact.status == "current",
                               col(Fact.kind).in_(("constraint", "preference")))
        ).all()
        candidates = []
        for row in rows:
            # a rule stated after the revocation stays (in time when it is known: seq numbers
            # start over in each session)
            if inv.source_time > 0 and row.valid_from > inv.source_time:
                continue
            if inv.source_time <= 0 and row.source_seq > inv.source_seq >= 0:
                continue
            if inv.otherwise is not None and row.key == inv.otherwise.key:
                continue  # the rule said again, not lifted by itself
            candidates.append(row)
        out = []
        for i in inv.lifted([row.value for row in candidates]):
            row = candidates[i]
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
                for kind, key, value in s.exec(select(Fact.kind, Fact.key, Fact.value)
                                               .where(Fact.namespace == self.namespace)).all():
                    idx.values.update(_known_forms(kind, value))
                    idx.keys.add(key)
                q = select(ForgetRecord.value_sha256).where(ForgetRecord.namespace == self.namespace)
                self._forgotten = set(s.exec(q).all())
            self._known = idx
        return self._known

    def knows(self, value: str) -> bool:
        """Whether a value was ever a fact here (any status, or forgotten), or a sentence of a
        rule's (a rule stored with the message it was said in: "Hi! I'm Ana. I'm vegetarian.")."""
        n = normalize(value)
        return n in self._index().values or hashlib.sha256(n.encode()).hexdigest() in self._forgotten

    def has_key(self, key: str) -> bool:
        """Whether any fact here (any status) has this key."""
        return key in self._index().keys

    def superseded_values(self, *, max_chars: int = 120, limit: int = 200) -> list[str]:
        """Values that were replaced by newer ones (the newest ``limit``, each at most
        ``max_chars``): a fact's value, an identifier's bare value (its key; its value is the
        sentence it was said in)."""
        value = case((col(Fact.kind) == "identifier", col(Fact.key)), else_=col(Fact.value))
        with Session(self.engine, expire_on_commit=False) as s:
            q = (select(value).where(Fact.namespace == self.namespace, Fact.status == "superseded",
                                     func.length(value) <= max_chars)
                 .order_by(col(Fact.id).desc()).limit(limit))
            return list(dict.fromkeys(s.exec(q).all()))[::-1]

    def lifted_values(self, *, max_chars: int = 300, limit: int = 200) -> list[str]:
        """Rules (constraints and preferences) the user lifted and has not set again (the
        newest ``limit``, each at most ``max_chars``)."""
        rules = col(Fact.kind).in_(("constraint", "preference"))
        with Session(self.engine, expire_on_commit=False) as s:
            current = set(s.exec(select(Fact.key).where(Fact.namespace == self.namespace, Fact.status == "current",
                                                        rules)).all())
            rows = s.exec(select(Fact.key, Fact.value).where(
                Fact.namespace == self.namespace, Fact.status == "invalidated", rules,
                func.length(Fact.value) <= max_chars).order_by(col(Fact.id).desc()).limit(limit)).all()
        return list(dict.fromkeys(value for key, value in rows if key not in current))[::-1]

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

    def _index_fts(self, s: Session, facts: Sequence[Fact]) -> None:
        self.keywords.remove(s, [f.id for f in facts])
        self.keywords.add(s, [(f.id, self.namespace, f"{f.key} {f.value}") for f in facts])


def _known_forms(kind: str, value: str) -> set[str]:
    """The forms :meth:`ColdTier.knows` knows a fact by: its value, normalised, and for a rule
    each of its sentences too. A rule stored with the message it was said in is known by the
    sentence that states it, so that sentence is not pinned again from the message once the
    rule is lifted or replaced."""
    forms = {normalize(value)}
    if kind in RULE_KINDS:
        forms.update(normalize(sentence) for sentence in split_sentences(value))
    return forms


def fact_keywords(engine: Engine) -> KeywordIndex:
    """The fact table's keyword index, over each fact's key and value (see :mod:`memos.text.search`)."""

    def documents(conn: Any) -> Any:
        return conn.execute(text("SELECT id, namespace, key || ' ' || value FROM memos_fact"))

    return KeywordIndex(engine, "memos_fact_kw", source="memos_fact", ref_column="id", doc_sql="key || ' ' || value",
                        documents=documents, replaces=("memos_fact_vocab", "memos_fact_fts"))
