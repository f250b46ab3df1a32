"""The :class:`Memory` facade: one session's memory, from the log to the prompt.

Data flows one way: :meth:`Memory.add` validates and logs messages, they join the hot
tier, and the pager (soft compaction, demotion) moves what no longer fits down to the
pinned section and the rolling summary; :meth:`Memory.context` assembles the prompt.
"""

from __future__ import annotations

import copy
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .config import MemosSettings
from .errors import BudgetExceeded
from .messages import Message, validate_batch
from .paging.context import assemble, pinned_message, summary_message
from .paging.guards import (
    ConstraintGuard,
    Guard,
    GuardFn,
    PinGuard,
    RecencyGuard,
    ToolChainGuard,
    as_guard,
    extract_constraints,
)
from .paging.pager import find_cut_point, find_soft_compactions
from .store import Demotion, Store, SummaryRow, validate_namespace
from .tiers.hot import Unit, group_units, placeholder, render_text, tool_names
from .tiers.warm import ExtractiveSummarizer, Summarizer, fit_summary, prepare_summary
from .tokens import REPLY_PRIMING, TokenCounter, default_counter

__all__ = ["Memory", "MemoryStats", "PagingEvent"]

_SYSTEM_ROLES = ("system", "developer")
_MIN_CLIP_TOKENS = 48


@dataclass(frozen=True)
class PagingEvent:
    """A soft compaction (``kind='soft'``) or a demotion (``kind='hard'``), as it happened."""

    kind: str
    tokens_before: int
    tokens_after: int
    messages: int
    pinned: int
    summary_version: int | None
    summarizer: str
    duration_ms: float


@dataclass(frozen=True)
class MemoryStats:
    """Sizes of the tiers and counts of paging events, at the moment of the call."""

    messages: int
    hot_messages: int
    hot_tokens: int
    pinned_messages: int
    pinned_tokens: int
    summary_tokens: int
    summary_version: int
    demotions: int
    soft_compactions: int
    context_tokens: int
    budget_tokens: int
    encoding: str


class Memory:
    """Memory for one agent session, under a token budget.

    >>> mem = Memory("chat-1", user="ana", store="memos.db", budget=8192)   # doctest: +SKIP
    >>> mem.add({"role": "user", "content": "I never eat spicy food."})      # doctest: +SKIP
    >>> client.chat.completions.create(model=..., messages=mem.context())    # doctest: +SKIP

    ``store`` is an SQLAlchemy URL or a SQLite file path (default: ``MEMOS_STORE`` or
    ``./memos.db``). ``budget`` is the prompt budget in tokens; ``settings`` holds every
    other number (:class:`~memos.MemosSettings`, default from ``MEMOS_*`` variables).
    ``guard`` replaces the default guard rules; tool chains in flight are always kept.
    ``on_event`` is called with a :class:`PagingEvent` after each compaction.
    """

    def __init__(
        self,
        session: str = "default",
        *,
        user: str = "default",
        agent: str = "default",
        store: str | Path | Store | None = None,
        budget: int | None = None,
        settings: MemosSettings | None = None,
        guard: Guard | GuardFn | None = None,
        summarizer: Summarizer | None = None,
        counter: TokenCounter | None = None,
        on_event: Callable[[PagingEvent], None] | None = None,
    ) -> None:
        settings = settings if settings is not None else MemosSettings.from_env()
        if budget is not None:
            settings = replace(settings, budget_tokens=budget)
        self.settings = settings
        self.namespace = validate_namespace((user, agent, session))
        self.store = store if isinstance(store, Store) else Store(store or os.environ.get("MEMOS_STORE") or "memos.db")
        self._owns_store = not isinstance(store, Store)
        self.counter = counter or default_counter(settings.model)
        if guard is None:
            guard = RecencyGuard(settings.keep_recent_units) & PinGuard() & ConstraintGuard()
        self.guard: Guard = ToolChainGuard() & as_guard(guard)
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer(self.counter)
        self.on_event = on_event
        self._render_cache: dict[tuple[str, int, bool], tuple[dict[str, Any], int]] = {}
        self._section_cache: dict[tuple[Any, ...], tuple[dict[str, Any] | None, int]] = {}
        self._load()

    # -- state ---------------------------------------------------------------------

    def _load(self) -> None:
        self._system: list[Message] = []
        self._hot: list[Message] = []
        self._pinned: list[Message] = []
        self._compacted: set[str] = set()
        self._call_ids: set[str] = set()
        self._count = 0
        next_seq = 0
        for m, tier, compacted in self.store.load_messages(self.namespace):
            self._count += 1
            next_seq = m.seq + 1
            self._call_ids.update(m.tool_call_ids)
            if m.role in _SYSTEM_ROLES:
                self._system.append(m)
            elif tier == "hot":
                self._hot.append(m)
                if compacted:
                    self._compacted.add(m.id)
            elif tier == "pinned":
                self._pinned.append(m)
        self._next_seq = next_seq
        self._summary: SummaryRow | None = self.store.latest_summary(self.namespace)
        events = self.store.compactions(self.namespace)
        self._demotions = sum(1 for e in events if e.kind == "hard" and e.summary_version is not None)
        self._soft = sum(1 for e in events if e.kind == "soft")

    def _pending_calls(self) -> list[str]:
        if not self._hot:
            return []
        units = group_units(self._hot[-64:])
        last = units[-1] if units else None
        if last is None or not last.in_flight:
            return []
        answered = {m.data.get("tool_call_id") for m in last.messages[1:]}
        return [c for c in last.messages[0].tool_call_ids if c not in answered]

    # -- public API ----------------------------------------------------------------

    def add(self, messages: Any) -> list[Message]:
        """Log one message or a list of them (OpenAI chat format) and page if needed.

        The messages are validated first, as a batch: on a bad one an
        :class:`~memos.errors.InvalidMessage` (a ``ValueError``) names the problem and
        nothing is stored. Returns the logged messages with their ids and sequence numbers.
        """
        batch = validate_batch(messages, self._pending_calls(), self._call_ids)
        items = [(m, self.counter.count_message(m), False) for m in batch]
        logged = self.store.append(self.namespace, items, self._next_seq)
        for m in logged:
            self._call_ids.update(m.tool_call_ids)
            (self._system if m.role in _SYSTEM_ROLES else self._hot).append(m)
        self._next_seq += len(logged)
        self._count += len(logged)
        self._page(0, strict=False)
        return logged

    def context(self, query: str | None = None) -> list[dict[str, Any]]:
        """The prompt to send now, within the budget, in OpenAI chat format.

        With ``query``, the prompt is assembled as if ``query`` were the next user
        message, which is appended last; it is not stored. Raises
        :class:`~memos.errors.BudgetExceeded` when content that may not be evicted
        (system messages, pinned items, the newest units) does not fit.
        """
        query_msg = None
        extra = 0
        if query is not None:
            if not isinstance(query, str):
                raise ValueError(f"query must be a string, got {type(query).__name__}")
            query_msg = {"role": "user", "content": query}
            extra = self.counter.count_message(query_msg)
            cap = self._message_cap(1)
            if extra > cap:
                query_msg = {"role": "user", "content": self.counter.clip(query, cap - 8, " … ")}
                extra = self.counter.count_message(query_msg)
        summary_room = self._page(extra, strict=True)
        return self._build(query_msg, summary_room)

    def stats(self) -> MemoryStats:
        """Sizes of the tiers and counts of paging events."""
        hot_tokens = sum(self._unit_tokens(u) for u in group_units(self._hot))
        _, pinned_tokens = self._pinned_section()
        _, summary_tokens = self._summary_section(None)
        return MemoryStats(
            messages=self._count,
            hot_messages=len(self._hot),
            hot_tokens=hot_tokens,
            pinned_messages=len(self._pinned),
            pinned_tokens=pinned_tokens,
            summary_tokens=summary_tokens,
            summary_version=self._summary.version if self._summary else 0,
            demotions=self._demotions,
            soft_compactions=self._soft,
            context_tokens=self._total(0),
            budget_tokens=self.settings.budget_tokens,
            encoding=self.counter.encoding_name,
        )

    def history(self) -> list[Message]:
        """Every message ever added to this session, in order, read from the log."""
        return [m for m, _, _ in self.store.load_messages(self.namespace)]

    def summary(self) -> str:
        """The current rolling summary ('' before the first demotion)."""
        return self._summary.text if self._summary else ""

    def pin(self, message_id: str) -> None:
        """Keep a logged message visible in every context until :meth:`unpin`.

        A hot message stays where it is and is moved to the pinned section when it is
        demoted; a message already demoted comes back as a pinned item.
        """
        self._set_pin(message_id, True)

    def unpin(self, message_id: str) -> None:
        """Undo :meth:`pin` (and release a message a guard pinned); it stays in the log."""
        self._set_pin(message_id, False)

    def close(self) -> None:
        """Release the store's connections (when this Memory opened the store)."""
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Memory(namespace={self.namespace!r}, messages={self._count}, budget={self.settings.budget_tokens})"

    # -- pinning -------------------------------------------------------------------

    def _set_pin(self, message_id: str, pinned: bool) -> None:
        for tier in (self._system, self._hot, self._pinned):
            for i, m in enumerate(tier):
                if m.id == message_id:
                    if tier is self._pinned and not pinned:
                        del tier[i]
                        self.store.set_flags(self.namespace, [message_id], pinned=False, tier="warm")
                    else:
                        tier[i] = replace(m, pinned=pinned)
                        self.store.set_flags(self.namespace, [message_id], pinned=pinned)
                    return
        for m, tier_name, _ in self.store.load_messages(self.namespace):
            if m.id == message_id:
                if pinned:
                    self.store.set_flags(self.namespace, [message_id], pinned=True, tier="pinned")
                    self._pinned.append(replace(m, pinned=True))
                    self._pinned.sort(key=lambda x: x.seq)
                return
        raise ValueError(f"no message with id {message_id!r} in session {self.namespace!r}")

    # -- rendering -----------------------------------------------------------------

    def _message_cap(self, unit_size: int) -> int:
        return max(_MIN_CLIP_TOKENS, self.settings.hot_target_tokens // max(1, unit_size))

    def _render(self, m: Message, cap: int, names: dict[str, str]) -> tuple[dict[str, Any], int]:
        compacted = m.id in self._compacted
        key = (m.id, cap, compacted)
        hit = self._render_cache.get(key)
        if hit is not None:
            return hit
        data = m.data
        if compacted:
            text = placeholder(m, names.get(str(data.get("tool_call_id")), "a tool"),
                               self.settings.placeholder_preview_chars, self.counter)
            data = {"role": "tool", "tool_call_id": data["tool_call_id"], "content": text}
        if m.tokens > cap and (data.get("content") or "") != "":
            marker = f" … [memos: clipped; full text in the memory log as message {m.id}] … "
            body = render_text(data) if not isinstance(data.get("content"), str) else data["content"]
            overhead = self.counter.count_message({**data, "content": ""})
            data = {**data, "content": self.counter.clip(body, max(0, cap - overhead), marker)}
        out = (data, self.counter.count_message(data) if data is not m.data else m.tokens)
        self._render_cache[key] = out
        return out

    def _render_unit(self, unit: Unit, names: dict[str, str]) -> list[tuple[dict[str, Any], int]]:
        cap = self._message_cap(len(unit.messages))
        return [self._render(m, cap, names) for m in unit.messages]

    def _unit_tokens(self, unit: Unit) -> int:
        return sum(t for _, t in self._render_unit(unit, tool_names([unit])))

    def _pinned_section(self) -> tuple[dict[str, Any] | None, int]:
        key = ("pinned", tuple((m.id, m.pinned) for m in self._pinned))
        hit = self._section_cache.get(key)
        if hit is not None:
            return hit
        lines = []
        seen: set[str] = set()
        cap = self._message_cap(1)
        for m in self._pinned:
            sentences = [] if m.pinned else extract_constraints(m.text)
            body = " ".join(sentences) if sentences else render_text(m.data)
            if body.lower() in seen:
                continue
            seen.add(body.lower())
            if self.counter.count(body) > cap:
                body = self.counter.clip(body, cap, f" … [clipped; message {m.id}] … ")
            lines.append(f"({m.role}, #{m.seq}) {body}")
        msg = pinned_message(lines)
        out = (msg, self.counter.count_message(msg) if msg else 0)
        self._section_cache = {k: v for k, v in self._section_cache.items() if k[0] != "pinned"}
        self._section_cache[key] = out
        return out

    def _summary_section(self, room: int | None) -> tuple[dict[str, Any] | None, int]:
        if self._summary is None:
            return None, 0
        key = ("summary", self._summary.version, room)
        hit = self._section_cache.get(key)
        if hit is not None:
            return hit
        text = self._summary.text
        if room is not None:
            text = fit_summary(text, max(0, room - 40), self.counter) if room > 40 else ""
        msg = summary_message(text, self._summary.through_seq)
        out = (msg, self.counter.count_message(msg) if msg else 0)
        if len(self._section_cache) > 64:
            self._section_cache.clear()
        self._section_cache[key] = out
        return out

    def _total(self, extra: int, summary_room: int | None = None) -> int:
        system = sum(m.tokens for m in self._system)
        _, pinned = self._pinned_section()
        _, summary = self._summary_section(summary_room)
        hot = sum(self._unit_tokens(u) for u in group_units(self._hot))
        return system + pinned + summary + hot + extra + REPLY_PRIMING

    def _build(self, query: dict[str, Any] | None, summary_room: int | None) -> list[dict[str, Any]]:
        units = group_units(self._hot)
        names = tool_names(units)
        hot = [d for u in units for d, _ in self._render_unit(u, names)]
        out = assemble(
            system=[m.data for m in self._system],
            pinned=self._pinned_section()[0],
            summary=self._summary_section(summary_room)[0],
            recalled=None,
            hot=hot,
            query=query,
        )
        return [copy.deepcopy(d) if ("tool_calls" in d or isinstance(d.get("content"), list)) else dict(d) for d in out]

    # -- paging --------------------------------------------------------------------

    def _page(self, extra: int, *, strict: bool) -> int | None:
        """Compact and demote until the prompt fits; returns the summary's room if it had to shrink."""
        s = self.settings
        total = self._total(extra)
        if total > s.soft_tokens:
            self._soft_compact(total - s.soft_tokens)
            total = self._total(extra)
        if total > s.hard_tokens:
            hot = sum(self._unit_tokens(u) for u in group_units(self._hot))
            # Down to the hot target, or lower when the other sections would leave the
            # context above the soft threshold (so the next turn does not demote again).
            self._demote(max(0, min(s.hot_target_tokens, s.soft_tokens - (total - hot))))
            total = self._total(extra)
        if total <= s.budget_tokens:
            return None
        hot = sum(self._unit_tokens(u) for u in group_units(self._hot))
        self._demote(max(0, s.budget_tokens - (total - hot)))
        total = self._total(extra)
        if total <= s.budget_tokens:
            return None
        _, summary = self._summary_section(None)
        room = s.budget_tokens - (total - summary)
        if room >= 0 and self._total(extra, room) <= s.budget_tokens:
            return room
        if strict:
            needed = total - summary
            raise BudgetExceeded(
                needed, s.budget_tokens,
                f"system {sum(m.tokens for m in self._system)}, pinned {self._pinned_section()[1]}, "
                f"hot tier that guards keep {needed - sum(m.tokens for m in self._system) - self._pinned_section()[1]}",
            )
        return None

    def _soft_compact(self, tokens_to_free: int) -> None:
        units = group_units(self._hot)
        names = tool_names(units)
        by_id = {m.id: (m, len(u.messages)) for u in units for m in u.messages}

        def saving(mid: str) -> int:
            m, size = by_id[mid]
            cap = self._message_cap(size)
            _, now = self._render(m, cap, names)
            self._compacted.add(mid)
            try:
                _, after = self._render(m, cap, names)
            finally:
                self._compacted.discard(mid)
            return now - after

        ids = find_soft_compactions(units, tokens_to_free=tokens_to_free, keep_recent_units=self.settings.keep_recent_units,
                                    already=self._compacted, saving=saving)
        if not ids:
            return
        start = time.perf_counter()
        before = self._total(0)
        self._compacted.update(ids)
        after = self._total(0)
        self.store.compact(self.namespace, ids, before, after)
        self._soft += 1
        self._emit(PagingEvent("soft", before, after, len(ids), 0, None, "placeholder",
                               (time.perf_counter() - start) * 1000))

    def _warm_messages(self) -> list[Message]:
        return [m for m, tier, _ in self.store.load_messages(self.namespace) if tier == "warm" and m.role not in _SYSTEM_ROLES]

    def _demote(self, target: int) -> bool:
        units = group_units(self._hot)
        cut = find_cut_point(units, target_tokens=target, guard=self.guard, unit_tokens=self._unit_tokens)
        if cut.empty:
            return False
        start = time.perf_counter()
        before = self._total(0)
        segment = [m for u in cut.demote for m in u.messages]
        pinned = [m for u in cut.pin for m in u.messages]
        text: str | None = None
        kind = ""
        through = self._summary.through_seq if self._summary else -1
        if segment:
            plan = prepare_summary(
                previous=self._summary.text if self._summary else None,
                segment=segment,
                demotion_number=self._demotions + 1,
                full_every=self.settings.full_resummary_every,
                max_tokens=self.settings.summary_max_tokens,
                originals=lambda: sorted(self._warm_messages() + segment, key=lambda m: m.seq),
            )
            text = fit_summary(self.summarizer.summarize(plan), self.settings.summary_max_tokens, self.counter)
            kind, through = plan.kind, max(through, plan.through_seq)
        moved = sum(len(u.messages) for u in units[: cut.index])
        removed = {m.id for m in self._hot[:moved]}
        self._hot = self._hot[moved:]
        self._compacted -= removed
        self._pinned = sorted(self._pinned + pinned, key=lambda m: m.seq)
        old_summary = self._summary
        if text is not None:
            self._summary = SummaryRow(namespace="", version=(old_summary.version + 1 if old_summary else 1), text=text,
                                       tokens=self.counter.count(text), through_seq=through, kind=kind, created_at=0.0)
        after = self._total(0)
        row = self.store.demote(
            self.namespace,
            Demotion(
                warm_ids=[m.id for m in segment], pinned_ids=[m.id for m in pinned],
                summary_text=text, summary_tokens=self.counter.count(text) if text else 0, summary_kind=kind,
                through_seq=through, tokens_before=before, tokens_after=after,
                summarizer=getattr(self.summarizer, "name", type(self.summarizer).__name__),
                duration_ms=(time.perf_counter() - start) * 1000,
            ),
        )
        if row is not None:
            self._summary = row
            self._demotions += 1
        self._render_cache = {k: v for k, v in self._render_cache.items() if k[0] not in removed}
        self._emit(PagingEvent("hard", before, after, len(segment), len(pinned), row.version if row else None,
                               getattr(self.summarizer, "name", "custom"), (time.perf_counter() - start) * 1000))
        return True

    def _emit(self, event: PagingEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)


def messages_json(messages: Sequence[dict[str, Any]]) -> str:
    """The prompt as pretty JSON (for debugging and the command line)."""
    return json.dumps(list(messages), ensure_ascii=False, indent=2)
