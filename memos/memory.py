"""The :class:`Memory` facade: one session's memory, from the log to the prompt.

Data flows one way: :meth:`Memory.add` validates and logs messages, they join the hot
tier, and the pager (soft compaction, demotion) moves what no longer fits down to the
pinned section and the rolling summary; :meth:`Memory.context` assembles the prompt.
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .agent import TurnResult, run_turn
from .config import MemosSettings
from .embeddings import ChromaEmbedder, Embedder, load_embedder
from .errors import BudgetExceeded, PinLimitExceeded
from .extract import FactExtractor, RuleExtractor, identifier_facts, message_source
from .llm import LLMConfig, LLMFactExtractor, LLMRuleJudge, LLMSummarizer, make_client
from .memory_store import MemoryStore, default_backend, scope_key
from .messages import Message, validate_batch
from .paging.context import (
    assemble,
    facts_message,
    pinned_message,
    pressure_message,
    recall_message,
    summary_message,
)
from .paging.guards import (
    ConstraintGuard,
    Guard,
    GuardContext,
    GuardFn,
    PinGuard,
    RecencyGuard,
    ReferenceGuard,
    ToolChainGuard,
    Verdict,
    as_guard,
    extract_constraints,
    references,
)
from .paging.pager import CutPoint, find_cut_point, find_soft_compactions
from .patterns import find_identifiers
from .store import CompactionRow, Demotion, Store, SummaryRow, namespace_key, validate_namespace
from .text.terms import content_terms
from .tiers.archival import ArchivalTier, ArchiveBackend, ArchiveItem, Hit, rrf
from .tiers.cold import ColdTier, Fact, FactCandidate, ForgetRecord, Invalidation, fact_key, fact_log
from .tiers.hot import Unit, clip_json, group_units, placeholder, render_text, tool_names
from .tiers.warm import ExtractiveSummarizer, Summarizer, SummaryPlan, fit_summary, prepare_summary
from .tokens import REPLY_PRIMING, TokenCounter, default_counter
from .tools_schema import TOOLS, dispatch

__all__ = ["Memory", "MemoryStats", "PagingEvent", "Rollback"]

_SYSTEM_ROLES = ("system", "developer")
_MIN_CLIP_TOKENS = 48
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


@dataclass(frozen=True)
class Rollback:
    """What :meth:`Memory.rollback` did: the ``rollback`` event it logged, the events it
    undid, how many messages came back into the hot tier, the summary version it wrote."""

    event_id: int
    undone: tuple[int, ...]
    messages_restored: int
    summary_version: int | None


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
    facts: int
    pinned_facts: int
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

    ``store`` is a :class:`~memos.MemoryStore`, an SQLAlchemy URL or a SQLite file path
    (default: ``MEMOS_STORE`` or ``./memos.db``; one store object per URL is shared in the
    process). The hot tier and the rolling summary belong to this session; the facts
    (pinned rules included) and the archive belong to the user, so a new session starts
    knowing what the user set and told before (``settings.share``: ``'user'``,
    ``'agent'`` or ``'session'``). Nothing of one user reaches another.

    ``budget`` is the prompt budget in tokens; ``settings`` holds every other number
    (:class:`~memos.MemosSettings`, default from ``MEMOS_*`` variables).
    ``guard`` replaces the default guard rules; tool chains in flight are always kept.
    ``llm`` (default: from ``MEMOS_LLM_BASE_URL`` / ``MEMOS_LLM_MODEL``) makes an
    OpenAI-compatible model write the summaries and extract facts from what is demoted;
    ``summarizer`` and ``extractor`` replace the offline ones directly. Whenever one of
    them fails, the offline one does that step and the compaction log records it. ``on_event`` is called with a
    :class:`PagingEvent` after each compaction.

    ``archive`` is where archival vectors live: a Chroma path, an ``http://`` Chroma
    server URL, or an :class:`~memos.tiers.archival.ArchiveBackend` (default:
    ``MEMOS_CHROMA_URL``, ``MEMOS_CHROMA_PATH``, or a folder beside the SQLite file).
    ``embedder`` replaces the all-MiniLM-L6-v2 model (any Chroma embedding function
    works), whose folder is ``embedding_model_dir`` or ``MEMOS_EMBEDDING_MODEL_DIR``.
    ``tools`` are the function schemas your requests carry (default: memos' own): their
    tokens count against the budget (see :meth:`context`).
    """

    def __init__(
        self,
        session: str = "default",
        *,
        user: str = "default",
        agent: str = "default",
        store: str | Path | Store | MemoryStore | None = None,
        budget: int | None = None,
        settings: MemosSettings | None = None,
        guard: Guard | GuardFn | None = None,
        summarizer: Summarizer | None = None,
        extractor: FactExtractor | None = None,
        counter: TokenCounter | None = None,
        on_event: Callable[[PagingEvent], None] | None = None,
        archive: str | Path | ArchiveBackend | None = None,
        embedder: Embedder | Callable[[list[str]], Any] | None = None,
        embedding_model_dir: str | Path | None = None,
        llm: LLMConfig | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
    ) -> None:
        settings = settings if settings is not None else MemosSettings.from_env()
        if budget is not None:
            settings = replace(settings, budget_tokens=budget)
        self.settings = settings
        self.namespace = validate_namespace((user, agent, session))
        self.scope = scope_key(self.namespace, settings.share)
        self._session_key = namespace_key(self.namespace)
        self._store_hold = ""  # how this Memory holds its store: 'shared', 'wrapped' or '' (the caller's)
        if isinstance(store, MemoryStore):
            self.store: MemoryStore = store
        elif isinstance(store, Store):
            self.store, self._store_hold = MemoryStore(store.engine), "wrapped"
        else:
            self.store, self._store_hold = MemoryStore.shared(store), "shared"
        self.counter = counter or default_counter(settings.model)
        self._references = ReferenceGuard(settings.reference_turns)
        if guard is None:
            guard = RecencyGuard(settings.keep_recent_units) & PinGuard() & ConstraintGuard() & self._references
        self.guard: Guard = ToolChainGuard() & as_guard(guard)
        # When the budget cannot be met otherwise, only in-flight chains, pins and the
        # newest unit hold: recency and custom KEEP rules give way.
        self._last_resort: Guard = ToolChainGuard() & RecencyGuard(1) & PinGuard() & ConstraintGuard()
        self.llm = llm if llm is not None else LLMConfig.from_env()
        # user messages are read as they arrive, by a RuleExtractor: the one given as
        # ``extractor``, else one whose rule detector is the LLM (when configured) or the classifier
        self._rules = extractor if isinstance(extractor, RuleExtractor) else RuleExtractor()
        if self.llm is not None:
            client = make_client(self.llm)
            if extractor is None:
                self._rules = RuleExtractor(detector=LLMRuleJudge(self.llm, client))
            summarizer = summarizer or LLMSummarizer(self.llm, client)
            extractor = extractor or LLMFactExtractor(self.llm, client)
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer(self.counter)
        self.extractor: FactExtractor = extractor or RuleExtractor()
        self.cold: ColdTier = self.store.cold(self.scope)
        self.on_event = on_event
        self._archive_spec = archive
        self._embedder_spec = embedder
        self._model_dir = embedding_model_dir
        # Chroma and the embedding model are opened on first dense use, not here.
        if archive is None and embedder is None and embedding_model_dir is None:
            self.archival: ArchivalTier = self.store.archive(self.scope, background=settings.background_indexing)
        else:
            self.archival = ArchivalTier(self.store.engine, self.scope, self._make_backend, self._make_embedder,
                                         indexer=self.store.indexer if settings.background_indexing else None)
        self._promoted: list[Hit] = []
        self._pending: Future[_DemotionPlan] | None = None
        self._own_tools_tokens = self.counter.count_tools(TOOLS)
        self._default_tools_tokens = self._own_tools_tokens
        self._default_tools_tokens = self._count_tools(tools)
        self._tools_tokens = self._default_tools_tokens  # the tools the last context() was told about
        self._pinned_shown: dict[tuple[Any, ...], frozenset[int]] = {}  # fact ids each cached pinned section shows
        self._render_cache: dict[tuple[str, int, bool], tuple[dict[str, Any], int]] = {}
        self._section_cache: dict[tuple[Any, ...], tuple[dict[str, Any] | None, int]] = {}
        self._superseded_cache: tuple[int, list[str]] | None = None
        self._load()
        self.store.attach(self)

    # -- state ---------------------------------------------------------------------

    def _load(self) -> None:
        self._system: list[Message] = []
        self._hot: list[Message] = []
        self._pinned: list[Message] = []
        self._compacted: set[str] = set()
        self._hot_cache: tuple[tuple[Any, ...], int] | None = None
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
        summary = self.store.latest_summary(self.namespace)
        self._summary: SummaryRow | None = summary if summary is not None and summary.text else None
        events = [e for e in self.store.compactions(self.namespace) if e.rolled_back_by is None]
        self._demotions = sum(1 for e in events if e.kind == "hard" and e.summary_version is not None)
        self._soft = sum(1 for e in events if e.kind == "soft")
        self._hot_cache = None
        self._section_cache.clear()
        self._render_cache.clear()
        self._promoted = []
        # whether recall can find anything the prompt does not already hold: every message is
        # archived as it arrives, but while all of them are hot a search would find nothing new
        self._recall_possible = bool(events or self._pinned) or self.archival.has_items_beyond(self._session_key)

    def reload(self) -> None:
        """Read this session's state from the store again (after a deletion, or a change made
        by another process) and drop every cached rendering."""
        self._finish_pending(wait=True)
        self._load()
        self.cold.invalidate_caches()

    def _pending_calls(self) -> list[str]:
        if not self._hot:
            return []
        units = group_units(self._hot[-64:])
        last = units[-1] if units else None
        if last is None or not last.in_flight:
            return []
        answered = {m.data.get("tool_call_id") for m in last.messages[1:]}
        return [c for c in last.messages[0].tool_call_ids if c not in answered]

    def _make_backend(self) -> ArchiveBackend:
        spec = self._archive_spec
        if spec is None:
            return self.store.backend()  # type: ignore[return-value]
        return spec if isinstance(spec, ArchiveBackend) else default_backend(self.store, spec)

    def _make_embedder(self) -> Embedder | None:
        spec = self._embedder_spec
        if spec is None:
            return load_embedder(self._model_dir) if self._model_dir is not None else self.store.embedder()
        if isinstance(spec, Embedder):
            return spec
        return ChromaEmbedder(spec)

    # -- public API ----------------------------------------------------------------

    def add(self, messages: Any) -> list[Message]:
        """Log one message or a list of them (OpenAI chat format) and page if needed.

        The messages are validated first, as a batch: on a bad one an
        :class:`~memos.errors.InvalidMessage` (a ``ValueError``) names the problem and
        nothing is stored. Returns the logged messages with their ids and sequence numbers.
        """
        batch = validate_batch(messages, self._pending_calls(), self._call_ids)
        items = [(m, self.counter.count_message(m), False) for m in batch]

        def archive(session: Any, logged: list[Message]) -> None:
            # every message is the user's recall memory from the moment it is logged, in the
            # same transaction (crash-safe: the vectors follow through the archive's outbox)
            self.archival.stage(session, [self._archive_item([m], "message", f"unit:{m.id}")
                                          for m in logged if m.role not in _SYSTEM_ROLES])

        logged = self.store.append(self.namespace, items, self._next_seq, also=archive)
        self.archival.schedule()
        for m in logged:
            self._call_ids.update(m.tool_call_ids)
            (self._system if m.role in _SYSTEM_ROLES else self._hot).append(m)
        self._next_seq = logged[-1].seq + 1
        self._count += len(logged)
        users = [m for m in logged if m.role == "user"]
        if users:
            self._promoted = []
            cands, invs, _ = self._extract(users, rules_only=True)
            self.cold.apply(cands, invs)
        self._page(0, None, strict=False)
        return logged

    def context(self, query: str | None = None, *, tools: Sequence[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """The prompt to send now, within the budget, in OpenAI chat format.

        With ``query``, the prompt is assembled as if ``query`` were the next user
        message, which is appended last; it is not stored. ``tools`` are the function
        schemas the request will carry: their tokens count against the budget too, so
        the messages and the tools together fit it. By default the ``tools`` given to
        the constructor are counted, else memos' own (:meth:`tools`); pass ``tools=[]``
        when the request carries none.
        Raises :class:`~memos.errors.BudgetExceeded` when content that may not be evicted
        (system messages, explicit pins, the newest units, the tool schemas) does not fit;
        rules pinned automatically never cause it.
        """
        self._tools_tokens = self._count_tools(tools)
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
        rooms = self._page(extra, query, strict=True)
        return self._build(query_msg, query, rooms)

    def _count_tools(self, tools: Sequence[dict[str, Any]] | None) -> int:
        if tools is None:
            return self._default_tools_tokens
        if not isinstance(tools, (list, tuple)) or not all(isinstance(t, dict) for t in tools):
            raise ValueError("tools must be a list of function schemas (dicts), as sent in the request")
        return self.counter.count_tools(tools)

    def compactions(self) -> list[CompactionRow]:
        """The compaction log of this session, oldest first: each soft compaction, demotion
        and rollback with tokens before and after, the message ids it moved, the summary
        version it wrote, the facts it changed (JSON in ``facts``), which summariser and
        extractor ran, and how long it took. Events a rollback undid have ``rolled_back_by`` set."""
        self._finish_pending(wait=True)
        return self.store.compactions(self.namespace)

    def rollback(self, event_id: int) -> Rollback:
        """Restore the hot tier and the summary as they were before compaction event
        ``event_id`` (see :meth:`compactions`); later events are undone too. The demoted
        messages come back into the hot tier, the summary before the event becomes the newest
        version, facts the events added are invalidated and values they replaced are current
        again. Archived copies stay in the archive. Raises ``KeyError`` for an event this
        session does not have (or one already rolled back)."""
        if isinstance(event_id, bool) or not isinstance(event_id, int):
            raise TypeError(f"event_id must be an int, got {type(event_id).__name__}")
        self._finish_pending(wait=True)

        def undo_facts(session: Any, events: list[CompactionRow]) -> None:
            for ev in events:
                self.cold.undo(json.loads(ev.facts or "{}"), session)

        record = self.store.rollback(self.namespace, event_id, also=undo_facts)
        self._load()
        self.cold.version += 1
        undone = json.loads(record.facts)["undone"]
        return Rollback(event_id=record.id or 0, undone=tuple(undone), messages_restored=len(json.loads(record.message_ids)),
                        summary_version=record.summary_version)

    def stats(self) -> MemoryStats:
        """Sizes of the tiers and counts of paging events."""
        hot_tokens = sum(self._unit_tokens(u) for u in group_units(self._hot))
        _, pinned_tokens = self._pinned_section()
        _, summary_tokens = self._summary_section(None)
        facts = self.cold.facts()
        return MemoryStats(
            messages=self._count,
            hot_messages=len(self._hot),
            hot_tokens=hot_tokens,
            pinned_messages=len(self._pinned),
            pinned_tokens=pinned_tokens,
            summary_tokens=summary_tokens,
            summary_version=self._summary.version if self._summary else 0,
            facts=len(facts),
            pinned_facts=sum(1 for f in facts if f.pinned),
            demotions=self._demotions,
            soft_compactions=self._soft,
            context_tokens=self._total(0, None, _Rooms()),
            budget_tokens=self.settings.budget_tokens,
            encoding=self.counter.encoding_name,
        )

    def history(self) -> list[Message]:
        """Every message ever added to this session, in order, read from the log."""
        return [m for m, _, _ in self.store.load_messages(self.namespace)]

    def summary(self) -> str:
        """The current rolling summary ('' before the first demotion)."""
        return self._summary.text if self._summary else ""

    def pin(self, message_id: str | None = None, *, fact_id: int | None = None, text: str | None = None) -> Fact | None:
        """Keep something visible in every context until it is unpinned. Give one of:

        ``message_id``: a logged message. A hot message stays where it is and moves to
        the pinned section when it is demoted; one already demoted comes back pinned.
        ``fact_id``: a fact of the cold tier (returned). ``text``: a new rule, stored as a
        pinned constraint (returned; a rule already stored under the same text is pinned
        instead of added twice).

        Explicit pins always appear; together they must fit the pinned section's cap
        (``settings.pinned_share`` of the budget), else :class:`~memos.errors.PinLimitExceeded`
        is raised here and nothing is pinned.
        """
        target = _one_of(message_id=message_id, fact_id=fact_id, text=text)
        if target == "message_id":
            m = next((x for x in self.history() if x.id == str(message_id)), None)
            if m is None:
                raise ValueError(f"no message with id {message_id!r} in session {self.namespace!r}")
            if not m.pinned:
                self._check_pin_room(f"({m.role}, #{m.seq}) {render_text(m.data)}")
            self._set_pin(str(message_id), True)
            return None
        if target == "fact_id":
            fact = self.cold.get(int(fact_id))  # type: ignore[arg-type]
            if not (fact.pinned and fact.origin == "explicit"):
                self._check_pin_room(fact.line())
            return self.cold.set_pinned(int(fact_id), True, origin="explicit")  # type: ignore[arg-type]
        if not isinstance(text, str) or not text.strip():
            raise ValueError("pin(text=...) needs non-empty text")
        body = " ".join(text.split())
        self._check_pin_room(f"constraint: {body}")
        changes = self.cold.apply([FactCandidate("constraint", fact_key("constraint", body), body, (), self._next_seq - 1,
                                                 pinned=True, origin="explicit")])
        fact = changes[0].fact
        if fact.pinned and fact.origin == "explicit":
            return fact
        return self.cold.set_pinned(int(fact.id), True, origin="explicit")  # type: ignore[arg-type]

    def _check_pin_room(self, line: str) -> None:
        explicit, _ = self._pinned_lines()
        lines = [ln for ln, _ in explicit] + [line]
        needed = self.counter.count_message(pinned_message(lines) or {})
        cap = self.settings.pinned_max_tokens
        if needed > cap:
            raise PinLimitExceeded(needed, cap, f"{len(explicit)} explicit pin(s) already")

    def unpin(self, message_id: str | None = None, *, fact_id: int | None = None) -> None:
        """Undo :meth:`pin` for a message (also one a guard pinned) or a fact; both stay stored."""
        target = _one_of(message_id=message_id, fact_id=fact_id)
        if target == "message_id":
            self._set_pin(str(message_id), False)
        else:
            self.cold.set_pinned(int(fact_id), False)  # type: ignore[arg-type]

    def facts(self, kind: str | None = None, *, include_history: bool = False, query: str | None = None) -> list[Fact]:
        """Facts of the cold tier: current ones (or every version with ``include_history``),
        of one ``kind`` if given; with ``query``, the current facts that match it, best first."""
        if query is not None:
            return self.cold.search(query, limit=50, kinds=[kind] if kind else None)
        return self.cold.facts(kind, include_history=include_history)

    def forget(self, fact_id: int, reason: str = "user request") -> ForgetRecord:
        """Forget a fact everywhere (a deletion request): its value and earlier values, and the
        identifiers in them, are redacted to ``[forgotten]`` in every message, summary and
        archived item of the fact's scope (the keyword index and the vectors are rewritten),
        then the fact and its history are deleted and the database files are scrubbed of the
        deleted bytes. The deletion is recorded (kind, key, a hash of the value, what was
        redacted) and the fact does not come back from the messages it was read from.

        Sessions of the scope open in this process see it at once; one open in another
        process sees it when it next opens (or after :meth:`reload`)."""
        self._finish_pending(wait=True)
        earlier = next((r for r in self.cold.forgotten() if r.fact_id == fact_id), None)
        if earlier is not None:  # forgotten already (with another fact that held the same value)
            return earlier
        chain = self.cold.history(fact_id)
        values = {r.value for r in chain} | {i for r in chain for i in find_identifiers(r.value)}
        erased = self.store.erase(self.scope, sorted(values))
        record = self.cold.forget(fact_id, reason, erased=erased)
        # other facts holding the value (an identifier found in the same sentence) go with it
        needles = [v.lower() for v in values if len(v.strip()) >= 3]
        for f in self.cold.facts(include_history=True):
            if f.id is not None and any(n in f.value.lower() or n in f.key.lower() for n in needles):
                try:
                    self.cold.forget(f.id, reason)
                except ValueError:  # already deleted with an earlier one's history
                    pass
        self.store.scrub()
        return record

    def invalidate(self, fact_id: int) -> Fact:
        """Mark a current fact as revoked; it stays in the history but leaves every context."""
        return self.cold.invalidate(fact_id)

    def archive(self, content: str | None = None, *, message_ids: Sequence[str] | None = None,
                tags: Sequence[str] = ()) -> str:
        """Save ``content`` (a note) or logged messages (``message_ids``, verbatim) to the
        archival tier; returns the archived item's id."""
        tags = [str(t) for t in tags]
        now = time.time()
        if content is not None and message_ids:
            raise ValueError("give content or message_ids, not both")
        if content is not None:
            if not isinstance(content, str) or not content.strip():
                raise ValueError("content must be a non-empty string")
            item = ArchiveItem(id=f"note:{uuid.uuid4().hex}", namespace=self.scope, session=self._session_key,
                               kind="note", text=content, roles="assistant", tags=json.dumps(tags), created_at=now,
                               first_seq=self._next_seq - 1, last_seq=self._next_seq - 1)
        elif message_ids:
            wanted = list(dict.fromkeys(str(i) for i in message_ids))
            found = {m.id: m for m in self.history() if m.id in set(wanted)}
            missing = [i for i in wanted if i not in found]
            if missing:
                raise ValueError(f"unknown message id(s) in this session: {missing}")
            msgs = sorted(found.values(), key=lambda m: m.seq)
            item = self._archive_item(msgs, "excerpt",
                                      "excerpt:" + hashlib.sha256("|".join(wanted).encode()).hexdigest()[:32])
            item.tags = json.dumps(tags)
        else:
            raise ValueError("give content or message_ids")
        with self.store.db() as session:
            self.archival.stage(session, [item])
            session.commit()
        self._recall_possible = True
        self.archival.schedule()
        return item.id

    def retrieve(
        self,
        query: str,
        top_k: int = 5,
        *,
        since: float | None = None,
        until: float | None = None,
        kind: str | None = None,
        roles: Sequence[str] | None = None,
        page: int = 1,
        promote: bool = False,
    ) -> list[Hit]:
        """Search archival memory and facts (dense + keyword, fused by reciprocal rank): this
        session's earlier messages and, with the default scope, the user's past sessions
        (each hit names its ``session``). Messages still in the hot tier are left out.

        ``since``/``until`` are Unix times, ``kind`` an archive kind or ``'fact'``.
        With ``promote``, the hits enter the next prompts' recalled-memory section until
        the next user message.
        """
        if not isinstance(query, str) or not query.strip():
            raise ValueError("query must be a non-empty string")
        if not 1 <= top_k <= 100:
            raise ValueError("top_k must be between 1 and 100")
        if page < 1:
            raise ValueError("page must be >= 1")
        offset = (page - 1) * top_k
        hits: list[Hit] = []
        if kind != "fact":  # what the hot tier holds is in the prompt already
            hits = self.archival.search(query, top_k + offset, since=since, until=until,
                                        kinds=[kind] if kind else None, roles=roles,
                                        exclude_message_ids={m.id for m in self._hot})
        facts: list[Hit] = []
        if kind in (None, "fact") and not roles:
            facts = [_fact_hit(f) for f in self.cold.search(query, limit=top_k + offset)
                     if (since is None or f.valid_from >= since) and (until is None or f.valid_from <= until)]
        by_id = {h.id: h for h in hits + facts}
        fused = rrf([[h.id for h in hits], [h.id for h in facts]])
        ranked = [replace(by_id[i], score=fused[i]) for i in sorted(fused, key=lambda i: -fused[i])]
        result = ranked[offset : offset + top_k]
        if promote:
            known = {h.id for h in self._promoted}
            self._promoted += [h for h in result if h.id not in known]
        return result

    def run_turn(self, client: Any, model: str, user_text: str, **kwargs: Any) -> TurnResult:
        """One user turn against ``client`` (an ``openai.OpenAI``) with the memory tools,
        memory tool calls run in between; see :func:`memos.agent.run_turn` for the options."""
        return run_turn(self, client, model, user_text, **kwargs)

    def tools(self) -> list[dict[str, Any]]:
        """The memory tools (``archive``, ``retrieve``, ``pin``) as OpenAI function schemas."""
        return json.loads(json.dumps(TOOLS))

    def handle_tool_call(self, tool_call: Any) -> dict[str, Any]:
        """Run one memory tool call and return the ``tool`` message to add.

        Accepts the SDK's tool-call objects or their dicts. Whatever is wrong with the
        call comes back as an error result the model can read, never as an exception.
        """
        if hasattr(tool_call, "model_dump") and not isinstance(tool_call, dict):
            tool_call = tool_call.model_dump()
        call_id, name, args = "", "", None
        if isinstance(tool_call, dict):
            call_id = str(tool_call.get("id") or "")
            fn = tool_call.get("function")
            if isinstance(fn, dict):
                name, args = str(fn.get("name") or ""), fn.get("arguments")
        if not name:
            result: dict[str, Any] = {"status": "error", "error": "a tool call needs function.name and function.arguments"}
        else:
            try:
                result = dispatch(self, name, args)
            except Exception as exc:  # a failure inside memos must not end the agent's turn
                result = {"status": "error", "error": f"{name} failed: {type(exc).__name__}: {exc}"}
        return {"role": "tool", "tool_call_id": call_id, "content": json.dumps(result, ensure_ascii=False)}

    def flush(self) -> int:
        """Write every queued archival vector now (dense search then sees all archived items)."""
        total = 0
        while n := self.archival.flush(limit=256):
            total += n
        return total

    def reindex(self) -> int:
        """Rebuild this session's archival vectors from the store; returns how many were written."""
        return self.archival.reindex()

    def close(self) -> None:
        """Finish a demotion in progress and let go of the store: a store this Memory opened
        from a URL is closed with its last session (its indexer stopped, queued vectors kept
        for the next open); a :class:`~memos.MemoryStore` you passed stays open."""
        if self._pending is not None:
            self._finish_pending(wait=True)
        hold, self._store_hold = self._store_hold, ""
        if hold == "shared":
            self.store.release()
        elif hold == "wrapped":
            self.store.close(dispose=False)

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
        for m, _tier, _ in self.store.load_messages(self.namespace):
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
                               self.settings.placeholder_preview_chars)
            data = {"role": "tool", "tool_call_id": data["tool_call_id"], "content": text}
        if m.tokens > cap and (data.get("content") or "") != "":
            marker = f" … [memos: clipped; full text in the memory log as message {m.id}] … "
            body = render_text(data) if not isinstance(data.get("content"), str) else data["content"]
            overhead = self.counter.count_message({**data, "content": ""})
            clipped = None
            if m.role == "tool":  # a JSON result stays JSON the model can parse
                clipped = clip_json(body, max(0, cap - overhead), self.counter.count,
                                    f"clipped; full text in the memory log as message {m.id}")
            data = {**data, "content": clipped or self.counter.clip(body, max(0, cap - overhead), marker)}
        out = (data, self.counter.count_message(data) if data is not m.data else m.tokens)
        self._render_cache[key] = out
        return out

    def _render_unit(self, unit: Unit, names: dict[str, str]) -> list[tuple[dict[str, Any], int]]:
        cap = self._message_cap(len(unit.messages))
        return [self._render(m, cap, names) for m in unit.messages]

    def _unit_tokens(self, unit: Unit) -> int:
        return sum(t for _, t in self._render_unit(unit, tool_names([unit])))

    def _pinned_section(self, query: str | None = None, room: int | None = None) -> tuple[dict[str, Any] | None, int]:
        """The pinned section: every explicit pin (``pin()``), then the rules pinned
        automatically, ranked by relevance to the latest user message (or ``query``), then by
        recency, within the section's cap (``room``, when smaller). Rules past the cap stay
        facts, shown in the facts section when relevant; a line tells the agent so."""
        key = self._pinned_key(query, room)
        hit = self._section_cache.get(key)
        if hit is not None:
            return hit
        text = self._relevance_text(query)
        cap = self.settings.pinned_max_tokens if room is None else min(room, self.settings.pinned_max_tokens)
        explicit, auto = self._pinned_lines()
        wanted = content_terms(text)
        # relevance to what is asked (capped, so one shared word does not outrank a sure rule),
        # how sure the detector was, then recency; a line nearly the same as one already chosen
        # waits (twenty "look up record N please" are not twenty rules)
        ranked = sorted(auto, key=lambda a: (-(min(2, len(wanted & content_terms(a[0]))) + 2 * a[3]), -a[2]))
        lines = [line for line, _ in explicit]
        shown = {fid for _, fid in explicit if fid is not None}
        used = self.counter.count_message(pinned_message(lines or ["x"]) or {})
        chosen: list[frozenset[str]] = []
        distinct, later = [], []
        for entry in ranked:
            terms = content_terms(entry[0])
            if any(len(terms & c) >= 0.6 * max(1, len(terms | c)) for c in chosen):
                later.append(entry)
            else:
                chosen.append(terms)
                distinct.append(entry)
        taken: list[tuple[str, int | None]] = []
        for line, fid, _seq, _conf in distinct + later:
            cost = self.counter.count(line) + 2
            if used + cost <= cap:
                taken.append((line, fid))
                used += cost
        while True:  # the line telling the agent about the rest must fit too
            skipped = len(auto) - len(taken)
            notice = [f"+{skipped} more stated rule(s), kept as facts: shown when relevant, found by `retrieve`"]
            notice = notice if skipped else []
            msg = pinned_message(lines + [ln for ln, _ in taken] + notice)
            out = (msg, self.counter.count_message(msg) if msg else 0)
            if not skipped or out[1] <= max(cap, used) or not taken:
                break
            taken.pop()
        shown.update(fid for _, fid in taken if fid is not None)
        if len(self._pinned_shown) > 16:
            self._section_cache = {k: v for k, v in self._section_cache.items() if k[0] != "pinned"}
            self._pinned_shown.clear()
        self._section_cache[key] = out
        self._pinned_shown[key] = frozenset(shown)
        return out

    def _pinned_key(self, query: str | None, room: int | None) -> tuple[Any, ...]:
        return ("pinned", self.cold.version, tuple((m.id, m.pinned) for m in self._pinned),
                self._relevance_text(query), room)

    def _pinned_lines(self) -> tuple[list[tuple[str, int | None]], list[tuple[str, int | None, int, float]]]:
        """Explicit pins (line, fact id) and automatic ones (line, fact id, seq, confidence),
        without repeats: a message the user pinned wins over a fact holding the same text."""
        explicit: list[tuple[str, int | None]] = []
        auto: list[tuple[str, int | None, int, float]] = []
        seen: set[str] = set()
        cap = self._message_cap(1)

        def message_line(m: Message) -> tuple[str, str] | None:
            sentences = [] if m.pinned else [c for c in extract_constraints(m.text) if not self.cold.knows(c)]
            body = " ".join(sentences) if sentences else render_text(m.data)
            if body.lower() in seen:
                return None
            seen.add(body.lower())
            if self.counter.count(body) > cap:
                body = self.counter.clip(body, cap, f" … [clipped; message {m.id}] … ")
            return body, f"({m.role}, #{m.seq}) {body}"

        for m in self._pinned:
            if m.pinned and (got := message_line(m)) is not None:
                explicit.append((got[1], None))
        for f in self.cold.facts(pinned=True):
            value = f.value.lower()
            if value in seen:
                continue
            seen.add(value)
            if f.origin == "explicit":
                explicit.append((f.line(), f.id))
            else:
                auto.append((f.line(), f.id, f.source_seq, f.confidence))
        for m in self._pinned:
            if not m.pinned and (got := message_line(m)) is not None:
                auto.append((got[1], None, m.seq, 0.5))
        return explicit, auto

    def _shown_pins(self, query: str | None, room: int | None) -> frozenset[int]:
        """Ids of the pinned facts the pinned section shows for this query."""
        key = self._pinned_key(query, room)
        if key not in self._pinned_shown:
            self._section_cache.pop(key, None)
            self._pinned_section(query, room)
        return self._pinned_shown[key]

    def _fit_section(self, make: Callable[[Sequence[str]], dict[str, Any] | None], lines: list[str],
                     limit: int) -> tuple[dict[str, Any] | None, int]:
        """The section message for ``lines``, dropping its last lines until its real token
        count is within ``limit`` (line costs added up can differ from the whole by a token or two)."""
        while lines:
            msg = make(lines)
            tokens = self.counter.count_message(msg) if msg else 0
            if tokens <= limit:
                return msg, tokens
            lines = lines[:-1]
        return None, 0

    def _relevance_text(self, query: str | None) -> str:
        if query is not None:
            return query
        for m in reversed(self._hot):
            if m.role == "user":
                return m.text
        return ""

    def _facts_section(self, query: str | None, room: int | None, pinned_room: int | None = None
                       ) -> tuple[dict[str, Any] | None, int]:
        text = self._relevance_text(query)
        shown = self._shown_pins(query, pinned_room)
        key = ("facts", self.cold.version, text, room, shown)
        hit = self._section_cache.get(key)
        if hit is not None:
            return hit
        limit = self.settings.facts_max_tokens if room is None else min(room, self.settings.facts_max_tokens)
        chosen: list[str] = []
        msg = None
        tokens = 0
        if limit > 40:
            hits = [f for f in self.cold.search(text, limit=20) if f.id not in shown] if text else []
            seen: set[int | None] = set()
            used = self.counter.count_message(facts_message(["x"]) or {})
            for f in hits:
                if f.id in seen:
                    continue
                seen.add(f.id)
                line = f.line()
                cost = self.counter.count(line) + 2
                if used + cost > limit:
                    continue
                chosen.append(line)
                used += cost
            msg, tokens = self._fit_section(facts_message, chosen, limit)
        out = (msg, tokens)
        if len(self._section_cache) > 128:
            self._section_cache.clear()
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
        if room is not None and out[1] > room:
            out = self._fit_section(lambda lines: summary_message("\n".join(lines), self._summary.through_seq)  # type: ignore[union-attr]
                                    if lines else None, text.splitlines(), room)
        if len(self._section_cache) > 64:
            self._section_cache.clear()
        self._section_cache[key] = out
        return out

    def _referenced_hits(self, hot: set[str]) -> list[Hit]:
        """Archived items holding what the assistant quoted in its last turns (an id, a time)
        that no other hot message holds any more: the agent went back to something that has
        left the hot tier, so it comes back, verbatim, as recalled memory."""
        recent = [m for m in reversed(self._hot) if m.role == "assistant"][: self.settings.reference_turns]
        if not recent or not self._recall_possible:
            return []
        quoted: set[str] = set()
        for m in recent:
            quoted |= references(m.text_and_calls)
        others = " ".join(m.text for m in self._hot if m.role != "assistant")
        hits: list[Hit] = []
        for ref in sorted(r for r in quoted if r not in others)[:4]:
            hits += self.archival.search(ref, 2, mode="keyword", exclude_message_ids=hot)
        return [h for h in hits if any(r in h.text for r in quoted)]

    def _recall_section(self, query: str | None, room: int) -> tuple[dict[str, Any] | None, int]:
        text = self._relevance_text(query) if self.settings.auto_recall else ""
        if room <= 40:
            return None, 0
        hot_ids = tuple(m.id for m in self._hot)
        version = self.archival.version
        key = ("recall", version, self.cold.version, text, tuple(h.id for h in self._promoted),
               len(hot_ids), hot_ids[-1] if hot_ids else "", room)
        hit = self._section_cache.get(key)
        if hit is not None:
            return hit
        # recall has its share of the budget, and the part of the hot tier's share that the
        # hot tier does not use (a new session's prompt is mostly what it recalls)
        limit = min(room, self.settings.recall_max_tokens + max(0, self.settings.hot_target_tokens - self._hot_tokens()))
        hits = list(self._promoted) + self._referenced_hits(set(hot_ids))
        if not text and not hits:
            return None, 0
        if text and self._recall_possible:
            hits += self.archival.search(text, self.settings.recall_top_k, exclude_message_ids=set(hot_ids),
                                         min_similarity=self.settings.recall_min_similarity)
        seen: set[str] = set()
        hot = set(hot_ids)
        superseded = self._superseded()
        used = self.counter.count_message(recall_message(["x"]) or {})
        per_item = max(24, limit // 3)
        chosen: list[tuple[Hit, str]] = []
        groups: set[str] = set()
        for h in hits:
            # an earlier summary version restates messages the archive holds verbatim: retrieve finds it
            if h.id in seen or (h.message_ids and set(h.message_ids) <= hot) or h.kind == "summary":
                continue
            seen.add(h.id)
            body = _recall_body(h, " ".join(h.text.split()))
            if self.counter.count(body) > per_item:
                body = self.counter.clip(body, per_item, " … ")
            if outdated := [v for v in superseded if v in body.lower()]:  # quoted history, never a current value
                body += f" [outdated: {', '.join(outdated[:2])} was corrected later]"
            group = _recall_group(h, self._session_key)
            cost = self.counter.count(body) + 2 + (0 if group in groups else self.counter.count(group) + 2)
            if used + cost > limit:
                continue
            groups.add(group)
            chosen.append((h, body))
            used += cost
        lines = _render_recall(chosen, self._session_key)
        out = self._fit_section(recall_message, lines, limit)
        if len(self._section_cache) > 128:
            self._section_cache.clear()
        self._section_cache[key] = out
        return out

    def _superseded(self) -> list[str]:
        """Values of the scope that a later value replaced (lower-cased), cached per fact version."""
        if self._superseded_cache is None or self._superseded_cache[0] != self.cold.version:
            values = [v.lower() for v in self.cold.superseded_values(max_chars=120) if len(v) >= 4]
            self._superseded_cache = (self.cold.version, values)
        return self._superseded_cache[1]

    def _hot_tokens(self) -> int:
        # compaction only adds to the set while the hot tier keeps its first message, so its size is enough
        key = (len(self._hot), self._hot[0].id if self._hot else "", self._hot[-1].id if self._hot else "",
               len(self._compacted))
        if self._hot_cache is not None and self._hot_cache[0] == key:
            return self._hot_cache[1]
        total = sum(self._unit_tokens(u) for u in group_units(self._hot))
        self._hot_cache = (key, total)
        return total

    def _total(self, extra: int, query: str | None, rooms: _Rooms) -> int:
        system = sum(m.tokens for m in self._system)
        _, pinned = self._pinned_section(query, rooms.pinned)
        _, facts = self._facts_section(query, rooms.facts, rooms.pinned)
        _, summary = self._summary_section(rooms.summary)
        _, recall = self._recall_section(query, _recall_room(rooms))
        return system + pinned + facts + summary + recall + self._hot_tokens() + extra + REPLY_PRIMING

    def _build(self, query_msg: dict[str, Any] | None, query: str | None, rooms: _Rooms) -> list[dict[str, Any]]:
        """The prompt from sections computed once each; the pressure notice and then the
        recalled memory take only the room the others leave."""
        units = group_units(self._hot)
        names = tool_names(units)
        rendered = [r for u in units for r in self._render_unit(u, names)]
        pinned, pinned_t = self._pinned_section(query, rooms.pinned)
        facts, facts_t = self._facts_section(query, rooms.facts, rooms.pinned)
        summary, summary_t = self._summary_section(rooms.summary)
        budget = self.settings.budget_tokens
        base = (sum(m.tokens for m in self._system) + pinned_t + facts_t + summary_t + sum(t for _, t in rendered)
                + (self.counter.count_message(query_msg) if query_msg else 0) + REPLY_PRIMING + self._tools_tokens)
        notice = None
        # pressure is measured against the room paging works in (the budget less the recall
        # reserve), so the notice comes before a demotion, whatever recall adds afterwards
        paged = budget * (1.0 - (self.settings.recall_reserve if self.settings.auto_recall else 0.0))
        if self.settings.pressure_notice and base > paged * self.settings.warning_threshold:
            notice = pressure_message(min(1.0, base / paged))
            if base + self.counter.count_message(notice) > budget:
                notice = None
        room = budget - base - (self.counter.count_message(notice) if notice else 0)
        recalled, _ = self._recall_section(query, max(0, min(_recall_room(rooms), room)))
        out = assemble(
            system=[m.data for m in self._system],
            pinned=pinned,
            facts=facts,
            summary=summary,
            recalled=recalled,
            hot=[d for d, _ in rendered],
            query=query_msg,
            notice=notice,
        )
        return [copy.deepcopy(d) if ("tool_calls" in d or isinstance(d.get("content"), list)) else dict(d) for d in out]

    # -- paging --------------------------------------------------------------------

    def _page(self, extra: int, query: str | None, *, strict: bool) -> _Rooms:
        """Compact and demote until the prompt fits; returns the room of the optional
        sections. Recalled memory never causes paging: it fills the room left at the end.
        When the prompt must shrink, relevant facts give way first, then the summary."""
        s = self.settings
        extra += self._tools_tokens
        self._finish_pending(wait=False)
        rooms = _Rooms(recall=0)
        total = self._total(extra, query, rooms)
        if total > s.budget_tokens and self._pending is not None:
            self._finish_pending(wait=True)  # the prompt cannot wait for the background demotion
            total = self._total(extra, query, rooms)
        # With auto-recall, the thresholds apply to the budget less the recall reserve.
        scale = 1.0 - (s.recall_reserve if s.auto_recall else 0.0)
        soft, hard, hot_target = int(s.soft_tokens * scale), int(s.hard_tokens * scale), int(s.hot_target_tokens * scale)
        if total > soft:
            self._soft_compact(total - soft)
            total = self._total(extra, query, rooms)
        if total > hard:
            hot = self._hot_tokens()
            # Down to the hot target, or lower when the other sections would leave the
            # context above the soft threshold (so the next turn does not demote again).
            self._demote(max(0, min(hot_target, soft - (total - hot))))
            total = self._total(extra, query, rooms)
        if total > s.budget_tokens:
            for guard in (self.guard, self._last_resort):
                self._demote(max(0, s.budget_tokens - (total - self._hot_tokens())), guard)
                total = self._total(extra, query, rooms)
                if total <= s.budget_tokens:
                    break
        if total > s.budget_tokens:
            _, facts = self._facts_section(query, None)
            rooms = _Rooms(recall=0, facts=max(0, facts - (total - s.budget_tokens)))
            total = self._total(extra, query, rooms)
        if total > s.budget_tokens:
            _, summary = self._summary_section(None)
            rooms = _Rooms(recall=0, facts=0, summary=max(0, summary - (total - s.budget_tokens)))
            total = self._total(extra, query, rooms)
        if total > s.budget_tokens:  # automatic pins give way too; explicit ones never do
            _, pinned = self._pinned_section(query, None)
            rooms = replace(rooms, pinned=max(0, pinned - (total - s.budget_tokens)))
            total = self._total(extra, query, rooms)
        if total > s.budget_tokens:
            if strict:
                system = sum(m.tokens for m in self._system)
                pinned = self._pinned_section(query, rooms.pinned)[1]
                raise BudgetExceeded(
                    total, s.budget_tokens,
                    f"system {system}, explicit pins {pinned}, tool schemas {self._tools_tokens}, "
                    f"hot tier that guards keep {self._hot_tokens()}",
                )
            return rooms
        return replace(rooms, recall=None if strict else 0, recall_room=s.budget_tokens - total)

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

        # a result the assistant is still acting on (it quoted it in its last turns) keeps its full text
        ids = find_soft_compactions(units, tokens_to_free=tokens_to_free, keep_recent_units=self.settings.keep_recent_units,
                                    already=self._compacted, saving=saving,
                                    protected=lambda i: self._references(units[i], GuardContext(units, i)) >= Verdict.HOLD)
        if not ids:
            return
        start = time.perf_counter()
        before = self._total(0, None, _Rooms())
        # what the placeholders hide goes to the cold tier first (task state, identifiers)
        chosen = set(ids)
        hidden = [m for u in units if any(m.id in chosen for m in u.messages)
                  for m in u.messages if m.id in chosen or m.tool_call_ids]
        cands, invs, _ = self._extract(hidden)
        known = "\n".join(c.key + "\n" + c.value for c in cands)
        cands += identifier_facts([message_source(m) for m in hidden if m.id in chosen], "", known)
        self._compacted.update(ids)
        after = self._total(0, None, _Rooms())
        by_call = {c: u.messages[0] for u in units for c in u.messages[0].tool_call_ids}
        items = [self._archive_item([by_call[str(m.data.get("tool_call_id"))], m], "tool_result", f"result:{m.id}")
                 for m in hidden if m.id in chosen and str(m.data.get("tool_call_id")) in by_call]

        def write(session: Any) -> dict[str, Any]:
            changes = self.cold.apply(cands, invs, session=session)
            self.archival.stage(session, items)
            return fact_log(changes)

        try:
            self.store.compact(self.namespace, ids, before, after, also=write)
        except Exception:
            self._load()
            self.cold.invalidate_caches()
            raise
        self._recall_possible = True
        self.archival.schedule()
        self._soft += 1
        self._emit(PagingEvent("soft", before, after, len(ids), 0, None, "placeholder",
                               (time.perf_counter() - start) * 1000))

    def _warm_messages(self) -> list[Message]:
        """The newest demoted messages a full re-summary reads (at most ``resummary_window``)."""
        rows = self.store.warm_tail(self.namespace, self.settings.resummary_window)
        return [m for m in rows if m.role not in _SYSTEM_ROLES]

    def _extract(self, messages: Sequence[Message], *, rules_only: bool = False
                 ) -> tuple[list[FactCandidate], list[Invalidation], str]:
        """Facts from ``messages``: the rules read new user messages at once (cheap, so
        constraints are pinned before the next prompt); the configured extractor reads
        what leaves the hot tier, and the rules take over when it fails."""
        if rules_only or isinstance(self.extractor, RuleExtractor):
            found = self._rules.extract([m for m in messages if rules_only or m.role != "user"])
            return list(found.candidates), list(found.invalidations), "rules"
        try:
            found = self.extractor.extract(messages, self.cold.facts())
            name = getattr(self.extractor, "name", type(self.extractor).__name__)
        except Exception as exc:
            found = self._rules.extract([m for m in messages if m.role != "user"])
            name = f"rules (fallback: {_reason(exc)})"
        return list(found.candidates), list(found.invalidations), name

    def _summarize(self, plan: SummaryPlan) -> tuple[str, str]:
        try:
            text, name = self.summarizer.summarize(plan), getattr(self.summarizer, "name", type(self.summarizer).__name__)
        except Exception as exc:
            if isinstance(self.summarizer, ExtractiveSummarizer):
                raise
            text, name = ExtractiveSummarizer(self.counter).summarize(plan), f"extractive (fallback: {_reason(exc)})"
        return fit_summary(text, self.settings.summary_max_tokens, self.counter), name

    def _demote(self, target: int, guard: Guard | None = None) -> bool:
        """Demote the oldest units down to ``target`` hot tokens. With background
        compaction (and the normal guard) the summary and the facts are prepared on a
        worker thread while the units stay hot; the result is applied on a later call."""
        if self._pending is not None:
            if guard is None and not self._pending.done():
                return False  # one demotion at a time; the units it takes are still hot
            self._finish_pending(wait=True)
        units = group_units(self._hot)
        cut = find_cut_point(units, target_tokens=target, guard=guard or self.guard, unit_tokens=self._unit_tokens,
                             known=self.cold.knows, hold_limit=self.settings.hot_target_tokens // 2)
        if cut.empty:
            return False
        if guard is None and sum(self._unit_tokens(u) for u in cut.demote) < _MIN_DEMOTION_TOKENS and not cut.pin:
            return False  # a summary line costs about what a crumb frees; wait until there is more to move
        before = self._total(0, None, _Rooms())
        if self.settings.background_compaction and guard is None:
            self._pending = self.store.submit(self._plan_demotion, cut, units, before)
            return True
        self._apply_demotion(self._plan_demotion(cut, units, before))
        return True

    def _finish_pending(self, *, wait: bool) -> None:
        """Apply a background demotion once it is ready (or wait for it)."""
        pending = self._pending
        if pending is None or (not wait and not pending.done()):
            return
        self._pending = None
        self._apply_demotion(pending.result())

    def _plan_demotion(self, cut: CutPoint, units: list[Unit], before: int) -> _DemotionPlan:
        """Everything a demotion writes, computed without changing any state (LLM calls happen here)."""
        start = time.perf_counter()
        segment = [m for u in cut.demote for m in u.messages]
        pinned = [m for u in cut.pin for m in u.messages]
        text: str | None = None
        kind = ""
        summarizer = ""
        old_summary = self._summary
        through = old_summary.through_seq if old_summary else -1
        old_text = old_summary.text if old_summary else ""
        if segment:
            plan = prepare_summary(
                previous=old_text or None,
                segment=segment,
                demotion_number=self._demotions + 1,
                full_every=self.settings.full_resummary_every,
                max_tokens=self.settings.summary_max_tokens,
                originals=lambda: sorted(self._warm_messages() + segment, key=lambda m: m.seq),
                superseded=self.cold.superseded_values(max_chars=120),
            )
            text, summarizer = self._summarize(plan)
            kind, through = plan.kind, max(through, plan.through_seq)
        # facts from what leaves the hot tier (user messages were read when they arrived)
        cands, invs, extractor = self._extract(segment + pinned)
        new_text = text if text is not None else old_text
        planned = "\n".join(c.key + "\n" + c.value for c in cands)
        known = lambda ident: ident in planned or self.cold.has_key(ident)  # noqa: E731
        sources = [message_source(m) for m in segment]
        if old_text:
            sources.append((old_text, (), through))
        cands += identifier_facts(sources, new_text, known)
        return _DemotionPlan(cut=cut, segment=segment,
                             pinned=pinned, text=text, kind=kind, summarizer=summarizer, extractor=extractor,
                             through=through, old_summary=old_summary, candidates=cands, invalidations=invs,
                             tokens_before=before, started=start)

    def _apply_demotion(self, p: _DemotionPlan) -> None:
        """Move the planned units out of the hot tier and write the demotion in one transaction."""
        removed = p.cut.ids
        compacted_before = set(self._compacted)
        self._hot = [m for m in self._hot if m.id not in removed]
        self._compacted -= removed
        self._pinned = sorted(self._pinned + p.pinned, key=lambda m: m.seq)
        if p.text is not None:
            version = p.old_summary.version + 1 if p.old_summary else 1
            self._summary = SummaryRow(namespace="", version=version, text=p.text, tokens=self.counter.count(p.text),
                                       through_seq=p.through, kind=p.kind, created_at=0.0)
        # a chain whose results were all archived at soft compaction is covered by those items
        # single messages were archived as they arrived (the id is the same, so a session logged
        # before that is covered too); a tool chain is archived whole unless its results were at
        # soft compaction
        items = [self._archive_item(list(u.messages), "tool_chain" if u.is_tool_chain else "message",
                                    f"{'chain' if u.is_tool_chain else 'unit'}:{u.messages[0].id}")
                 for u in p.cut.demote + p.cut.pin
                 if not (u.is_tool_chain and all(m.id in compacted_before for m in u.messages[1:]))]
        if p.text is not None and p.old_summary is not None:
            items.append(ArchiveItem(id=f"summary:{self._session_key}:v{p.old_summary.version}",
                                     namespace=self.scope, session=self._session_key, kind="summary",
                                     text=p.old_summary.text, first_seq=0, last_seq=p.old_summary.through_seq,
                                     roles="system", created_at=p.old_summary.created_at or time.time()))

        def write_facts(session: Any) -> dict[str, Any]:
            changes = self.cold.apply(p.candidates, p.invalidations, session=session)
            self.archival.stage(session, items)
            return fact_log(changes)

        after = self._total(0, None, _Rooms())
        try:
            row = self.store.demote(
                self.namespace,
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
            self._load()  # the store is the truth: nothing of this demotion was written
            self.cold.invalidate_caches()
            raise
        if row is not None:
            self._summary = row
            self._demotions += 1
        self._recall_possible = True
        self.archival.schedule()
        self._render_cache = {k: v for k, v in self._render_cache.items() if k[0] not in removed}
        self._emit(PagingEvent("hard", p.tokens_before, after, len(p.segment), len(p.pinned),
                               row.version if row else None, p.summarizer, (time.perf_counter() - p.started) * 1000))

    def _archive_item(self, messages: list[Message], kind: str, item_id: str) -> ArchiveItem:
        return _archive_item(self.scope, self._session_key, messages, kind, item_id)

    def _emit(self, event: PagingEvent) -> None:
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


@dataclass(frozen=True)
class _Rooms:
    """Tokens left to the optional sections; None means their own cap."""

    recall: int | None = None
    facts: int | None = None
    summary: int | None = None
    pinned: int | None = None  # room of the automatic pins
    recall_room: int = 0  # tokens left for recalled memory once everything else is placed


def _one_of(**options: Any) -> str:
    given = [k for k, v in options.items() if v is not None]
    if len(given) != 1:
        raise ValueError(f"give exactly one of {', '.join(options)}; got {', '.join(given) or 'none'}")
    return given[0]


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:200]


def _recall_group(h: Hit, session: str) -> str:
    """The heading a recalled item is listed under: its session (when another one) and day,
    written once for all the items that share them."""
    where = "this session" if not h.session or h.session == session else f"session {h.session.rsplit('/', 1)[-1]}"
    when = time.strftime("%Y-%m-%d", time.gmtime(h.created_at)) if h.created_at > 0 else ""
    return f"[{where}, {when}]" if when else f"[{where}]"


def _recall_body(h: Hit, text: str) -> str:
    """One recalled item as a line: a message or a tool chain as its text (the heading says
    where it came from; retrieve returns the ids), anything else with its kind."""
    if h.source == "fact" or h.kind in ("message", "tool_chain"):
        return text
    where = f"#{h.first_seq}" if h.first_seq == h.last_seq else f"#{h.first_seq}-#{h.last_seq}"
    return f"{h.kind} {where}: {text}"


def _render_recall(chosen: list[tuple[Hit, str]], session: str) -> list[str]:
    """The recalled items grouped under their heading (groups in rank order, items in
    conversation order within a group)."""
    groups: dict[str, list[tuple[Hit, str]]] = {}
    for h, body in chosen:
        groups.setdefault(_recall_group(h, session), []).append((h, body))
    lines: list[str] = []
    for heading, items in groups.items():
        lines.append(heading)
        lines += [f"- {body}" for _, body in sorted(items, key=lambda x: (x[0].first_seq, x[0].last_seq))]
    return lines


def _recall_room(rooms: _Rooms) -> int:
    return rooms.recall_room if rooms.recall is None else min(rooms.recall, rooms.recall_room)


def _archive_item(scope: str, session: str, messages: list[Message], kind: str, item_id: str) -> ArchiveItem:
    body = "\n".join(f"{m.role}: {render_text(m.data)}" if m.role != "tool" else render_text(m.data) for m in messages)
    return ArchiveItem(
        id=item_id,
        namespace=scope, session=session, kind=kind, text=body,
        message_ids=json.dumps([m.id for m in messages]), first_seq=messages[0].seq, last_seq=messages[-1].seq,
        roles=",".join(dict.fromkeys(m.role for m in messages)), created_at=max(m.created_at for m in messages),
    )


def _fact_hit(f: Fact) -> Hit:
    return Hit(id=f"fact:{f.id}", kind="fact", text=f.line(), score=0.0, message_ids=tuple(f.sources),
               first_seq=f.source_seq, last_seq=f.source_seq, roles=(), created_at=f.valid_from, source="fact")
