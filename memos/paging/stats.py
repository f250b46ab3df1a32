""":class:`MemoryStats`: the sizes of one session's tiers and its paging counts, at a moment."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ..tiers.archival import ArchivalTier
from ..tiers.cold import ColdTier
from ..tiers.hot import group_units
from .assembly import ContextAssembler, Rooms
from .request import Request

__all__ = ["ArchiveCounts", "MemoryStats", "archive_counts", "measure"]


@dataclass(frozen=True)
class MemoryStats:
    """Sizes of the tiers and counts of paging events, at the moment of the call.

    ``context_tokens`` is the prompt paging keeps under ``budget_tokens``: the sections and
    the hot tier, without the recalled-memory section and without a query, which fill the
    room left when :meth:`~memos.Memory.context` builds a prompt. ``demotions`` counts the
    demotions that wrote a summary version: one that moved only pinned messages, or nothing but
    calls to memos' own tools and their results, leaves the summary as it was."""

    messages: int
    hot_messages: int
    hot_tokens: int
    pinned_messages: int
    pinned_tokens: int
    summary_tokens: int
    summary_version: int
    facts: int
    pinned_facts: int
    demotions: int
    soft_compactions: int
    context_tokens: int
    budget_tokens: int
    encoding: str


def measure(assembler: ContextAssembler, req: Request, cold: ColdTier) -> MemoryStats:
    """The stats of the session ``assembler`` builds prompts for, with requests like ``req``."""
    a, s = assembler, assembler.state
    facts = cold.facts()
    return MemoryStats(
        messages=s.count,
        hot_messages=len(s.hot),
        hot_tokens=sum(a.unit_tokens(req, u) for u in group_units(s.hot)),
        pinned_messages=len(s.pinned),
        pinned_tokens=a.pinned_section(req)[1],
        summary_tokens=a.summary_section(req, None, None)[1],
        summary_version=s.summary.version if s.summary else 0,
        facts=len(facts),
        pinned_facts=sum(1 for f in facts if f.pinned),
        demotions=s.demotions,
        soft_compactions=s.soft_compactions,
        context_tokens=a.total(req, 0, None, Rooms()),
        budget_tokens=a.settings.budget_tokens,
        encoding=a.counter.encoding_name,
    )


class ArchiveCounts(NamedTuple):
    """The archive of a session's scope: items archived, and those whose vectors are not
    written yet (dense search does not see them; keyword search does)."""

    items: int
    vectors_pending: int


def archive_counts(archival: ArchivalTier) -> ArchiveCounts:
    """The counts of ``archival`` now."""
    return ArchiveCounts(archival.count(), archival.pending())
