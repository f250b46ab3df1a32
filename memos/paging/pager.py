"""The pager's policy, as pure functions over the hot tier's units.

Nothing here touches the store or an LLM: :class:`memos.Memory` calls these to decide,
then persists what they decided.

- :func:`find_cut_point` walks the hot tier from its oldest unit and decides which units a
  demotion moves out (``demote``: to the summary; ``pin``: to the pinned section) so the
  hot tier falls to a target, stopping at the first unit a guard keeps hot.
- :func:`find_soft_compactions` picks old tool results that were already used by a later
  message and can be replaced by a short placeholder.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from ..tiers.hot import Unit
from .guards import Guard, GuardContext, Verdict

__all__ = ["CutPoint", "find_cut_point", "find_soft_compactions"]


@dataclass(frozen=True)
class CutPoint:
    """The outcome of :func:`find_cut_point`.

    ``index`` is the number of units, from the oldest, that the walk passed; ``demote`` and
    ``pin`` are those that leave the hot tier, split by the guards' verdicts, and ``held``
    those among them that stay hot (``HOLD``); ``hot_tokens`` is the hot tier's size after
    the cut; ``stopped_by`` says why the walk ended.
    """

    index: int
    demote: tuple[Unit, ...]
    pin: tuple[Unit, ...]
    hot_tokens: int
    stopped_by: str
    held: tuple[Unit, ...] = ()

    @property
    def empty(self) -> bool:
        """Whether the cut moves nothing."""
        return not self.demote and not self.pin

    @property
    def ids(self) -> set[str]:
        """Ids of the messages that leave the hot tier."""
        return {m.id for u in self.demote + self.pin for m in u.messages}


def find_cut_point(
    units: Sequence[Unit],
    *,
    target_tokens: int,
    guard: Guard,
    unit_tokens: Callable[[Unit], int] = lambda u: u.tokens,
    known: Callable[[str], bool] | None = None,
    hold_limit: int | None = None,
) -> CutPoint:
    """Choose how many of the oldest units leave the hot tier.

    Walk forward from the oldest unit while the hot tier is above ``target_tokens``. A
    unit the guard answers ``EVICT`` is demoted, ``PIN`` moves to the pinned section,
    ``HOLD`` stays hot while the walk goes on past it (until the held units would pass
    ``hold_limit`` tokens: then it is demoted), ``KEEP`` ends the walk: the cut never passes it. Units are never split, so a tool
    call never leaves without its results. ``known`` is handed to the guards (see
    :class:`~memos.paging.guards.GuardContext`).
    """
    sizes = [unit_tokens(u) for u in units]
    hot = sum(sizes)
    demote: list[Unit] = []
    pin: list[Unit] = []
    held: list[Unit] = []
    held_tokens = 0
    index = 0
    stopped_by = "target reached"
    for i, unit in enumerate(units):
        if hot <= target_tokens:
            break
        verdict = guard(unit, GuardContext(units, i) if known is None else GuardContext(units, i, known))
        if verdict is Verdict.KEEP:
            stopped_by = "kept by a guard"
            break
        index = i + 1
        if verdict is Verdict.HOLD and (hold_limit is None or held_tokens + sizes[i] <= hold_limit):
            held.append(unit)
            held_tokens += sizes[i]
            continue
        (pin if verdict is Verdict.PIN else demote).append(unit)
        hot -= sizes[i]
    else:
        if hot > target_tokens:
            stopped_by = "hot tier exhausted"
    return CutPoint(index, tuple(demote), tuple(pin), hot, stopped_by, tuple(held))


def find_soft_compactions(
    units: Sequence[Unit],
    *,
    tokens_to_free: int,
    keep_recent_units: int,
    already: Collection[str],
    saving: Callable[[str], int],
    protected: Callable[[int], bool] = lambda index: False,
) -> list[str]:
    """Ids of old tool results to replace with placeholders, oldest first.

    A tool result qualifies when its chain is answered, a later unit exists (the model
    has seen and used it), it is not among the newest ``keep_recent_units`` units, it is
    not compacted yet, its unit is not ``protected(index)`` (a result the assistant is still
    acting on), and its placeholder is smaller (``saving(id) > 0``). Stops once
    ``tokens_to_free`` tokens are saved.
    """
    chosen: list[str] = []
    freed = 0
    last = len(units) - keep_recent_units
    for index, unit in enumerate(units[: max(0, last)]):
        if freed >= tokens_to_free:
            break
        if unit.in_flight or not unit.is_tool_chain or protected(index):
            continue
        for m in unit.messages[1:]:
            if m.id in already:
                continue
            gain = saving(m.id)
            if gain > 0:
                chosen.append(m.id)
                freed += gain
    return chosen
