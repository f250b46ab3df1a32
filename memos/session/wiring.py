"""Wiring: the parts of one session, built from its settings and the store.

:func:`wire` chooses the summariser, the fact extractor and the rule detector (an LLM's
when one is configured, the offline ones otherwise, and always the offline ones as the
fallback), composes the guard rules, reads the session's state from the store and connects
recall, assembly, pins, archiving and compaction to it. :class:`~memos.Memory` delegates to
the :class:`Parts`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..adapters.llm import LLMConfig, LLMFactExtractor, LLMRuleJudge, LLMSummarizer, make_client
from ..adapters.tools import RequestTools
from ..core.config import MemosSettings
from ..core.tokens import TokenCounter
from ..paging.assembly import ContextAssembler
from ..paging.compaction import Compactor, PagingEvent
from ..paging.guards import ConstraintGuard, Guard, GuardFn, PinGuard, RecencyGuard, ReferenceGuard, ToolChainGuard, as_guard
from ..paging.pins import Pins
from ..paging.request import Request
from ..retrieval.recall import Recall
from ..storage.log import Namespace
from ..text.embeddings import Embedder
from ..tiers.archival import ArchivalTier, ArchiveBackend
from ..tiers.archiving import Archiver
from ..tiers.cold import ColdTier
from ..tiers.extract import FactExtractor, RuleExtractor
from ..tiers.state import SessionState
from ..tiers.warm import ExtractiveSummarizer, Summarizer
from .store import MemoryStore

__all__ = ["Parts", "wire"]


@dataclass
class Parts:
    """One session's parts, connected to one :class:`SessionState`."""

    state: SessionState
    cold: ColdTier
    archival: ArchivalTier
    recall: Recall
    assembler: ContextAssembler
    pins: Pins
    archiver: Archiver
    compactor: Compactor
    tools: RequestTools
    # what the session's requests carry until a context() call says otherwise (its tools)
    request: Request
    guard: Guard
    summarizer: Summarizer
    extractor: FactExtractor


def wire(
    namespace: Namespace,
    scope: str,
    store: MemoryStore,
    settings: MemosSettings,
    counter: TokenCounter,
    *,
    llm: LLMConfig | None,
    guard: Guard | GuardFn | None = None,
    summarizer: Summarizer | None = None,
    extractor: FactExtractor | None = None,
    on_event: Callable[[PagingEvent], None] | None = None,
    archive: str | Path | ArchiveBackend | None = None,
    embedder: Embedder | Callable[[list[str]], Any] | None = None,
    embedding_model_dir: str | Path | None = None,
    tools: Sequence[dict[str, Any]] | None = None,
) -> Parts:
    """The parts of session ``namespace`` whose long-term memory is ``scope`` on ``store``
    (the arguments are :class:`~memos.Memory`'s)."""
    # user messages are read as they arrive, by a RuleExtractor: the one given as
    # ``extractor``, else one whose rule detector is the LLM (when configured) or the classifier
    rules = extractor if isinstance(extractor, RuleExtractor) else RuleExtractor()
    if llm is not None:
        client = make_client(llm)
        if extractor is None:
            rules = RuleExtractor(detector=LLMRuleJudge(llm, client))
        summarizer = summarizer or LLMSummarizer(llm, client)
        extractor = extractor or LLMFactExtractor(llm, client)
    summarizer = summarizer or ExtractiveSummarizer(counter)
    extractor = extractor or RuleExtractor()
    cold = store.cold(scope)
    archival = store.archive_for(scope, archive=archive, embedder=embedder, model_dir=embedding_model_dir,
                                 background=settings.background_indexing)
    request_tools = RequestTools(counter.count_tools, settings.tool_prefix, tools)
    references = ReferenceGuard(settings.reference_turns)
    if guard is None:
        guard = RecencyGuard(settings.keep_recent_units) & PinGuard() & ConstraintGuard() & references
    full_guard = ToolChainGuard() & as_guard(guard)
    state = SessionState(namespace)
    state.load(store)
    recall = Recall(state, settings, counter, cold, archival)
    assembler = ContextAssembler(state, settings, counter, cold, recall)
    archiver = Archiver(state, scope, store, archival, own_tool=lambda name: request_tools.name(name) is not None)

    def reload() -> None:
        state.load(store)
        assembler.reset()
        recall.reset()

    compactor = Compactor(
        state=state, settings=settings, counter=counter, store=store, cold=cold, archival=archival,
        assembler=assembler, recall=recall, guard=full_guard,
        # when the budget cannot be met otherwise, only in-flight chains, pins and the
        # newest unit hold: recency and custom KEEP rules give way
        last_resort=ToolChainGuard() & RecencyGuard(1) & PinGuard() & ConstraintGuard(),
        references=references, rules=rules, extractor=extractor, summarizer=summarizer,
        archive_item=archiver.item, reload=reload, on_event=on_event,
        own_tool=archiver.own_tool,
    )
    return Parts(state=state, cold=cold, archival=archival, recall=recall, assembler=assembler,
                 pins=Pins(state, settings, counter, store, cold, assembler), archiver=archiver,
                 compactor=compactor, tools=request_tools, request=Request(tools_tokens=request_tools.measure()[0]),
                 guard=full_guard, summarizer=summarizer,
                 extractor=extractor)
