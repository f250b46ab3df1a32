"""Context assembly: the prompt, section by section, within the budget.

:class:`ContextAssembler` renders the hot tier (clipping long messages, placeholders for
hidden tool results) and builds the optional sections (the pinned rules, the relevant
facts, the rolling summary, recalled memory) within the room the pager leaves them
(:class:`Rooms`), caching each rendering until what it shows changes. It reads the session
state, the cold tier and recall; it changes nothing but its caches.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..core.config import MemosSettings
from ..core.messages import Message, call_input, clean_text, with_input
from ..core.sections import (
    assemble,
    facts_message,
    one_system_message,
    pinned_message,
    pressure_message,
    recall_message,
    summary_message,
)
from ..core.tokens import REPLY_PRIMING, TokenCounter
from ..retrieval.recall import Recall, mark_outdated
from ..text.embeddings import Similarities
from ..text.patterns import find_identifiers
from ..text.terms import content_terms, held_by, holds_words, line_words
from ..tiers.cold import ColdTier, Fact
from ..tiers.hot import Unit, clip_json, group_units, placeholder, render_text, tool_names
from ..tiers.state import SessionState
from ..tiers.warm import OLDEST, fit_summary, layers
from .guards import extract_constraints
from .request import Request

__all__ = ["ContextAssembler", "Plan", "Rooms", "recall_room"]

_MIN_CLIP_TOKENS = 48
# a message with images keeps at least this much of its text beside them (when it has that much)
_TEXT_BESIDE_PARTS = 128
MEANING_WEIGHT = 8.0


@dataclass(frozen=True)
class Rooms:
    """Tokens left to the optional sections; None means their own cap."""

    recall: int | None = None
    facts: int | None = None
    summary: int | None = None
    pinned: int | None = None  # room of the automatic pins
    recall_room: int = 0  # tokens left for recalled memory once everything else is placed


@dataclass(frozen=True)
class Plan:
    """A prompt's size in tokens, section by section, as the pager works from it."""

    system: int
    pinned: int
    facts: int
    summary: int
    recall: int
    hot: int
    extra: int  # the query and the request's tool schemas

    @property
    def total(self) -> int:
        """Every section, the hot tier, ``extra`` and the reply's priming."""
        return self.system + self.pinned + self.facts + self.summary + self.recall + self.hot + self.extra + REPLY_PRIMING


def recall_room(rooms: Rooms) -> int:
    """The room recalled memory may take."""
    return rooms.recall_room if rooms.recall is None else min(rooms.recall, rooms.recall_room)


def _shared_out(sizes: Sequence[int], room: int) -> list[int]:
    """``room`` shared out among parts of ``sizes``: evenly, a part smaller than its share
    taking only its size and leaving the rest to the larger ones."""
    out = [0] * len(sizes)
    left = room
    for k, i in enumerate(sorted(range(len(sizes)), key=lambda j: sizes[j])):
        out[i] = min(sizes[i], left // (len(sizes) - k))
        left -= out[i]
    return out


def rest_notice(skipped: int) -> str:
    """The pinned section's line telling the agent of the ``skipped`` rules past its cap."""
    return f"+{skipped} more stated rule(s), kept as facts: shown when relevant, found by `retrieve`"


def pinned_message_line(m: Message, body: str | None = None) -> str:
    """The pinned section's line for message ``m`` (its text, or ``body`` when shown otherwise)."""
    return f"({m.role}, #{m.seq}) {render_text(m.data) if body is None else body}"


# explicit pins leave room for that line at its longest (pin() reserves it), so the section
# stays within its cap whatever automatic rules join it
LONGEST_REST_NOTICE = rest_notice(10**6)


class ContextAssembler:
    """Builds the prompt of one session from its state, facts and recall (see the module docs)."""

    def __init__(self, state: SessionState, settings: MemosSettings, counter: TokenCounter, cold: ColdTier,
                 recall: Recall) -> None:
        self.state = state
        self.settings = settings
        self.counter = counter
        self.cold = cold
        self.recall = recall
        # the newest message whose unit the prompt could not hold whole, and the cap its
        # messages are clipped to instead (their share, or less when even that did not fit)
        self.narrowed: tuple[str, int] | None = None
        # what each cached pinned section shows: the fact ids, and the words of its lines
        self._pinned_shown: dict[tuple[Any, ...], tuple[frozenset[int], tuple[str, ...]]] = {}
        self._render_cache: dict[tuple[str, int, bool], tuple[dict[str, Any], int]] = {}
        self._section_cache: dict[tuple[Any, ...], tuple[dict[str, Any] | None, int]] = {}
        self._hot_cache: tuple[tuple[Any, ...], int] | None = None
        self._similarities = Similarities(lambda: recall.archival.model, query_vector=recall.archival.query_vector)

    def reset(self) -> None:
        """Drop every cache (the session was read again)."""
        self._pinned_shown.clear()
        self._render_cache.clear()
        self._section_cache.clear()
        self._hot_cache = None

    def forget_rendered(self, ids: set[str]) -> None:
        """Drop the renderings of messages that left the hot tier."""
        self._render_cache = {k: v for k, v in self._render_cache.items() if k[0] not in ids}

    def query_message(self, req: Request) -> tuple[dict[str, Any] | None, int]:
        """The message a prompt for the request's ``query`` ends with and its tokens; ``(None, 0)`` without
        a query. Like the hot tier's newest unit, it may take what the system messages, the
        tool schemas and a full pinned section leave (:meth:`newest_cap`), or a message's
        share once the prompt could not hold it so (:meth:`narrow_newest`). ``ValueError``
        when it is not a string or holds no text (an empty user message would be sent)."""
        query = req.query
        if query is None:
            return None, 0
        if not isinstance(query, str):
            raise ValueError(f"query must be a string, got {type(query).__name__}")
        if not query.strip():
            raise ValueError("query must hold text; pass None (or no query) for the prompt as it stands")
        pending = self.state.pending_calls()
        if pending:
            raise ValueError(f"a query cannot follow the unanswered tool calls {pending}: the API refuses a user "
                             "message after them; add their tool results first, or call context() without a query")
        query = clean_text(query)
        msg = {"role": "user", "content": query}
        tokens, cap = self.counter.count_message(msg), self.newest_cap(req, 1) if req.query_cap is None else req.query_cap
        if tokens > cap:
            msg = {"role": "user", "content": self.counter.clip(query, cap - 8, " … ")}
            tokens = self.counter.count_message(msg)
        return msg, tokens

    def share(self, req: Request, share: float) -> int:
        """``share`` of the room the request leaves the prompt: the budget less the tool
        schemas, which every request carries (sections and paging thresholds are its shares)."""
        return int(max(0, self.settings.budget_tokens - req.tools_tokens) * share)

    def section_cap(self, req: Request, share: float) -> int:
        """The most tokens a section with ``share`` of the room may take (at least 32)."""
        return max(32, self.share(req, share))

    def message_cap(self, req: Request, unit_size: int) -> int:
        """The most tokens one message of a unit of ``unit_size`` messages is shown with: its
        share of the hot tier's target, or of what the system messages, the tool schemas and a
        full pinned section leave of the budget when that is less (a long message pasted
        under a small budget is clipped to fit, not refused)."""
        return max(_MIN_CLIP_TOKENS, min(self.share(req, self.settings.hot_target), self._unreserved(req)) // max(1, unit_size))

    def newest_cap(self, req: Request, unit_size: int) -> int:
        """The most tokens one message of the hot tier's newest unit (the turn the model is
        to answer) is shown with: what the system messages, the tool schemas and a full pinned
        section leave of the budget, so that a long message or an image that fits in the
        prompt reaches the model whole; at least :meth:`message_cap`. Older units give way to
        it (demoted, their sections shrunk) as the pager makes the prompt fit. A prompt that
        ends with a query (``context(query=)``) gives this room to the query instead."""
        return max(self.message_cap(req, unit_size), self._unreserved(req) // max(1, unit_size))

    def _unreserved(self, req: Request) -> int:
        s = self.settings
        return s.budget_tokens - (req.tools_tokens + sum(m.tokens for m in self.state.system) + s.pinned_max_tokens)

    def render(self, m: Message, cap: int, names: dict[str, str]) -> tuple[dict[str, Any], int]:
        compacted = m.id in self.state.compacted
        key = (m.id, cap, compacted)
        hit = self._render_cache.get(key)
        if hit is not None:
            return hit
        data = m.data
        if compacted:
            text = placeholder(m, names.get(str(data.get("tool_call_id")), "a tool"),
                               self.settings.placeholder_preview_chars)
            data = {"role": "tool", "tool_call_id": data["tool_call_id"], "content": text}
        if m.tokens > cap and data.get("tool_calls"):  # the arguments share the cap with the text
            data = self._clip_calls(data, cap, m.id)
        if m.tokens > cap and (data.get("content") or "") != "" and self.counter.count_message(data) > cap:
            marker = f" … [memos: clipped; full text in the memory log as message {m.id}] … "
            overhead = self.counter.count_message({**data, "content": ""})
            content = data.get("content")
            if isinstance(content, list):  # content parts: the text is clipped, images kept while they fit
                data = {**data, "content": self._clip_parts(content, m.text, max(0, cap - overhead), m.id, marker)}
            else:
                body = str(content)
                clipped = None
                if m.role == "tool":  # a JSON result stays JSON the model can parse
                    clipped = clip_json(body, max(0, cap - overhead), self.counter.count,
                                        f"clipped; full text in the memory log as message {m.id}")
                data = {**data, "content": clipped or self.counter.clip(body, max(0, cap - overhead), marker)}
        out = (data, self.counter.count_message(data) if data is not m.data else m.tokens)
        self._render_cache[key] = out
        return out

    def _clip_calls(self, data: dict[str, Any], cap: int, message_id: str) -> dict[str, Any]:
        """``data`` with its tool calls' arguments clipped so that they and its text share
        ``cap``: the room is shared out evenly, a part smaller than its share keeps it whole
        and leaves the rest to the others, and clipped arguments stay JSON (:func:`clip_json`)
        with a note saying where the full call is. ("write_file" called with a whole file as
        its argument would otherwise be kept whole by the guards and fail the prompt.)"""
        calls = list(data["tool_calls"])
        bare = [with_input(c, "") for c in calls]
        room = max(0, cap - self.counter.count_message({**data, "content": None, "tool_calls": bare}))
        args = [call_input(c) for c in calls]
        content = data.get("content")
        text = self.counter.count(content) if isinstance(content, str) else (
            self.counter.count_message({"role": "", "content": content}) if content else 0)
        shares = _shared_out([text, *(self.counter.count(a) for a in args)], room)
        note = f"clipped; full call in the memory log as message {message_id}"
        marker = f" … [memos: {note}] … "
        out = []
        for call, arg, share in zip(calls, args, shares[1:], strict=True):
            if self.counter.count(arg) > share:
                arg = clip_json(arg, share, self.counter.count, note) or self.counter.clip(arg, share, marker)
                call = with_input(call, arg)
            out.append(call)
        return {**data, "tool_calls": out}

    def _clip_parts(self, parts: list[Any], text: str, room: int, message_id: str, marker: str) -> list[dict[str, Any]]:
        """A message's content parts cut to ``room`` tokens: the images and other parts kept
        as they are while they fit beside the head of its ``text`` (each one that does not is
        named in a text part), and that text, its text parts joined, clipped to the rest."""
        kept: list[dict[str, Any]] = []
        left_out: list[str] = []
        used = 0
        for_text = min(self.counter.count(text), _TEXT_BESIDE_PARTS) if text else 0
        for p in parts:
            if not isinstance(p, dict) or p.get("type") == "text":
                continue
            cost = self.counter.count_part(p)
            if used + cost + for_text <= room:
                kept.append(p)
                used += cost
            else:
                left_out.append(str(p.get("type")))
        if not text and not left_out:
            return kept
        # the user's words come before the note on what was left out: the note names the
        # message when there is room, else only what was left out (the clip marker names it)
        named = f" [memos: {', '.join(left_out)} part(s) left out; in the memory log as message {message_id}]"
        short = f" [memos: {', '.join(left_out)} part(s) left out]"
        notes = [named, short, ""] if left_out else [""]
        rest = room - used
        words = self.counter.count(text) if text else 0
        note = next((n for n in notes if words + self.counter.count(n) <= rest), None)
        if note is not None:
            body = text + note
        else:
            note = short if left_out and self.counter.count(short) < rest // 2 else ""
            body = self.counter.clip(text, max(0, rest - self.counter.count(note)), marker) + note
        return [{"type": "text", "text": body.strip()}] + kept

    def render_unit(self, req: Request, unit: Unit, names: dict[str, str]) -> list[tuple[dict[str, Any], int]]:
        size = len(unit.messages)
        hot = self.state.hot
        cap = self.message_cap(req, size)
        if hot and unit.messages[-1].id == hot[-1].id:  # the newest unit (a query takes its room when asking)
            narrowed = self.narrowed
            if narrowed is not None and narrowed[0] == hot[-1].id:
                cap = min(cap, narrowed[1]) if req.asking else narrowed[1]
            elif not req.asking:
                cap = self.newest_cap(req, size)
        return [self.render(m, cap, names) for m in unit.messages]

    def unit_tokens(self, req: Request, unit: Unit) -> int:
        return sum(t for _, t in self.render_unit(req, unit, tool_names([unit])))

    def narrow_newest(self, req: Request, over: int = 0) -> tuple[Request, bool]:
        """Clip the query the prompt is for, when it has one, else the newest unit, to its
        share of the hot tier, as older units are, when the prompt cannot hold it whole beside
        what may not leave it (explicit pins, other units the guards keep); then, while it
        still exceeds the budget by ``over`` tokens, by those (at least 48 tokens a message
        stay). A query that cannot be clipped further leaves the rest to the newest unit
        (explicit pins set under a larger budget may fill most of a smaller one). Whether that
        made the prompt shorter, with the request to build it for (its query's cap set)."""
        if req.asking:
            req, shorter = self._narrow_query(req, over)
            if shorter:
                return req, True
        return req, self._narrow_unit(req, over)

    def _narrow_query(self, req: Request, over: int) -> tuple[Request, bool]:
        before = self.query_message(req)[1]
        if req.query_cap is None:
            req = replace(req, query_cap=self.message_cap(req, 1))
            if self.query_message(req)[1] < before:
                return req, True
        assert req.query_cap is not None
        req = replace(req, query_cap=max(_MIN_CLIP_TOKENS, min(req.query_cap, before - over)))
        return req, self.query_message(req)[1] < before

    def _narrow_unit(self, req: Request, over: int) -> bool:
        hot = self.state.hot
        if not hot:
            return False
        newest, last = group_units(hot)[-1], hot[-1].id
        shown = [t for _, t in self.render_unit(req, newest, tool_names([newest]))]
        if self.narrowed is None or self.narrowed[0] != last:
            self.narrowed = (last, self.message_cap(req, len(newest.messages)))
            if self.unit_tokens(req, newest) < sum(shown):
                return True
        self.narrowed = (last, max(_MIN_CLIP_TOKENS, min(self.narrowed[1], max(shown)) - over))
        return self.unit_tokens(req, newest) < sum(shown)

    def pinned_section(self, req: Request, query: str | None = None, room: int | None = None
                       ) -> tuple[dict[str, Any] | None, int]:
        """The pinned section: every explicit pin (``pin()``) and the rules pinned
        automatically, chosen by relevance to the latest user message (or ``query``), by the
        detector's confidence and by recency (:meth:`_rank_rules`) within the section's cap
        (``room``, when smaller), all listed in the order they were set: a later rule that
        contradicts an earlier one reads as the newer. Rules past the cap stay facts, shown in
        the facts section when relevant; a line tells the agent so."""
        key = self._pinned_key(query, room)
        hit = self._section_cache.get(key)
        if hit is not None:
            return hit
        text = self.relevance_text(query)
        cap = self.settings.pinned_max_tokens if room is None else min(room, self.settings.pinned_max_tokens)
        twins: dict[int, int] = {}
        when: dict[str, float] = {}
        explicit, auto = self.pinned_lines(req, twins, when)
        lines = [line for line, _ in explicit]
        shown = {fid for _, fid in explicit if fid is not None}
        used = self.counter.count_message(pinned_message(lines or ["x"]) or {})
        ranked = self._rank_rules(text, auto, cap - used)
        # a line nearly the same as one already chosen waits (twenty "look up record N please"
        # are not twenty rules)
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
        said: list[str] = []
        # a line whose words a line already taken holds verbatim (a rule and the pinned message
        # it came from) is shown by that line: (its index, the fact id); a line holding the words
        # of one taken before it takes that one's place, when it fits
        covered: list[tuple[int, int | None]] = []
        for line, fid, _seq, _conf in distinct + later:
            words = line_words(line)
            by = next((i for i, t in enumerate(said) if holds_words(t, words)), None)
            if by is not None:
                covered.append((by, fid))
                continue
            cost = self.counter.count(line) + 2
            inner = next((i for i, t in enumerate(said) if holds_words(words, t)), None)
            if inner is not None:
                grown = cost - self.counter.count(taken[inner][0]) - 2
                if used + grown <= cap:
                    used += grown
                    covered.append((inner, taken[inner][1]))
                    taken[inner], said[inner] = (line, fid), words
                    continue
            if used + cost <= cap:
                taken.append((line, fid))
                said.append(words)
                used += cost
        while True:  # the line telling the agent about the rest must fit too
            covered = [c for c in covered if c[0] < len(taken)]
            skipped = len(auto) - len(taken) - len(covered)
            notice = [rest_notice(skipped)] if skipped else []
            msg = pinned_message(sorted(lines + [ln for ln, _ in taken], key=lambda ln: when.get(ln, 0.0)) + notice)
            out = (msg, self.counter.count_message(msg) if msg else 0)
            if not skipped or out[1] <= max(cap, used) or not taken:
                break
            taken.pop()
        shown.update(fid for _, fid in taken + covered if fid is not None)
        shown.update(twin for twin, fid in twins.items() if fid in shown)
        if len(self._pinned_shown) > 16:
            self._section_cache = {k: v for k, v in self._section_cache.items() if k[0] != "pinned"}
            self._pinned_shown.clear()
        self._section_cache[key] = out
        self._pinned_shown[key] = (frozenset(shown), tuple(line_words(ln) for ln in lines + [ln for ln, _ in taken]))
        return out

    def _rank_rules(self, text: str, auto: list[tuple[str, int | None, int, float]], room: int
                    ) -> list[tuple[str, int | None, int, float]]:
        """The automatic pins, those to show first first: by relevance to what is asked, then
        how sure the detector was, then recency. Relevance is shared words (capped, so one
        shared word does not outrank a sure rule) and, when the rules do not all fit in
        ``room``, similarity by meaning ("makeup brands" asks about "beauty products"):
        ``MEANING_WEIGHT`` makes a related rule's lead over an unrelated one (cosine ~0.25
        apart) worth the whole range of the other two."""
        wanted = content_terms(text)
        sims = None
        if text and sum(self.counter.count(a[0]) + 2 for a in auto) > room:
            sims = self._similarities(text, [line_words(a[0]) for a in auto])
        meaning = sims or [0.0] * len(auto)
        order = sorted(range(len(auto)), key=lambda i: (
            -(MEANING_WEIGHT * meaning[i] + min(2, len(wanted & content_terms(auto[i][0]))) + 2 * auto[i][3]),
            -auto[i][2]))
        return [auto[i] for i in order]

    def _pinned_key(self, query: str | None, room: int | None) -> tuple[Any, ...]:
        return ("pinned", self.cold.version, tuple((m.id, m.pinned) for m in self.state.pinned),
                self.relevance_text(query), room)

    def pinned_lines(self, req: Request, twins: dict[int, int] | None = None, when: dict[str, float] | None = None
                     ) -> tuple[list[tuple[str, int | None]], list[tuple[str, int | None, int, float]]]:
        """Explicit pins (line, fact id) and automatic ones (line, fact id, seq, confidence),
        without repeats: a message the user pinned wins over a fact holding the same text.
        ``twins`` gets the id of each pinned fact left out for holding the text of an earlier one
        (a short message that states two rules gives two facts, each holding the whole message),
        mapped to that fact's id: the line that shows one shows both. ``when`` gets the time
        each line was set (a fact's ``valid_from``, a message's ``created_at``)."""
        when = {} if when is None else when
        explicit: list[tuple[str, int | None]] = []
        auto: list[tuple[str, int | None, int, float]] = []
        seen: set[str] = set()
        holder: dict[str, int] = {}
        cap = self.message_cap(req, 1)

        def message_line(m: Message) -> tuple[str, str] | None:
            sentences = [] if m.pinned else [c for c in extract_constraints(m.text) if not self.cold.knows(c)]
            body = " ".join(sentences) if sentences else render_text(m.data)
            if body.lower() in seen:
                return None
            seen.add(body.lower())
            if self.counter.count(body) > cap:
                body = self.counter.clip(body, cap, f" … [clipped; message {m.id}] … ")
            return body, pinned_message_line(m, body)

        for m in self.state.pinned:
            if m.pinned and (got := message_line(m)) is not None:
                explicit.append((got[1], None))
                when[got[1]] = m.created_at
        for f in self.cold.facts(pinned=True):
            value = f.value.lower()
            if value in seen:
                if twins is not None and value in holder and f.id is not None:
                    twins[f.id] = holder[value]
                continue
            seen.add(value)
            if f.id is not None:
                holder[value] = f.id
            when[f.line()] = f.valid_from
            if f.origin == "explicit":
                explicit.append((f.line(), f.id))
            else:
                auto.append((f.line(), f.id, f.source_seq, f.confidence))
        for m in self.state.pinned:
            if not m.pinned and (got := message_line(m)) is not None:
                auto.append((got[1], None, m.seq, 0.5))
                when[got[1]] = m.created_at
        return explicit, auto

    def shown_pins(self, req: Request, query: str | None, room: int | None) -> frozenset[int]:
        """Ids of the pinned facts the pinned section shows for this query."""
        return self._shown(req, query, room)[0]

    def pinned_words(self, req: Request, query: str | None, room: int | None) -> tuple[str, ...]:
        """The words of each line the pinned section shows for this query (:func:`line_words`)."""
        return self._shown(req, query, room)[1]

    def _shown(self, req: Request, query: str | None, room: int | None) -> tuple[frozenset[int], tuple[str, ...]]:
        key = self._pinned_key(query, room)
        if key not in self._pinned_shown:
            self._section_cache.pop(key, None)
            self.pinned_section(req, query, room)
        return self._pinned_shown[key]

    def fit_section(self, make: Callable[[Sequence[str]], dict[str, Any] | None], lines: list[str],
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

    def relevance_text(self, query: str | None) -> str:
        """What the optional sections are chosen for: ``query``, else the newest user message."""
        return query if query is not None else self.state.last_user_text()

    def facts_section(self, req: Request, query: str | None, room: int | None, pinned_room: int | None = None
                      ) -> tuple[dict[str, Any] | None, int]:
        text = self.relevance_text(query)
        shown = self.shown_pins(req, query, pinned_room)
        cap = self.section_cap(req, self.settings.facts_share)
        key = ("facts", self.cold.version, text, room, shown, cap)
        hit = self._section_cache.get(key)
        if hit is not None:
            return hit
        limit = cap if room is None else min(room, cap)
        chosen: list[str] = []
        msg = None
        tokens = 0
        if limit > 40:
            asked = text.lower()
            # a fact the identifier net kept (the identifier and the sentence around it) is shown when
            # the identifier is asked about: its message is in the archive, word for word, for the rest
            hits = [f for f in self.cold.search(text, limit=20) if f.id not in shown
                    and not (_net_fact(f) and f.key.lower() not in asked)] if text else []
            seen: set[int | None] = set()
            used = self.counter.count_message(facts_message(["x"]) or {})
            superseded = self.recall.superseded()
            for f in hits:
                if f.id in seen:
                    continue
                seen.add(f.id)
                # a current fact's sentence may quote another value corrected since ("my email is …")
                line = mark_outdated(f.line(), superseded, own=(f.key, f.value))
                cost = self.counter.count(line) + 2
                if used + cost > limit:
                    continue
                chosen.append(line)
                used += cost
            msg, tokens = self.fit_section(facts_message, chosen, limit)
        out = (msg, tokens)
        if len(self._section_cache) > 128:
            self._section_cache.clear()
        self._section_cache[key] = out
        return out

    def summary_section(self, req: Request, query: str | None, room: int | None, pinned_room: int | None = None
                        ) -> tuple[dict[str, Any] | None, int]:
        """The rolling summary within ``room`` (its own cap when None). Its newest lines (what
        happened just before the hot tier, up to a third of its cap) always come; of the older
        ones, those that share words with what is asked (``query``, else the newest user
        message) come, most relevant first, and the rest give their room to recalled memory:
        their messages are in the archive, word for word. A line that the pinned section (with
        ``pinned_room``) shows in full is left out."""
        if self.state.summary is None:
            return None, 0
        text_for = self.relevance_text(query)
        cap = self.section_cap(req, self.settings.summary_share)
        pinned = self.pinned_words(req, query, pinned_room)
        key = ("summary", self.state.summary.version, room, text_for, cap, pinned)
        hit = self._section_cache.get(key)
        if hit is not None:
            return hit
        cap = cap if room is None else min(room, cap)
        text = self._summary_for(self.state.summary.text, text_for, cap, pinned)
        if room is not None:
            text = fit_summary(text, max(0, room - 40), self.counter) if room > 40 else ""
        msg = summary_message(text, self.state.summary.through_seq)
        out = (msg, self.counter.count_message(msg) if msg else 0)
        if room is not None and out[1] > room:
            out = self.fit_section(lambda lines: summary_message("\n".join(lines), self.state.summary.through_seq)  # type: ignore[union-attr]
                                    if lines else None, text.splitlines(), room)
        if len(self._section_cache) > 64:
            self._section_cache.clear()
        self._section_cache[key] = out
        return out

    def _summary_for(self, text: str, asked: str, cap: int, pinned: Sequence[str] = ()) -> str:
        """The summary's lines worth their room for ``asked`` (see :meth:`summary_section`),
        less those a line of ``pinned`` shows; the identifiers of the other lines left out
        stay, on the identifiers line."""
        oldest, earlier, detail = layers(text)
        lines = [ln for ln in earlier + detail if not held_by(ln.removeprefix("- "), pinned)]
        sizes = [self.counter.count(ln) + 1 for ln in lines]
        keep: set[int] = set()
        used = 0
        for i in range(len(lines) - 1, -1, -1):  # the newest lines, up to a third of the cap
            if used + sizes[i] > cap // 3:
                break
            keep.add(i)
            used += sizes[i]
        wanted = content_terms(asked)
        overlap = {i: len(wanted & content_terms(lines[i])) for i in range(len(lines)) if i not in keep} if wanted else {}
        ids = list(dict.fromkeys(oldest + [x for i, ln in enumerate(lines) if i not in keep for x in find_identifiers(ln)]))
        ids_cost = self.counter.count(OLDEST + ", ".join(ids)) + 1 if ids else 0
        while ids and used + ids_cost > cap:  # the oldest identifiers go first
            ids.pop(0)
            ids_cost = self.counter.count(OLDEST + ", ".join(ids)) + 1 if ids else 0
        used += ids_cost
        for i in sorted((i for i, n in overlap.items() if n), key=lambda i: (-overlap[i], -i)):
            if used + sizes[i] <= cap:
                keep.add(i)
                used += sizes[i]
        shown = [lines[i] for i in sorted(keep)]
        left_ids = [x for x in ids if not any(x in ln for ln in shown)]
        return "\n".join(([OLDEST + ", ".join(left_ids)] if left_ids else []) + shown)

    def recall_section(self, req: Request, query: str | None, room: int, hot: int | None = None,
                       pinned_room: int | None = None) -> tuple[dict[str, Any] | None, int]:
        """Recalled memory within ``room``: recall has its share (:meth:`share`), and the part of
        the hot tier's share that the hot tier (``hot`` tokens of it in this prompt) does not
        use (a new session's prompt is mostly what it recalls). A message the pinned section
        (with ``pinned_room``) shows in full is not recalled again."""
        text = self.relevance_text(query) if self.settings.auto_recall else ""
        if room <= 40:
            return None, 0
        hot = self.hot_tokens(req) if hot is None else hot
        limit = min(room, self.section_cap(req, self.settings.recall_share)
                    + max(0, self.share(req, self.settings.hot_target) - hot))
        pinned = self.pinned_words(req, query, pinned_room)
        key = ("recall", *self.recall.cache_key(text), limit, hot, pinned)
        hit = self._section_cache.get(key)
        if hit is not None:
            return hit
        lines = self.recall.lines(text, limit, pinned)
        out = self.fit_section(recall_message, lines, limit)
        if len(self._section_cache) > 128:
            self._section_cache.clear()
        self._section_cache[key] = out
        return out

    def focused_units(self, req: Request, units: list[Unit], query: str, room: int) -> list[Unit]:
        """The hot units a prompt for ``query`` shows, within ``room`` (the budget less the
        other sections). The newest units (``keep_recent_units`` of them, and as many as fit
        in half the hot tier's target: the conversation just before the question), open
        tool chains, pinned messages and system events always stay. The older units compete
        with the archive: one search ranks both (every message is archived as it arrives),
        and, in rank order, an older unit stays when it is reached before the room is full.
        The rest are left out of this prompt only: they stay hot, in the log and in the
        archive."""
        if not self.recall.possible or not query.strip():
            return units
        recent, floor = max(1, self.settings.keep_recent_units), self.share(req, self.settings.hot_target) // 2
        for i in range(len(units) - 1, -1, -1):
            floor -= self.unit_tokens(req, units[i])
            if floor < 0:
                break
            recent = max(recent, len(units) - i)
        fixed = {i for i, u in enumerate(units)
                 if i >= len(units) - recent or u.in_flight
                 or any(m.pinned or m.role == "system" for m in u.messages)}
        if len(fixed) == len(units):
            return units
        by_message = {m.id: i for i, u in enumerate(units) if i not in fixed for m in u.messages}
        sizes = {i: self.unit_tokens(req, units[i]) for i in set(by_message.values())}
        left = room - sum(self.unit_tokens(req, units[i]) for i in fixed)
        per_item = max(24, left // 3)
        kept: set[int] = set()
        exclude = {m.id for i in fixed for m in units[i].messages}
        for h in self.recall.archival.search(query, self.settings.recall_top_k, exclude_message_ids=exclude,
                                             min_similarity=self.settings.recall_min_similarity,
                                             relative_similarity=self.settings.focus_relative_similarity):
            mine = {by_message[x] for x in h.message_ids if x in by_message} - kept
            cost = sum(sizes[i] for i in mine) if mine else min(per_item, self.counter.count(h.text)) + 2
            if cost > left:
                if left < 24:
                    break
                continue
            left -= cost
            kept |= mine
        return [u for i, u in enumerate(units) if i in fixed or i in kept]

    def hot_tokens(self, req: Request) -> int:
        # compaction only adds to the set while the hot tier keeps its first message, so its size is
        # enough; the cap changes with a request's tool schemas, and long messages are clipped to it
        hot = self.state.hot
        key = (len(hot), hot[0].id if hot else "", hot[-1].id if hot else "", len(self.state.compacted),
               self.message_cap(req, 1), self.newest_cap(req, 1), req.asking, self.narrowed)
        if self._hot_cache is not None and self._hot_cache[0] == key:
            return self._hot_cache[1]
        total = sum(self.unit_tokens(req, u) for u in group_units(self.state.hot))
        self._hot_cache = (key, total)
        return total

    def plan(self, req: Request, extra: int, query: str | None, rooms: Rooms) -> Plan:
        """The prompt's size section by section: the sections in ``rooms`` (relevant to
        ``query``), the hot tier, and ``extra`` more (the query, the tool schemas)."""
        return Plan(
            system=sum(m.tokens for m in self.state.system),
            pinned=self.pinned_section(req, query, rooms.pinned)[1],
            facts=self.facts_section(req, query, rooms.facts, rooms.pinned)[1],
            summary=self.summary_section(req, query, rooms.summary, rooms.pinned)[1],
            recall=self.recall_section(req, query, recall_room(rooms), pinned_room=rooms.pinned)[1],
            hot=self.hot_tokens(req),
            extra=extra,
        )

    def total(self, req: Request, extra: int, query: str | None, rooms: Rooms) -> int:
        """The prompt's tokens (:meth:`plan`'s total)."""
        return self.plan(req, extra, query, rooms).total

    def build(self, req: Request, query_msg: dict[str, Any] | None, rooms: Rooms) -> list[dict[str, Any]]:
        """The prompt from sections computed once each; the pressure notice and then the
        recalled memory take only the room the others leave."""
        query = req.query
        units = group_units(self.state.hot)
        names = tool_names(units)
        pinned, pinned_t = self.pinned_section(req, query, rooms.pinned)
        facts, facts_t = self.facts_section(req, query, rooms.facts, rooms.pinned)
        summary, summary_t = self.summary_section(req, query, rooms.summary, rooms.pinned)
        budget = self.settings.budget_tokens
        fixed = (sum(m.tokens for m in self.state.system) + pinned_t + facts_t + summary_t
                 + (self.counter.count_message(query_msg) if query_msg else 0) + REPLY_PRIMING + req.tools_tokens)
        every = len(units)
        if query is not None and self.settings.query_focus:
            units = self.focused_units(req, units, query, budget - fixed)
        rendered = [r for u in units for r in self.render_unit(req, u, names)]
        hot_t = sum(t for _, t in rendered)
        left_out = self.hot_tokens(req) - hot_t if len(units) < every else 0  # recall's room, given back
        base = fixed + hot_t
        notice = None
        # pressure is measured in the room paging works in (the budget less the tool schemas
        # and the recall reserve), so the notice comes before a demotion, whatever recall adds
        paged = max(1, self.share(req, self.settings.paged_share))
        used = base - req.tools_tokens
        if self.settings.pressure_notice and req.archive_offered and used > paged * self.settings.warning_threshold:
            notice = pressure_message(min(1.0, used / paged))
            if base + self.counter.count_message(notice) > budget:
                notice = None
        room = budget - base - (self.counter.count_message(notice) if notice else 0)
        recalled, _ = self.recall_section(req, query, max(0, min(recall_room(rooms) + left_out, room)), hot_t, rooms.pinned)
        out = assemble(
            system=[m.data for m in self.state.system],
            pinned=pinned,
            facts=facts,
            summary=summary,
            recalled=recalled,
            hot=[d for d, _ in rendered],
            query=query_msg,
            notice=notice,
        )
        if self.settings.system_messages == "one":
            out = one_system_message(out)
        return [copy.deepcopy(d) if ("tool_calls" in d or isinstance(d.get("content"), list)) else dict(d) for d in out]


def _net_fact(f: Fact) -> bool:
    """Whether a fact is one the identifier net kept: keyed by the identifier itself, its value
    the sentence it was found in."""
    return f.kind == "identifier" and f.key != f.value and f.key in f.value and f.key not in ("address",)
