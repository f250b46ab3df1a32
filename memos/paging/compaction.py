"""Compaction: the pager's moves, planned and applied.

:class:`Compactor` keeps a session within its budget. :meth:`Compactor.page` runs soft
compaction first (old, already-used tool results become placeholders; the results go to
the archive and what they held to the facts), then demotion: the oldest units the guards
allow leave the hot tier for the rolling summary (or the pinned section), their facts go to
the cold tier, and everything a demotion changes is written in one transaction and
journalled (:meth:`memos.Memory.compactions`, :meth:`memos.Memory.rollback`). A demotion's
summary and facts can be prepared on the store's background pool while the units stay hot.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Any

from ..core.config import MemosSettings
from ..core.errors import BudgetExceeded
from ..core.messages import Message, memory_traffic, without_results_of
from ..core.tokens import TokenCounter
from ..retrieval.recall import Recall
from ..storage.facts import CORRECTION_WINDOW
from ..storage.log import Demotion, SummaryRow
from ..tiers.archival import ArchivalTier, ArchiveItem
from ..tiers.cold import ColdTier, FactCandidate, Invalidation, fact_log
from ..tiers.extract import FactExtractor, RuleExtractor, identifier_facts, message_source, timed
from ..tiers.hot import Unit, group_units, tool_names
from ..tiers.shared import TierStore
from ..tiers.state import SessionState
from ..tiers.warm import ExtractiveSummarizer, Summarizer, SummaryPlan, fit_summary, prepare_summary
from .assembly import ContextAssembler, Rooms
from .guards import Guard, GuardContext, ReferenceGuard, Verdict
from .pager import CutPoint, find_cut_point, find_soft_compactions
from .request import Request

__all__ = ["Compactor", "PagingEvent"]

_MIN_DEMOTION_TOKENS = 64


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


class Compactor:
    """Soft compaction and demotion for one session (see the module docs)."""

    def __init__(
        self,
        *,
        state: SessionState,
        settings: MemosSettings,
        counter: TokenCounter,
        store: TierStore,
        cold: ColdTier,
        archival: ArchivalTier,
        assembler: ContextAssembler,
        recall: Recall,
        guard: Guard,
        last_resort: Guard,
        references: ReferenceGuard,
        rules: RuleExtractor,
        extractor: FactExtractor,
        summarizer: Summarizer,
        archive_item: Callable[[list[Message], str, str], ArchiveItem],
        reload: Callable[[], None],
        on_event: Callable[[PagingEvent], None] | None = None,
        own_tool: Callable[[str], bool] = lambda name: False,
    ) -> None:
        self.state = state
        self.settings = settings
        self.counter = counter
        self.store = store
        self.cold = cold
        self.archival = archival
        self.assembler = assembler
        self.recall = recall
        self.guard = guard
        self.last_resort = last_resort  # when the budget cannot be met otherwise
        self.references = references
        self.rules = rules  # reads new user messages at once
        self.extractor = extractor  # reads what leaves the hot tier
        self.summarizer = summarizer
        self.archive_item = archive_item
        self.reload = reload  # read the session from the store again (after a failed write)
        self.on_event = on_event
        self.own_tool = own_tool  # whether a tool name is one of memos' own (under a known prefix)
        self.pending: Future[_DemotionPlan] | None = None  # a demotion being prepared in the background

    def page(self, req: Request, extra: int, *, strict: bool) -> tuple[Rooms, Request]:
        """Compact and demote until the prompt of ``req`` fits (``extra`` tokens more: its
        query); returns the room of the optional sections, and the request to build the
        prompt for (its query's cap set when the query had to be clipped). Recalled memory
        never causes paging: it fills the room left at the end. When the prompt must shrink,
        relevant facts give way first, then the summary."""
        s = self.settings
        a, query = self.assembler, req.query
        asked = extra
        extra += req.tools_tokens
        self.finish_pending(req, wait=False)
        rooms = Rooms(recall=0)
        plan = a.plan(req, extra, query, rooms)
        if plan.total > s.budget_tokens and self.pending is not None:
            self.finish_pending(req, wait=True)  # the prompt cannot wait for the background demotion
            plan = a.plan(req, extra, query, rooms)
        # The thresholds are shares of the room the conversation has: the budget less the tool
        # schemas, which every request carries whatever is paged, and with auto-recall less
        # the recall reserve too.
        tools, scale = req.tools_tokens, s.paged_share
        soft, hard = (tools + a.share(req, t * scale) for t in (s.soft_threshold, s.hard_threshold))
        hot_target = a.share(req, s.hot_target * scale)
        if plan.total > soft:
            self.soft_compact(req, plan.total - soft)
            plan = a.plan(req, extra, query, rooms)
        if plan.total > hard:
            # Down to the hot target, or lower when the other sections would leave the
            # context above the soft threshold (so the next turn does not demote again).
            self.demote(req, max(0, min(hot_target, soft - (plan.total - plan.hot))))
            plan = a.plan(req, extra, query, rooms)
        if plan.total > s.budget_tokens:
            for guard in (self.guard, self.last_resort):
                self.demote(req, max(0, s.budget_tokens - (plan.total - plan.hot)), guard)
                plan = a.plan(req, extra, query, rooms)
                if plan.total <= s.budget_tokens:
                    break
        # then the sections give way, each by what is still over: relevant facts, the summary,
        # the automatic pins (explicit ones never do)
        if plan.total > s.budget_tokens:
            rooms = Rooms(recall=0, facts=max(0, plan.facts - (plan.total - s.budget_tokens)))
            plan = a.plan(req, extra, query, rooms)
        if plan.total > s.budget_tokens:
            rooms = Rooms(recall=0, facts=0, summary=max(0, plan.summary - (plan.total - s.budget_tokens)))
            plan = a.plan(req, extra, query, rooms)
        if plan.total > s.budget_tokens:
            rooms = replace(rooms, pinned=max(0, plan.pinned - (plan.total - s.budget_tokens)))
            plan = a.plan(req, extra, query, rooms)
        if plan.total > s.budget_tokens:
            narrowed, shorter = a.narrow_newest(req, plan.total - s.budget_tokens)
            if shorter:
                # the newest unit's (or the query's) larger room did not fit beside what may not
                # leave the prompt: it is clipped to its share, and the sections get their room back
                if narrowed.asking:
                    asked = a.query_message(narrowed)[1]
                return self.page(narrowed, asked, strict=strict)
        if plan.total > s.budget_tokens:
            if strict:
                raise BudgetExceeded(
                    plan.total, s.budget_tokens,
                    f"system {plan.system}, pinned section {plan.pinned}, tool schemas {req.tools_tokens}, "
                    f"hot tier that guards keep {a.hot_tokens(req)}",
                )
            return rooms, req
        return replace(rooms, recall=None if strict else 0, recall_room=s.budget_tokens - plan.total), req

    def soft_compact(self, req: Request, tokens_to_free: int) -> None:
        units = group_units(self.state.hot)
        names = tool_names(units)
        by_id = {m.id: (m, len(u.messages)) for u in units for m in u.messages}

        def saving(mid: str) -> int:
            m, size = by_id[mid]
            cap = self.assembler.message_cap(req, size)
            _, now = self.assembler.render(m, cap, names)
            self.state.compacted.add(mid)
            try:
                _, after = self.assembler.render(m, cap, names)
            finally:
                self.state.compacted.discard(mid)
            return now - after

        # a result the assistant is still acting on (it quoted it in its last turns) keeps its full text
        ids = find_soft_compactions(units, tokens_to_free=tokens_to_free, keep_recent_units=self.settings.keep_recent_units,
                                    already=self.state.compacted, saving=saving,
                                    protected=lambda i: self.references(units[i], GuardContext(units, i)) >= Verdict.HOLD)
        if not ids:
            return
        start = time.perf_counter()
        before = self.assembler.total(req, 0, None, Rooms())
        # what the placeholders hide goes to the cold tier first (task state, identifiers)
        chosen = set(ids)
        hidden = [m for u in units if any(m.id in chosen for m in u.messages)
                  for m in u.messages if m.id in chosen or m.tool_call_ids]
        cands, invs, _ = self.extract(hidden)
        known = "\n".join(c.key + "\n" + c.value for c in cands)
        cands += timed(identifier_facts([message_source(m) for m in self.conversation(hidden) if m.id in chosen], "", known),
                       hidden)
        self.state.compacted.update(ids)
        after = self.assembler.total(req, 0, None, Rooms())
        by_call = {c: u.messages[0] for u in units for c in u.messages[0].tool_call_ids}
        traffic = self.traffic(hidden)
        items = [self.archive_item([by_call[str(m.data.get("tool_call_id"))], m], "tool_result", f"result:{m.id}")
                 for m in hidden if m.id in chosen and str(m.data.get("tool_call_id")) in by_call and m.id not in traffic]

        def write(session: Any) -> dict[str, Any]:
            changes = self.cold.apply(cands, invs, session=session)
            self.archival.stage(session, items)
            return fact_log(changes)

        try:
            self.store.compact(self.state.namespace, ids, before, after, also=write)
        except Exception:
            self.reload()
            self.cold.invalidate_caches()
            raise
        self.recall.possible = True
        self.archival.schedule()
        self.state.soft_compactions += 1
        self.emit(PagingEvent("soft", before, after, len(ids), 0, None, "placeholder",
                               (time.perf_counter() - start) * 1000))

    def warm_messages(self) -> list[Message]:
        """The newest demoted messages a full re-summary reads (at most ``resummary_window``)."""
        return self.store.warm_tail(self.state.namespace, self.settings.resummary_window)

    def extract(self, messages: Sequence[Message], *, rules_only: bool = False
                 ) -> tuple[list[FactCandidate], list[Invalidation], str]:
        """Facts from ``messages``: the rules read new user messages at once (cheap, so
        constraints are pinned before the next prompt); the configured extractor reads
        what leaves the hot tier, and the rules take over when it fails."""
        messages = self.conversation(messages)
        if rules_only or isinstance(self.extractor, RuleExtractor):
            found = self.rules.extract([m for m in messages if rules_only or m.role != "user"])
            name = "rules"
        else:
            try:
                found = self.extractor.extract(messages, self.cold.facts())
                name = getattr(self.extractor, "name", type(self.extractor).__name__)
            except Exception as exc:
                found = self.rules.extract([m for m in messages if m.role != "user"])
                name = f"rules (fallback: {_reason(exc)})"
        return self._windowed(timed(found.candidates, messages)), timed(found.invalidations, messages), name

    def conversation(self, messages: Sequence[Message]) -> list[Message]:
        """``messages`` less the results of memos' own tool calls (``retrieve``, ``facts``,
        ``pin``, ...), for the facts and the identifier net: what those hold is memory already,
        quoted under memos' own ids ("unit:1193b5…", "fact:307") and times, which would come
        back as facts and summary lines of their own."""
        return without_results_of(messages, self.own_tool)

    def told(self, messages: Sequence[Message]) -> list[Message]:
        """``messages`` as the summary reads them: less the calls to memos' own tools and their
        results. An identifier in such a call's arguments (a ``retrieve`` query) is still read by
        the identifier net, from :meth:`conversation`."""
        traffic = self.traffic(messages)
        return [m for m in messages if m.id not in traffic]

    def traffic(self, messages: Sequence[Message]) -> set[str]:
        """The ids of ``messages`` that are only calls to memos' own tools and their results:
        not archived again (what they quote is archived already; the log keeps them)."""
        return memory_traffic(messages, self.own_tool)

    def _windowed(self, cands: list[FactCandidate]) -> list[FactCandidate]:
        """Corrections with the time their window opens in this session: the cold tier serves
        all of a user's sessions, whose seq numbers each start at 0."""
        return [replace(c, window_from=self.store.time_from(self.state.namespace, c.source_seq - CORRECTION_WINDOW))
                if c.corrects and c.source_time > 0 and not c.window_from else c for c in cands]

    def summarize(self, plan: SummaryPlan) -> tuple[str, str]:
        try:
            text, name = self.summarizer.summarize(plan), getattr(self.summarizer, "name", type(self.summarizer).__name__)
        except Exception as exc:
            if isinstance(self.summarizer, ExtractiveSummarizer):
                raise
            text, name = ExtractiveSummarizer(self.counter).summarize(plan), f"extractive (fallback: {_reason(exc)})"
        return fit_summary(text, self.settings.summary_max_tokens, self.counter), name

    def demote(self, req: Request, target: int, guard: Guard | None = None) -> bool:
        """Demote the oldest units down to ``target`` hot tokens. With background
        compaction (and the normal guard) the summary and the facts are prepared on a
        worker thread while the units stay hot; the result is applied on a later call."""
        if self.pending is not None:
            if guard is None and not self.pending.done():
                return False  # one demotion at a time; the units it takes are still hot
            self.finish_pending(req, wait=True)
        units = group_units(self.state.hot)
        cut = find_cut_point(units, target_tokens=target, guard=guard or self.guard,
                             unit_tokens=lambda u: self.assembler.unit_tokens(req, u),
                             known=self.cold.knows, hold_limit=self.settings.hot_target_tokens // 2)
        if cut.empty:
            return False
        if guard is None and sum(self.assembler.unit_tokens(req, u) for u in cut.demote) < _MIN_DEMOTION_TOKENS and not cut.pin:
            return False  # a summary line costs about what a crumb frees; wait until there is more to move
        before = self.assembler.total(req, 0, None, Rooms())
        if self.settings.background_compaction and guard is None:
            self.pending = self.store.submit(self.plan_demotion, cut, units, before)
            return True
        self.apply_demotion(req, self.plan_demotion(cut, units, before))
        return True

    def finish_pending(self, req: Request, *, wait: bool) -> None:
        """Apply a background demotion once it is ready (or wait for it); ``req`` is the
        request the prompt's tokens after it are measured for."""
        pending = self.pending
        if pending is None or (not wait and not pending.done()):
            return
        self.pending = None
        self.apply_demotion(req, pending.result())

    def discard_pending(self) -> None:
        """Drop a background demotion without applying it: it was planned from state the
        store no longer holds (a forget or a deletion since). Its units are still hot in the
        store, so the next demotion plans them again from what is there now."""
        pending, self.pending = self.pending, None
        if pending is not None:
            with contextlib.suppress(Exception):  # a failed plan wrote nothing either
                pending.result()

    def plan_demotion(self, cut: CutPoint, units: list[Unit], before: int) -> _DemotionPlan:
        """Everything a demotion writes, computed without changing any state (LLM calls happen here)."""
        start = time.perf_counter()
        segment = [m for u in cut.demote for m in u.messages]
        pinned = [m for u in cut.pin for m in u.messages]
        text: str | None = None
        kind = ""
        summarizer = ""
        old_summary = self.state.summary
        through = old_summary.through_seq if old_summary else -1
        old_text = old_summary.text if old_summary else ""
        said = self.conversation(segment)
        told = self.told(said)
        if told:  # a segment of nothing but calls to memos' own tools leaves the summary as it was
            plan = prepare_summary(
                previous=old_text or None,
                segment=told,
                demotion_number=self.state.demotions + 1,
                full_every=self.settings.full_resummary_every,
                max_tokens=self.settings.summary_max_tokens,
                originals=lambda: sorted(self.told(self.warm_messages() + segment), key=lambda m: m.seq),
                superseded=self.cold.superseded_values(max_chars=120),
            )
            text, summarizer = self.summarize(plan)
            kind, through = plan.kind, max(through, max(m.seq for m in segment))  # the whole segment is demoted
        # facts from what leaves the hot tier (user messages were read when they arrived)
        cands, invs, extractor = self.extract(segment + pinned)
        new_text = text if text is not None else old_text
        planned = "\n".join(c.key + "\n" + c.value for c in cands)
        known = lambda ident: ident in planned or self.cold.has_key(ident)  # noqa: E731
        sources = [message_source(m) for m in said]
        if old_text:
            sources.append((old_text, (), through))
        cands += timed(identifier_facts(sources, new_text, known), segment)
        return _DemotionPlan(cut=cut, segment=segment,
                             pinned=pinned, text=text, kind=kind, summarizer=summarizer, extractor=extractor,
                             through=through, old_summary=old_summary, candidates=cands, invalidations=invs,
                             tokens_before=before, started=start)

    def apply_demotion(self, req: Request, p: _DemotionPlan) -> None:
        """Move the planned units out of the hot tier and write the demotion in one transaction."""
        removed = p.cut.ids
        compacted_before = set(self.state.compacted)
        self.state.hot = [m for m in self.state.hot if m.id not in removed]
        self.state.compacted -= removed
        self.state.pinned = sorted(self.state.pinned + p.pinned, key=lambda m: m.seq)
        if p.text is not None:
            version = p.old_summary.version + 1 if p.old_summary else 1
            self.state.summary = SummaryRow(namespace="", version=version, text=p.text, tokens=self.counter.count(p.text),
                                       through_seq=p.through, kind=p.kind, created_at=0.0)
        # a chain whose results were all archived at soft compaction is covered by those items
        # single messages were archived as they arrived (the id is the same, so a session logged
        # before that is covered too); a tool chain is archived whole unless its results were at
        # soft compaction
        units = [u for u in p.cut.demote + p.cut.pin
                 if not (u.is_tool_chain and all(m.id in compacted_before for m in u.messages[1:]))]
        traffic = self.traffic([m for u in units for m in u.messages])
        kept = [(u, [m for m in u.messages if m.id not in traffic]) for u in units]
        items = [self.archive_item(said, "tool_chain" if u.is_tool_chain else "message",
                                   f"{'chain' if u.is_tool_chain else 'unit'}:{u.messages[0].id}")
                 for u, said in kept if said]
        if p.text is not None and p.old_summary is not None:
            items.append(ArchiveItem(id=f"summary:{self.state.key}:v{p.old_summary.version}",
                                     namespace=self.cold.namespace, session=self.state.key, kind="summary",
                                     text=p.old_summary.text, first_seq=0, last_seq=p.old_summary.through_seq,
                                     roles="system", created_at=p.old_summary.created_at or time.time()))

        def write_facts(session: Any) -> dict[str, Any]:
            changes = self.cold.apply(p.candidates, p.invalidations, session=session)
            self.archival.stage(session, items)
            return fact_log(changes)

        after = self.assembler.total(req, 0, None, Rooms())
        try:
            row = self.store.demote(
                self.state.namespace,
                Demotion(
                    warm_ids=[m.id for m in p.segment], pinned_ids=[m.id for m in p.pinned],
                    summary_text=p.text, summary_tokens=self.counter.count(p.text) if p.text else 0,
                    summary_kind=p.kind, through_seq=p.through, tokens_before=p.tokens_before, tokens_after=after,
                    summarizer=p.summarizer, extractor=p.extractor,
                    duration_ms=(time.perf_counter() - p.started) * 1000,
                ),
                also=write_facts,
            )
        except Exception:
            self.reload()  # the store is the truth: nothing of this demotion was written
            self.cold.invalidate_caches()
            raise
        if row is not None:
            self.state.summary = row
            self.state.demotions += 1
        self.recall.possible = True
        self.archival.schedule()
        self.assembler.forget_rendered(removed)
        self.emit(PagingEvent("hard", p.tokens_before, after, len(p.segment), len(p.pinned),
                               row.version if row else None, p.summarizer, (time.perf_counter() - p.started) * 1000))

    def emit(self, event: PagingEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)




@dataclass(frozen=True)
class _DemotionPlan:
    """A demotion decided and prepared, not yet applied."""

    cut: CutPoint
    segment: list[Message]
    pinned: list[Message]
    text: str | None
    kind: str
    summarizer: str
    extractor: str
    through: int
    old_summary: SummaryRow | None
    candidates: list[FactCandidate]
    invalidations: list[Invalidation]
    tokens_before: int
    started: float


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:200]
