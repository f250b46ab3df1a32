"""Guard rules: small strategies the pager consults before it moves a unit out of the hot tier.

A guard is called with a unit and a :class:`GuardContext` and answers a :class:`Verdict`:

- ``EVICT``: the unit may be demoted (summarised, and later archived),
- ``PIN``: the unit may leave the hot tier but must stay visible in every context,
- ``KEEP``: the unit stays hot, and the cut point may not pass it.

Guards compose like tenacity's strategies: ``a & b`` takes the stricter verdict of the
two, ``a | b`` the more lenient. Plain callables with the same signature work too.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum

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
    "ToolChainGuard",
    "Verdict",
    "as_guard",
    "default_guard",
    "extract_constraints",
    "is_constraint",
    "split_sentences",
]


class Verdict(IntEnum):
    """What a guard allows for a unit; a larger value is stricter."""

    EVICT = 0
    PIN = 1
    KEEP = 2


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


_VERBS = (r"(?:eat|drink|book|schedule|call|phone|text|email|send|use|want|suggest|recommend|share my|tell anyone|"
          r"contact|fly|travel|buy|order|pay|reply|respond|answer in|write in|speak|mention|include|"
          r"drive|serve|cook|choose|sign|post|publish|delete|remove|cc|disclose|exceed|charge)")
# Rules a user sets, not sentiment: "never book ...", "don't call ...", "always reply ...",
# "you must ...", "no more than 3", "I'm allergic"; not "can't wait", "must have been", "I'll never forget".
_EN_CONSTRAINT = re.compile(
    rf"\b(?:never|don'?t|do not|doesn'?t|does not|won'?t|will not|mustn'?t|must not|cannot|can'?t|shouldn'?t|"
    rf"should not|not allowed to|always|only ever)\s+(?:\w+\s+)?{_VERBS}\b"
    rf"|\b(?:you|we|i|they|it)\s+must\b(?!\s*'?ve\b|\s+(?:really\s+)?(?:have|be|feel|look|sound|seem|mean|admit|know|love|enjoy|miss|make|add|remind|think)\b)"
    rf"|\b(?:at most|at least|no more than|not more than|no less than|up to|maximum of|minimum of)\s+[$€£¥]?\d"
    rf"|\bno more than\s+(?:one|two|three|four|five|six|seven|eight|nine|ten)\b"
    rf"|\b(?:i'?m|i am|is|are)\s+(?:allergic|intolerant)\b|\b(?:forbidden|under no circumstances|not allowed)\b"
    rf"|\b(?:please|i|we)\s+(?:\w+\s+)?avoid\b|\blimit(?:ed)? to\s+[$€£¥]?\d",
    re.IGNORECASE,
)
# "budget" constrains only when it comes with an amount: "my budget is $180", "budget of 200 euros".
_EN_BUDGET = re.compile(r"\bbudget\b[^.?!]*\d|\d[^.?!]*\bbudget\b", re.IGNORECASE)
_ZH_CONSTRAINT = re.compile(r"不要|别再|必须|只能|不超过|至少|最多|禁止|务必|不能|不可以|不允许|一定要|不吃|不喝|过敏|预算|千万")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])\s*|\n+")


def split_sentences(text: str) -> list[str]:
    """Split text into sentences (English and Chinese punctuation, and line breaks)."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def is_constraint(sentence: str) -> bool:
    """Whether a sentence states a constraint ("never …", "at most …", "不要 …", …).

    Questions are not constraints ("Can't you find another one?").
    """
    s = sentence.strip()
    if s.endswith(("?", "？")):
        return False
    return bool(_EN_CONSTRAINT.search(s) or _EN_BUDGET.search(s) or _ZH_CONSTRAINT.search(s))


def extract_constraints(text: str) -> list[str]:
    """The sentences of ``text`` that state constraints, in order."""
    return [s for s in split_sentences(text) if is_constraint(s)]


class ConstraintGuard(Guard):
    """A unit with a user message stating a constraint that the cold tier does not
    already hold as a fact is pinned.

    ``detector`` maps a message text to its constraint sentences; by default
    :func:`extract_constraints`, a rule-based detector for English and Chinese.
    """

    def __init__(self, detector: Callable[[str], list[str]] = extract_constraints, roles: Sequence[str] = ("user",)) -> None:
        self.detector = detector
        self.roles = tuple(roles)

    def __call__(self, unit: Unit, ctx: GuardContext) -> Verdict:
        for m in unit.messages:
            if m.role in self.roles and any(not ctx.known(c) for c in self.detector(m.text)):
                return Verdict.PIN
        return Verdict.EVICT


def default_guard(keep_recent_units: int = 2) -> Guard:
    """The guard memos uses unless given another: tool chains, pins, constraints, recency."""
    return ToolChainGuard() & RecencyGuard(keep_recent_units) & PinGuard() & ConstraintGuard()
