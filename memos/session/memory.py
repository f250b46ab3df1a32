"""The :class:`Memory` facade: one session's memory, from the log to the prompt.

Data flows one way: :meth:`Memory.add` validates and logs messages (each archived as it is
logged, by :mod:`memos.tiers.archiving`) and they join the session's state (:mod:`memos.tiers.state`); the compactor
(:mod:`memos.paging.compaction`) moves what no longer fits to the pinned section, the rolling
summary, the facts and the archive; :meth:`Memory.context` has the assembler
(:mod:`memos.paging.assembly`) build the prompt, with recalled memory (:mod:`memos.retrieval.recall`).
The facts and the archive belong to the user's scope on a shared
:class:`~memos.MemoryStore`. The parts are built by :func:`memos.session.wiring.wire`; this class
delegates to them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from ..adapters.agent import TurnResult, run_turn
from ..adapters.llm import LLMConfig
from ..adapters.tools import AGENT_TOOLS, handle_tool_call
from ..core.config import MemosSettings
from ..core.messages import Message, clean_text, validate_batch
from ..core.tokens import TokenCounter, default_counter
from ..paging.compaction import PagingEvent
from ..paging.guards import Guard, GuardFn
from ..paging.journal import Rollback, rollback, withdraw
from ..paging.request import Request
from ..paging.stats import ArchiveCounts, MemoryStats, archive_counts, measure
from ..storage.facts import FACT_KINDS
from ..storage.log import CompactionRow, Store, SummaryRow, validate_namespace
from ..storage.schema import in_memory
from ..text.embeddings import Embedder
from ..tiers.archival import ArchivalTier, ArchiveBackend, Hit
from ..tiers.cold import ColdTier, Fact, ForgetRecord
from ..tiers.extract import FactExtractor
from ..tiers.warm import Summarizer
from .store import MemoryStore, scope_key
from .wiring import wire

__all__ = ["Memory", "MemoryStats", "PagingEvent", "Rollback"]

log = logging.getLogger("memos.budget")


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
    server URL, or an :class:`~memos.tiers.archival.ArchiveBackend` (default: the store's,
    from ``MEMOS_CHROMA_URL``, ``MEMOS_CHROMA_PATH``, or a folder beside the SQLite file).
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
        self._store_hold = ""  # how this Memory holds its store: 'shared', 'wrapped' or '' (the caller's)
        if isinstance(store, MemoryStore):
            self.store: MemoryStore = store
        elif isinstance(store, Store):
            self.store, self._store_hold = MemoryStore(store.engine), "wrapped"
        else:
            self.store, self._store_hold = MemoryStore.shared(store), "shared"
        if in_memory(self.store.engine) and (settings.background_indexing or settings.background_compaction):
            # an in-memory database is one connection: memos' own threads do not share it
            settings = self.settings = replace(settings, background_indexing=False, background_compaction=False)
        self.counter = counter or default_counter(settings.model, settings.tokenizer)
        self.llm = llm if llm is not None else LLMConfig.from_env()
        parts = wire(self.namespace, self.scope, self.store, settings, self.counter, llm=self.llm, guard=guard,
                     summarizer=summarizer, extractor=extractor, on_event=on_event, archive=archive, embedder=embedder,
                     embedding_model_dir=embedding_model_dir, tools=tools)
        self.summarizer: Summarizer = parts.summarizer
        self.extractor: FactExtractor = parts.extractor
        self._cold: ColdTier = parts.cold
        self._archival: ArchivalTier = parts.archival
        self.guard: Guard = parts.guard
        self._state, self._recall, self._assembler = parts.state, parts.recall, parts.assembler
        self._pins, self._archiver, self._compactor, self._tools = parts.pins, parts.archiver, parts.compactor, parts.tools
        # the last prompt's request less its query: what add() pages for, and stats() measures
        self._request: Request = parts.request
        self._budget_recorded = False
        self._crowding_told = False
        self._pins_told = False  # whether explicit pins over this session's cap were logged
        self.store.attach(self)

    # -- messages and the prompt ---------------------------------------------------

    def add(self, messages: Any) -> list[Message]:
        """Log one message or a list of them (OpenAI chat format) and page if needed.

        The messages are validated first, as a batch: on a bad one an
        :class:`~memos.core.errors.InvalidMessage` (a ``ValueError``) names the problem and
        nothing is stored. Responses API items are accepted too, a response's output items
        together (``add(response.output)``; see :mod:`memos.core.responses`). Returns the logged
        messages with their ids and sequence numbers.
        """
        self._catch_up()
        batch = validate_batch(messages, self._state.pending_calls(), self._state.call_ids)
        if not batch:  # nothing but reasoning items
            return []
        items = [(m, self.counter.count_message(m), False) for m in batch]
        if not self._budget_recorded:  # what `memos inspect` measures this session against
            self.store.record_budget(self.namespace, self.settings.budget_tokens)
            self._budget_recorded = True
        # each message is archived in the transaction that logs it (crash-safe)
        logged = self.store.append(self.namespace, items, self._state.next_seq, also=self._archiver.logged)
        self._archival.schedule()
        if logged[0].seq == self._state.next_seq:
            self._state.append(logged)
        else:  # another writer logged messages of this session in between: read them too
            self.reload()
        users = [m for m in logged if m.role == "user"]
        if users:
            self._recall.promoted = []
            cands, invs, _ = self._compactor.extract(users, rules_only=True)
            self._cold.apply(cands, invs)
        self._compactor.page(self._request, 0, strict=False)
        return logged

    def context(self, query: str | None = None, *, tools: Sequence[dict[str, Any]] | None = None,
                reserve: int = 0) -> list[dict[str, Any]]:
        """The prompt to send now, within the budget, in OpenAI chat format.

        With ``query``, the prompt is assembled as if ``query`` were the next user
        message, which is appended last; it is not stored (``ValueError`` while the newest
        assistant message's tool calls await their results: the API refuses a user message
        after them). ``tools`` are the function
        schemas the request will carry: their tokens count against the budget too, so
        the messages and the tools together fit it. By default the ``tools`` given to
        the constructor are counted, else memos' own (:meth:`tools`); pass ``tools=[]``
        when the request carries none. ``reserve`` holds back tokens for what the request
        carries beyond these (an agent framework's own instructions, say). The
        memory-pressure notice, which asks the model to call ``archive``, is shown only
        when the tools include memos' ``archive``. When the tools and ``reserve`` take over
        half the budget, one warning is logged (logger ``memos.budget``), as it is when the
        user's explicit pins, set under a larger budget, exceed this session's pinned cap.
        Raises :class:`~memos.core.errors.BudgetExceeded` when content that may not be evicted
        (system messages, explicit pins, the newest units, the tool schemas) does not fit;
        rules pinned automatically never cause it.
        """
        if isinstance(reserve, bool) or not isinstance(reserve, int) or reserve < 0:
            raise ValueError(f"reserve must be a non-negative int of tokens, got {reserve!r}")
        self._catch_up()
        tokens, archive_offered = self._tools.measure(tools)
        req = Request(query=query, tools_tokens=tokens + reserve, archive_offered=archive_offered)
        self._request = replace(req, query=None)
        if 2 * (tokens + reserve) > self.settings.budget_tokens and not self._crowding_told:
            self._crowding_told = True
            log.warning("the tool schemas (%d tokens) and reserve (%d) take over half of the %d-token budget, "
                        "leaving the conversation %d; pass only the tools the agent calls "
                        "(tools=mem.tools(names=['retrieve']) is about half of memos' three) or raise the budget",
                        tokens, reserve, self.settings.budget_tokens,
                        max(0, self.settings.budget_tokens - tokens - reserve))
        if not self._pins_told:
            self._pins_told = True
            if (over := self._pins.over_cap(req)) is not None:
                log.warning("the user's %d explicit pin(s) take %d tokens, over this session's pinned cap of %d "
                            "(pinned_share %.2f of the %d-token budget; set where either was larger): every "
                            "prompt keeps them all, and the conversation gets less room; unpin some "
                            "(mem.unpin(fact_id=...)) or raise the budget", over[0], over[1], over[2],
                            self.settings.pinned_share, self.settings.budget_tokens)
        query_msg, extra = self._assembler.query_message(req)
        rooms, req = self._compactor.page(req, extra, strict=True)
        if req.query_cap is not None:
            query_msg, _ = self._assembler.query_message(req)
        return self._assembler.build(req, query_msg, rooms)

    # -- the session's state -------------------------------------------------------

    def hot(self) -> list[Message]:
        """The messages of the hot tier, oldest first (as they are, before clipping)."""
        return list(self._state.hot)

    def pinned_messages(self) -> list[Message]:
        """Demoted messages shown in the pinned section (pinned by the user or by a guard)."""
        return list(self._state.pinned)

    def is_compacted(self, message_id: str) -> bool:
        """Whether a hot tool result is shown as a placeholder."""
        return message_id in self._state.compacted

    def pending_tool_calls(self) -> list[str]:
        """Ids of the newest assistant message's tool calls still waiting for their results."""
        return self._state.pending_calls()

    def validate(self, messages: Any) -> list[dict[str, Any]]:
        """The messages as :meth:`add` would log them, checked the same way, not stored."""
        return validate_batch(messages, self._state.pending_calls(), self._state.call_ids)

    @property
    def compacting(self) -> bool:
        """Whether a demotion is being prepared in the background (``background_compaction``)."""
        return self._compactor.pending is not None

    def wait(self) -> None:
        """Apply a demotion being prepared in the background, waiting for it if need be."""
        self._compactor.finish_pending(self._request, wait=True)

    def _catch_up(self) -> None:
        """Read the session again when another writer (a second worker process, another
        ``Memory`` on the same session) has logged or taken back messages since this one
        last did: one query for the log's newest sequence number."""
        if self.store.next_seq(self.namespace) != self._state.next_seq:
            self.reload()

    def reload(self) -> None:
        """Read this session's state from the store again (after a deletion, or a change made
        by another process) and drop every cached rendering. A demotion being prepared in
        the background is dropped, not applied: it was planned from what the store held
        before (a forgotten value, a deleted user). :meth:`add` and :meth:`context` do this
        themselves when another writer has logged or taken back messages of the session; a
        ``pin()``, ``unpin()`` or ``clear()`` made elsewhere needs it."""
        self._compactor.discard_pending()
        self._compactor.reload()
        self._cold.invalidate_caches()

    def history(self) -> list[Message]:
        """Every message added to this session, in order, read from the log (those set aside
        by :meth:`clear` included, those taken back by :meth:`pop` not)."""
        return [m for m, _, _ in self.store.load_messages(self.namespace)]

    def summary(self) -> str:
        """The current rolling summary ('' before the first demotion)."""
        return self._state.summary.text if self._state.summary else ""

    def summary_version(self) -> SummaryRow | None:
        """The current summary version's row (text, version, kind, through_seq), or None."""
        return self._state.summary

    def stats(self) -> MemoryStats:
        """Sizes of the tiers and counts of paging events."""
        return measure(self._assembler, self._request, self._cold)

    # -- the compaction journal ----------------------------------------------------

    def compactions(self) -> list[CompactionRow]:
        """The compaction log of this session, oldest first: each soft compaction, demotion
        and rollback with tokens before and after, the message ids it moved, the summary
        version it wrote, the facts it changed (JSON in ``facts``), which summariser and
        extractor ran, and how long it took. Events a rollback undid have ``rolled_back_by`` set."""
        self.wait()
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
        self.wait()
        done = rollback(self.store, self.namespace, self._cold, event_id)
        self._compactor.reload()
        return done

    def clear(self) -> bool:
        """Start this session afresh: its messages and summary are set aside, so the next
        prompt holds only what the user's long-term memory brings (their rules, relevant
        facts, recalled messages). Nothing is erased: the messages stay in the log and in the
        user's archive, and later sessions still recall them; use :meth:`forget` or
        :meth:`MemoryStore.delete_user` to erase. Compaction events before the clear can no
        longer be rolled back. Returns whether there was anything to clear."""
        self.wait()
        done = self.store.clear(self.namespace) is not None
        self._compactor.reload()
        return done

    def pop(self) -> Message | None:
        """Take back the session's newest message (an edit, an undo) and return it, or
        ``None`` when the session holds none. It leaves the log and the archive, and facts
        read from it alone are invalidated. A system message is taken back the same way;
        a message already demoted (never the newest while paging keeps the newest turn hot)
        is not, and gives ``None``."""
        self.wait()
        newest = next(iter(self.store.newest_messages(self.namespace, 1)), None)
        if newest is None or not withdraw(self.store, self.namespace, self._cold, self.scope, newest):
            return None
        self._compactor.reload()
        return newest

    # -- pins and facts ------------------------------------------------------------

    def pin(self, message_id: str | None = None, *, fact_id: int | None = None, text: str | None = None) -> Fact | None:
        """Keep something visible in every context until it is unpinned. Give one of:

        ``message_id``: a logged message. A hot message stays where it is and moves to
        the pinned section when it is demoted; one already demoted comes back pinned.
        ``fact_id``: a fact of the cold tier (returned). ``text``: a new rule, stored as a
        pinned constraint (returned; a rule already stored under the same text is pinned
        instead of added twice).

        Explicit pins always appear; together they must fit the pinned section's cap
        (``settings.pinned_share`` of the budget) with room left for the line that tells of
        automatic rules past it, else :class:`~memos.core.errors.PinLimitExceeded` is raised here
        and nothing is pinned.
        """
        return self._pins.pin(self._request, message_id, fact_id, text)

    def unpin(self, message_id: str | None = None, *, fact_id: int | None = None) -> None:
        """Undo :meth:`pin` for a message (also one a guard pinned) or a fact; both stay stored."""
        self._pins.unpin(message_id, fact_id)

    def facts(self, kind: str | None = None, *, include_history: bool = False, query: str | None = None) -> list[Fact]:
        """Facts of the cold tier: current ones (or every version with ``include_history``),
        of one ``kind`` if given (one of :data:`~memos.storage.facts.FACT_KINDS`, else
        ``ValueError``); with ``query``, the current facts that match it, best first."""
        if kind is not None and kind not in FACT_KINDS:
            raise ValueError(f"kind must be one of {list(FACT_KINDS)}, got {kind!r}")
        if query is not None:
            if not isinstance(query, str) or not query.strip():
                raise ValueError(f"query must be a non-empty string, got {query!r}")
            return self._cold.search(clean_text(query), limit=50, kinds=[kind] if kind else None)
        return self._cold.facts(kind, include_history=include_history)

    def forget(self, fact_id: int, reason: str = "user request") -> ForgetRecord:
        """Forget a fact everywhere (a deletion request): its value and earlier values, and the
        identifiers in them, are redacted to ``[forgotten]`` in every message, summary and
        archived item of the fact's scope (the keyword index and the vectors are rewritten),
        then the fact, its history and the other facts holding the value are deleted and the
        database files are scrubbed of the deleted bytes. The deletion is recorded (kind, a
        hash of the key and of the value, what was redacted) and the fact does not come back
        from the messages it was read from.

        Sessions of the scope open in this process see it at once; one open in another
        process sees it when it next opens (or after :meth:`reload`)."""
        self.wait()
        return self.store.forget_fact(self._cold, fact_id, reason)

    def invalidate(self, fact_id: int) -> Fact:
        """Mark a current fact as revoked; it stays in the history but leaves every context."""
        return self._cold.invalidate(fact_id)

    # -- the archive ---------------------------------------------------------------

    def archive(self, content: str | None = None, *, message_ids: str | Sequence[str] | None = None,
                tags: str | Sequence[str] = ()) -> str:
        """Save ``content`` (a note) or logged messages (``message_ids``, verbatim) to the
        archival tier; returns the archived item's id."""
        item_id = self._archiver.save(content, message_ids, tags)
        self._recall.possible = True
        return item_id

    def retrieve(
        self,
        query: str,
        top_k: int = 5,
        *,
        since: float | datetime | None = None,
        until: float | datetime | None = None,
        kind: str | None = None,
        roles: str | Sequence[str] | None = None,
        page: int = 1,
        promote: bool = False,
    ) -> list[Hit]:
        """Search archival memory and facts (dense + keyword, fused by reciprocal rank; facts
        by keyword), listed by score, highest first: this
        session's earlier messages and, with the default scope, the user's past sessions
        (each hit names its ``session``). Messages still in the hot tier are left out.

        ``since``/``until`` are Unix times or datetimes (a naive one is local time, as
        ``datetime.timestamp()`` reads it), ``kind`` an archive kind
        (:data:`~memos.storage.items.ARCHIVE_KINDS`) or ``'fact'``, ``roles`` a role or roles
        (archived items holding a message of one of them). Raises ``ValueError`` for any other.
        With ``promote``, the hits enter the next prompts' recalled-memory section until
        the next user message.
        """
        return self._recall.search(query, top_k, since=since, until=until, kind=kind, roles=roles, page=page,
                                   promote=promote)

    def flush(self) -> int:
        """Write every queued archival vector now (dense search then sees all archived items)."""
        total = 0
        while n := self._archival.flush(limit=256):
            total += n
        return total

    def archive_counts(self) -> ArchiveCounts:
        """How many items the archive of this session's scope holds, and how many of them still
        wait for their vectors (the background indexer writes them; :meth:`flush` at once)."""
        return archive_counts(self._archival)

    def embedding_model(self) -> str | None:
        """The name of the model dense search runs with, or ``None`` when archival search is
        keyword-only (no embedding model, or no vector backend); opens them if not open yet."""
        archival = self._archival
        return archival.embedder.name if archival.dense and archival.embedder is not None else None

    def reindex(self) -> int:
        """Rebuild this scope's archival vectors from the store; returns how many were written."""
        return self._archival.reindex()

    # -- the agent's tools ---------------------------------------------------------

    def run_turn(self, client: Any, model: str, user_text: str, **kwargs: Any) -> TurnResult:
        """One user turn against ``client`` (an ``openai.OpenAI``) with the memory tools,
        memory tool calls run in between; see :func:`memos.adapters.agent.run_turn` for the options."""
        return run_turn(self, client, model, user_text, **kwargs)

    def tools(self, prefix: str | None = None, *, names: str | Sequence[str] = AGENT_TOOLS) -> list[dict[str, Any]]:
        """The memory tools as OpenAI function schemas (strict, generated from the pydantic
        models that validate their arguments): ``archive``, ``retrieve`` and ``pin`` unless
        ``names`` lists others of :data:`memos.adapters.tools.REGISTRY` (``facts``, ``forget``).

        Each name starts with ``prefix`` (default ``settings.tool_prefix``, e.g. ``memory_``
        gives ``memory_retrieve``) so it cannot collide with the app's own tools;
        :meth:`handle_tool_call` knows every prefix given here."""
        return self._tools.schemas(self.settings.tool_prefix if prefix is None else prefix, names)

    def is_memory_tool(self, name: str) -> bool:
        """Whether a tool call named ``name`` is one of memos' tools (under a known prefix)."""
        return self._tools.name(name) is not None

    def handle_tool_call(self, tool_call: Any) -> dict[str, Any]:
        """Run one memory tool call and return the ``tool`` message to add.

        Accepts the SDK's tool-call objects or their dicts, and the Responses API's
        ``function_call`` items (answered with a ``function_call_output`` item). Whatever is
        wrong with the call comes back as an error result the model can read, never as an
        exception.
        """
        return handle_tool_call(self, tool_call, prefixes=tuple(self._tools.prefixes))

    # -- lifecycle -----------------------------------------------------------------

    def close(self) -> None:
        """Finish a demotion in progress and let go of the store: a store this Memory opened
        from a URL is closed with its last session (its indexer stopped, queued vectors kept
        for the next open); a :class:`~memos.MemoryStore` you passed stays open."""
        self.wait()
        self._recall.archival.close()  # a Chroma client of this session's own, if it was given one
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
        return f"Memory(namespace={self.namespace!r}, messages={self._state.count}, budget={self.settings.budget_tokens})"


