"""Guard rules: small strategies the pager consults before it moves a unit out of the hot tier.

A guard is called with a unit and a :class:`GuardContext` and answers a :class:`Verdict`:

- ``EVICT``: the unit may be demoted (summarised, and later archived),
- ``HOLD``: the unit stays hot for now, but the cut may pass it and take newer units,
- ``PIN``: the unit may leave the hot tier but must stay visible in every context,
- ``KEEP``: the unit stays hot, and the cut point may not pass it.

Guards compose like tenacity's strategies: ``a & b`` takes the stricter verdict of the
two, ``a | b`` the more lenient. Plain callables with the same signature work too.
"""

from __future__ import annotations

import functools
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum

from ..core.messages import as_roles
from ..text.classifiers.detector import default_detector
from ..text.classifiers.rules import stated_rules
from ..text.patterns import fold, references
from ..text.script import simplified
from ..text.sentences import split_sentences
from ..tiers.hot import Unit

__all__ = [
    "ALLOW_ALL",
    "AllOf",
    "AnyOf",
    "ConstraintGuard",
    "GuardContext",
    "Guard",
    "PinGuard",
    "RecencyGuard",
    "ReferenceGuard",
    "ToolChainGuard",
    "Verdict",
    "as_guard",
    "default_guard",
    "extract_constraints",
    "is_constraint",
    "is_promise",
    "split_sentences",
]


class Verdict(IntEnum):
    """What a guard allows for a unit; a larger value is stricter."""

    EVICT = 0
    HOLD = 1
    PIN = 2
    KEEP = 3


def _nothing_known(text: str) -> bool:
    return False


@dataclass(frozen=True)
class GuardContext:
    """Where the unit stands: ``units`` is the whole hot tier, oldest first.

    ``known(text)`` says whether the cold tier already holds ``text`` as a fact (so a
    constraint stated in it is kept there and its message need not be pinned).
    """

    units: Sequence[Unit]
    index: int
    known: Callable[[str], bool] = _nothing_known


GuardFn = Callable[[Unit, GuardContext], Verdict]


class Guard(ABC):
    """Base class of guard rules; subclasses implement ``__call__``."""

    @abstractmethod
    def __call__(self, unit: Unit, ctx: GuardContext) -> Verdict:
        """The verdict for ``unit``."""

    def __and__(self, other: Guard | GuardFn) -> AllOf:
        return AllOf(self, as_guard(other))

    def __or__(self, other: Guard | GuardFn) -> AnyOf:
        return AnyOf(self, as_guard(other))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class AllOf(Guard):
    """The strictest verdict of its guards (``a & b``)."""

    def __init__(self, *guards: Guard | GuardFn) -> None:
        self.guards = tuple(as_guard(g) for g in guards)

    def __call__(self, unit: Unit, ctx: GuardContext) -> Verdict:
        verdict = Verdict.EVICT
        for g in self.guards:
            verdict = max(verdict, Verdict(g(unit, ctx)))
            if verdict is Verdict.KEEP:
                break
        return verdict

    def __repr__(self) -> str:
        return " & ".join(repr(g) for g in self.guards)


class AnyOf(Guard):
    """The most lenient verdict of its guards (``a | b``)."""

    def __init__(self, *guards: Guard | GuardFn) -> None:
        self.guards = tuple(as_guard(g) for g in guards)

    def __call__(self, unit: Unit, ctx: GuardContext) -> Verdict:
        return min((Verdict(g(unit, ctx)) for g in self.guards), default=Verdict.EVICT)

    def __repr__(self) -> str:
        return "(" + " | ".join(repr(g) for g in self.guards) + ")"


class _FunctionGuard(Guard):
    def __init__(self, fn: GuardFn) -> None:
        self.fn = fn

    def __call__(self, unit: Unit, ctx: GuardContext) -> Verdict:
        return Verdict(self.fn(unit, ctx))

    def __repr__(self) -> str:
        return getattr(self.fn, "__name__", repr(self.fn))


class _AllowAll(Guard):
    def __call__(self, unit: Unit, ctx: GuardContext) -> Verdict:
        return Verdict.EVICT

    def __repr__(self) -> str:
        return "ALLOW_ALL"


ALLOW_ALL: Guard = _AllowAll()
"""A guard that lets every unit go (the neutral element of ``&``)."""


def as_guard(obj: Guard | GuardFn) -> Guard:
    """``obj`` as a :class:`Guard` (plain callables are wrapped)."""
    if isinstance(obj, Guard):
        return obj
    if callable(obj):
        return _FunctionGuard(obj)
    raise TypeError(f"a guard must be a Guard or a callable(unit, ctx) -> Verdict, got {type(obj).__name__}")


class ToolChainGuard(Guard):
    """A tool chain whose calls are not all answered is in flight: it stays hot."""

    def __call__(self, unit: Unit, ctx: GuardContext) -> Verdict:
        return Verdict.KEEP if unit.in_flight else Verdict.EVICT


# the assistant's own open commitments: "I'll book the 9:40 one once you confirm", "我会在你确认后预订"
_PROMISE = re.compile(r"\b(?:i'll|i will|shall i|once you|when you confirm|as soon as you|if you confirm)\b"
                      r"|我会|我来|等你确认|你确认后|确认之后", re.IGNORECASE)


class ReferenceGuard(Guard):
    """What the assistant referred to in its last ``turns`` messages is held hot (``HOLD``:
    newer units may still be demoted around it): a unit holding
    an identifier or a time the assistant quoted since (a tool result it is acting on), and an
    assistant message among those turns that makes a promise ("I'll book the 9:40 one once you
    confirm"). A reference is held where it was first said and in the last tool result or
    user message that said it before those turns; the echoes between may go (an amount
    repeated in every answer does not hold them all). When the budget cannot be met
    otherwise the pager lets it go, and the
    identifiers it held are carried into the summary or the facts (the identifier net)."""

    def __init__(self, turns: int = 3) -> None:
        if turns < 1:
            raise ValueError("ReferenceGuard needs turns >= 1")
        self.turns = turns

    def __call__(self, unit: Unit, ctx: GuardContext) -> Verdict:
        recent: list[tuple[int, str]] = []  # the assistant's last turns after this unit: (unit index, text)
        for j in range(len(ctx.units) - 1, ctx.index, -1):
            recent += [(j, m.text_and_calls) for m in reversed(ctx.units[j].messages) if m.role == "assistant"]
            if len(recent) >= self.turns:
                break
        if len(recent) < self.turns and any(m.role == "assistant" and is_promise(m.text) for m in unit.messages):
            return Verdict.HOLD
        recent = recent[: self.turns]
        if not recent:
            return Verdict.EVICT
        quoted: set[str] = set()
        for _, text in recent:
            quoted |= references(text)
        body = _body(unit)
        held = [q for q in quoted if q in body]
        if not held:
            return Verdict.EVICT
        # where a reference is held: the first unit that said it, and the last tool result or
        # user message before the assistant's turns that did (an echo in between may go)
        if _unsaid(held, ctx.units[: ctx.index]):
            return Verdict.HOLD
        if all(m.role == "assistant" for m in unit.messages):
            return Verdict.EVICT
        quoting = {j for j, _ in recent}
        sources = [u for j, u in enumerate(ctx.units[ctx.index + 1 : max(quoting)], ctx.index + 1)
                   if j not in quoting and any(m.role != "assistant" for m in u.messages)]
        return Verdict.HOLD if _unsaid(held, sources) else Verdict.EVICT

    def __repr__(self) -> str:
        return f"ReferenceGuard({self.turns})"


def _body(unit: Unit) -> str:
    """A unit's text and tool calls, folded as :func:`references` folds identifiers."""
    return fold(" ".join(m.text_and_calls for m in unit.messages))


def _unsaid(refs: list[str], units: Sequence[Unit]) -> bool:
    """Whether one of ``refs`` is in none of ``units``."""
    return any(not any(q in _body(u) for u in units) for q in refs)


@functools.lru_cache(maxsize=4096)  # the reference guard asks again of the same messages at every paging
def is_promise(text: str) -> bool:
    """Whether an assistant message commits to something still to be done."""
    return bool(_PROMISE.search(simplified(text)))


class RecencyGuard(Guard):
    """The newest ``units`` units stay hot."""

    def __init__(self, units: int = 2) -> None:
        if units < 1:
            raise ValueError("RecencyGuard needs units >= 1")
        self.units = units

    def __call__(self, unit: Unit, ctx: GuardContext) -> Verdict:
        return Verdict.KEEP if ctx.index >= len(ctx.units) - self.units else Verdict.EVICT

    def __repr__(self) -> str:
        return f"RecencyGuard({self.units})"


class PinGuard(Guard):
    """A unit holding a message pinned with :meth:`memos.Memory.pin` is pinned."""

    def __call__(self, unit: Unit, ctx: GuardContext) -> Verdict:
        return Verdict.PIN if any(m.pinned for m in unit.messages) else Verdict.EVICT


def extract_constraints(text: str) -> list[str]:
    """The sentences of ``text`` that state rules the user sets (constraints or preferences),
    in order, as the shipped classifier (:mod:`memos.text.classifiers.rules`) judges them; a fenced code
    block states none."""
    return [j.sentence for j in stated_rules(default_detector(), text)]


def is_constraint(sentence: str) -> bool:
    """Whether one sentence states a rule the user sets (see :func:`extract_constraints`)."""
    return bool(extract_constraints(sentence))


class ConstraintGuard(Guard):
    """A unit with a user message stating a constraint that the cold tier does not
    already hold as a fact is pinned.

    ``detector`` maps a message text to its constraint sentences; by default
    :func:`extract_constraints`, the shipped classifier (English and Chinese). ``roles``: the
    roles whose messages are read (a role or roles; ``ValueError`` for one that is not a role).
    """

    def __init__(self, detector: Callable[[str], list[str]] = extract_constraints,
                 roles: str | Sequence[str] = ("user",)) -> None:
        self.detector = detector
        self.roles = as_roles(roles)

    def __call__(self, unit: Unit, ctx: GuardContext) -> Verdict:
        for m in unit.messages:
            if m.role in self.roles and any(not ctx.known(c) for c in self.detector(m.text)):
                return Verdict.PIN
        return Verdict.EVICT


def default_guard(keep_recent_units: int = 2, reference_turns: int = 3) -> Guard:
    """The guard memos uses unless given another: tool chains, pins, constraints, recency,
    and what the assistant referred to in its last turns."""
    return (ToolChainGuard() & RecencyGuard(keep_recent_units) & PinGuard() & ConstraintGuard()
            & ReferenceGuard(reference_turns))
