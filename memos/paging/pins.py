"""Pins: what the user (or the agent) asks to keep in every prompt.

A message, a fact or a new rule can be pinned (:meth:`memos.Memory.pin`). Explicit pins
always appear, so together they must fit the pinned section's cap: a pin over it is refused
here, with :class:`~memos.core.errors.PinLimitExceeded`, never later in ``context()``.
"""

from __future__ import annotations

from dataclasses import replace

from ..core.config import MemosSettings
from ..core.errors import PinLimitExceeded
from ..core.messages import clean_text
from ..core.sections import pinned_message
from ..core.tokens import TokenCounter
from ..storage.log import Store
from ..tiers.cold import ColdTier, Fact, FactCandidate, fact_key
from ..tiers.state import SessionState
from .assembly import LONGEST_REST_NOTICE, ContextAssembler, pinned_message_line
from .request import Request

__all__ = ["Pins"]


class Pins:
    """Pinning and unpinning for one session."""

    def __init__(self, state: SessionState, settings: MemosSettings, counter: TokenCounter, store: Store,
                 cold: ColdTier, assembler: ContextAssembler) -> None:
        self.state = state
        self.settings = settings
        self.counter = counter
        self.store = store
        self.cold = cold
        self.assembler = assembler

    def pin(self, req: Request, message_id: str | None = None, fact_id: int | None = None,
            text: str | None = None) -> Fact | None:
        """See :meth:`memos.Memory.pin`; ``req`` is the request the pinned lines are measured for."""
        target = one_of(message_id=message_id, fact_id=fact_id, text=text)
        if target == "message_id":
            found = [m for m, _, _ in self.store.load_messages(self.state.namespace) if m.id == str(message_id)]
            if not found:
                raise ValueError(f"no message with id {message_id!r} in session {self.state.namespace!r}")
            m = found[0]
            if not m.pinned:
                self._check_room(req, pinned_message_line(m))
            self._set(str(message_id), True)
            return None
        if target == "fact_id":
            fact = self.cold.get(int(fact_id))  # type: ignore[arg-type]
            if not (fact.pinned and fact.origin == "explicit"):
                self._check_room(req, fact.line())
            return self.cold.set_pinned(int(fact_id), True, origin="explicit")  # type: ignore[arg-type]
        if not isinstance(text, str) or not text.strip():
            raise ValueError("pin(text=...) needs non-empty text")
        body = " ".join(clean_text(text).split())
        self._check_room(req, f"constraint: {body}")
        changes = self.cold.apply([FactCandidate("constraint", fact_key("constraint", body), body, (),
                                                 self.state.next_seq - 1, pinned=True, origin="explicit")])
        fact = changes[0].fact
        if fact.pinned and fact.origin == "explicit":
            return fact
        return self.cold.set_pinned(int(fact.id), True, origin="explicit")  # type: ignore[arg-type]

    def unpin(self, message_id: str | None = None, fact_id: int | None = None) -> None:
        """See :meth:`memos.Memory.unpin`."""
        target = one_of(message_id=message_id, fact_id=fact_id)
        if target == "message_id":
            self._set(str(message_id), False)
        else:
            self.cold.set_pinned(int(fact_id), False)  # type: ignore[arg-type]

    def over_cap(self, req: Request) -> tuple[int, int, int] | None:
        """``(pins, tokens, cap)`` when the explicit pins (with the pinned messages still
        hot) take more than the pinned section's cap, else ``None``: pins set in a session
        with a larger budget, or a larger ``pinned_share``, are the user's in this one too."""
        pins, _, needed = self._measure(req, [])
        cap = self.settings.pinned_max_tokens
        return (pins, needed, cap) if needed > cap else None

    def _measure(self, req: Request, extra: list[str]) -> tuple[int, int, int]:
        """The explicit pins, the pinned messages still hot (which join the section when
        demoted: they count now), and the tokens of a section holding them, ``extra`` and the
        longest line telling of automatic rules past the cap."""
        explicit, _ = self.assembler.pinned_lines(req)
        hot = [pinned_message_line(m) for m in self.state.hot if m.pinned]
        lines = [ln for ln, _ in explicit] + hot + extra + [LONGEST_REST_NOTICE]
        return len(explicit), len(hot), self.counter.count_message(pinned_message(lines) or {})

    def _check_room(self, req: Request, line: str) -> None:
        pins, hot, needed = self._measure(req, [line])
        cap = self.settings.pinned_max_tokens
        if needed > cap:
            held = f"{pins} explicit pin(s) already"
            if hot:
                held += f", and {hot} pinned message(s) still among the recent ones, which join them when demoted"
            raise PinLimitExceeded(needed, cap, held)

    def _set(self, message_id: str, pinned: bool) -> None:
        s, ns = self.state, self.state.namespace
        for tier in (s.system, s.hot, s.pinned):
            for i, m in enumerate(tier):
                if m.id == message_id:
                    if tier is s.pinned and not pinned:
                        del tier[i]
                        self.store.set_flags(ns, [message_id], pinned=False, tier="warm")
                    else:
                        tier[i] = replace(m, pinned=pinned)
                        self.store.set_flags(ns, [message_id], pinned=pinned)
                    return
        for m, _tier, _ in self.store.load_messages(ns):
            if m.id == message_id:
                if pinned:
                    self.store.set_flags(ns, [message_id], pinned=True, tier="pinned")
                    s.pinned.append(replace(m, pinned=True))
                    s.pinned.sort(key=lambda x: x.seq)
                return
        raise ValueError(f"no message with id {message_id!r} in session {ns!r}")


def one_of(**options: object) -> str:
    """The name of the one option given (not None); ``ValueError`` unless exactly one is."""
    given = [k for k, v in options.items() if v is not None]
    if len(given) != 1:
        raise ValueError(f"give exactly one of {', '.join(options)}; got {', '.join(given) or 'none'}")
    return given[0]
