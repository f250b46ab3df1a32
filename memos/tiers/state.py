"""A session's state: its view of the message log, as the other parts read it.

The log in the store is the truth; :class:`SessionState` is what one session holds of it
in memory: the system prompt (the system messages logged before the conversation started;
later ones are events that age like other messages), the hot tier (with the results hidden behind
placeholders), the messages demoted to the pinned section, the newest summary version and
the counters. It is loaded from the store, changed only by :class:`~memos.Memory` (new
messages) and the compactor (compaction, demotion), and read by assembly and recall.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..core.messages import Message
from ..storage.log import Namespace, Store, SummaryRow, namespace_key
from .hot import group_units

__all__ = ["SYSTEM_ROLES", "SessionState"]

SYSTEM_ROLES = ("system", "developer")


@dataclass
class SessionState:
    """One session's messages by tier, its summary and its counters."""

    namespace: Namespace
    system: list[Message] = field(default_factory=list)
    hot: list[Message] = field(default_factory=list)
    pinned: list[Message] = field(default_factory=list)  # demoted, shown in the pinned section
    compacted: set[str] = field(default_factory=set)  # hot tool results shown as placeholders
    call_ids: set[str] = field(default_factory=set)  # every tool-call id the session has seen
    count: int = 0
    next_seq: int = 0
    summary: SummaryRow | None = None
    demotions: int = 0
    soft_compactions: int = 0
    events: int = 0  # compaction events not rolled back
    started: bool = False  # a message other than a system one has been logged (since a clear)

    @property
    def key(self) -> str:
        """The session's stored namespace, ``user/agent/session``."""
        return namespace_key(self.namespace)

    def load(self, store: Store) -> None:
        """Read the session from the store (again), replacing what was held."""
        self.system, self.hot, self.pinned = [], [], []
        self.compacted, self.call_ids = set(), set()
        self.count, self.next_seq, self.started = 0, 0, False
        live: list[tuple[Message, str, bool]] = []
        for m, tier, compacted in store.load_messages(self.namespace):
            self.count += 1
            self.next_seq = m.seq + 1
            self.call_ids.update(m.tool_call_ids)
            if tier != "cleared":
                live.append((m, tier, compacted))
        prompt = self._take([m for m, _, _ in live])
        for m, tier, compacted in live:
            if m.id in prompt:
                self.system.append(m)
            elif tier == "hot":
                self.hot.append(m)
                if compacted:
                    self.compacted.add(m.id)
            elif tier == "pinned":
                self.pinned.append(m)
        summary = store.latest_summary(self.namespace)
        self.summary = summary if summary is not None and summary.text else None
        events = [e for e in store.compactions(self.namespace) if e.rolled_back_by is None]
        self.events = len(events)
        self.demotions = sum(1 for e in events if e.kind == "hard" and e.summary_version is not None)
        self.soft_compactions = sum(1 for e in events if e.kind == "soft")

    def prompt_ids(self, logged: Sequence[Message]) -> set[str]:
        """Which of ``logged`` (in order, after what the session holds) belong to the app's
        system prompt: system messages logged before the conversation started. A later one is
        an event (a date note, a status) and ages in the hot tier like any other message."""
        started, out = self.started, set()
        for m in logged:
            if m.role not in SYSTEM_ROLES:
                started = True
            elif not started:
                out.add(m.id)
        return out

    def _take(self, logged: Sequence[Message]) -> set[str]:
        """:meth:`prompt_ids` of ``logged``, noting whether the conversation has started."""
        prompt = self.prompt_ids(logged)
        self.started = self.started or any(m.role not in SYSTEM_ROLES for m in logged)
        return prompt

    def append(self, logged: list[Message]) -> None:
        """Messages just logged join the session: the system prompt (system messages before
        the conversation started) apart, the rest hot."""
        prompt = self._take(logged)
        for m in logged:
            self.call_ids.update(m.tool_call_ids)
            (self.system if m.id in prompt else self.hot).append(m)
        if logged:
            self.next_seq = logged[-1].seq + 1
        self.count += len(logged)

    def pending_calls(self) -> list[str]:
        """Tool-call ids of the newest assistant message still waiting for their results."""
        if not self.hot:
            return []
        units = group_units(self.hot[-64:])
        last = units[-1] if units else None
        if last is None or not last.in_flight:
            return []
        answered = {m.data.get("tool_call_id") for m in last.messages[1:]}
        return [c for c in last.messages[0].tool_call_ids if c not in answered]

    def last_user_text(self) -> str:
        """The newest user message's text in the hot tier ('' when there is none)."""
        for m in reversed(self.hot):
            if m.role == "user":
                return m.text
        return ""
