"""Recall: what the archive and the facts bring back into a session.

Every message is archived as it arrives, and the archive (like the facts) belongs to the
user by default, so recall reaches this session's demoted messages and the user's past
sessions alike. :class:`Recall` answers :meth:`~memos.Memory.retrieve` (archive and facts,
merged by score), chooses the lines of the recalled-memory section for a query
within a token limit, and brings back what the assistant referred to that has left the hot
tier. Recalled lines are grouped under one heading per session and day, a line quoting
a value that was corrected later is marked outdated, and one stating a rule the user
lifted later says so.
"""

from __future__ import annotations

import numbers
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from ..core.config import MemosSettings
from ..core.messages import as_roles, clean_text
from ..core.sections import recall_message
from ..core.tokens import TokenCounter
from ..storage.items import ARCHIVE_KINDS, TURN_KINDS
from ..text.embeddings import covers
from ..text.passage import best_passage
from ..text.patterns import fold, references
from ..text.terms import content_terms, held_by
from ..tiers.archival import RRF_K, ArchivalTier, Hit
from ..tiers.archiving import item_line
from ..tiers.cold import ColdTier, Fact
from ..tiers.state import SessionState
from ..tiers.warm import EARLIER, OLDEST

__all__ = ["Recall", "fact_hit", "search_depth"]

# the words a summary's layers are marked with, not its content
_SUMMARY_MARKS = content_terms(OLDEST + EARLIER)
# retrieve's searches look this many archive items deep at a time (see search_depth)
SEARCH_STEP = 50
# the candidates each of retrieve's searches gives, whatever the page (up to the 50th hit): a
# search's order depends on its candidates, so every page reads one order
RETRIEVE_POOL = 400


def mark_outdated(text: str, superseded: Sequence[str], *, own: Sequence[str] = (),
                  lifted: Sequence[str] = ()) -> str:
    """``text`` with a note naming the values in it that a later value replaced
    (``superseded``, lower-cased; those of ``own``, the line's own current value, aside), and
    one saying that a rule it states was lifted (``lifted``, as :func:`rule_words` gives
    them): quoted history, never a current value or a rule in force."""
    low = text.lower()
    mine = {v.lower() for v in own}
    if outdated := [v for v in superseded if v in low and v not in mine]:
        text += f" [outdated: {', '.join(outdated[:2])} was corrected later]"
    words = rule_words(low) if lifted else ""
    if any(v in words for v in lifted):
        text += " [a rule the user lifted later: no longer in force]"
    return text


def rule_words(text: str) -> str:
    """``text`` lower-cased, its spaces collapsed and its closing punctuation dropped: how a
    lifted rule is looked for in a line."""
    return " ".join(text.lower().split()).rstrip(_CLOSING)


_CLOSING = ".!?;。！？；…"


class Recall:
    """Searches the archive and the facts for one session (see the module docs)."""

    def __init__(self, state: SessionState, settings: MemosSettings, counter: TokenCounter, cold: ColdTier,
                 archival: ArchivalTier) -> None:
        self.settings = settings
        self.counter = counter
        self.cold = cold
        self.archival = archival
        self.promoted: list[Hit] = []  # retrieve(promote=True) hits, shown until the next user message
        self._superseded: tuple[int, list[str]] | None = None
        self._lifted: tuple[int, list[str]] | None = None
        self.state = state
        self.reset()

    def reset(self) -> None:
        """Start over after the session was read again."""
        self.promoted = []
        # whether a search can find anything the prompt does not already hold: while every
        # message of the session is hot and nothing else is archived, it cannot
        s = self.state
        self.possible = bool(s.events or s.pinned) or self.archival.has_items_beyond(s.key)

    def cache_key(self, text: str) -> tuple[Any, ...]:
        """What the recalled lines for ``text`` depend on."""
        hot = self.state.hot
        return (self.archival.version, self.cold.version, text, tuple(h.id for h in self.promoted), len(hot),
                hot[-1].id if hot else "")

    # -- the recalled-memory section -----------------------------------------------

    def lines(self, text: str, limit: int, pinned: Sequence[str] = ()) -> list[str]:
        """The recalled section's lines for ``text`` within ``limit`` tokens (with the header):
        promoted hits first, then what the assistant referred to, then the search. An item
        that a line of ``pinned`` (the pinned section's lines, as
        :func:`~memos.text.terms.line_words` gives them) is mostly is left out: it is shown
        (:func:`~memos.text.terms.held_by`)."""
        hot = {m.id for m in self.state.hot}
        hits = list(self.promoted) + self.referenced_hits(hot)
        if text and self.possible:
            # the turns around the best hits are among them, ranked with them (see ArchivalTier.in_context)
            hits += self.archival.search(text, self.settings.recall_top_k, exclude_message_ids=hot,
                                         min_similarity=self.settings.recall_min_similarity)
        seen: set[str] = set()
        # a message said again word for word (and one the hot tier holds in the same words)
        # is shown once per heading: a copy adds nothing but its tokens
        said = self.hot_lines()
        superseded, lifted = self.superseded(), self.lifted()
        used = self.counter.count_message(recall_message(["x"]) or {})
        per_item = max(24, limit // 3)
        chosen: list[tuple[Hit, str]] = []
        groups: set[str] = set()
        for h in hits:
            # an earlier summary version restates messages the archive holds verbatim: retrieve finds it
            if h.id in seen or (h.message_ids and set(h.message_ids) <= hot) or h.kind == "summary":
                continue
            seen.add(h.id)
            flat = " ".join(h.text.split())
            body = _body(h, flat)
            if self.counter.count(body) > per_item:
                # a long item shows the passage that bears on the query, else its head and tail
                who = _speaker(h, flat)
                part = best_passage(flat[len(who):], text, per_item - self.counter.count(_body(h, who)), self.counter.count)
                body = _body(h, who + part) if part else self.counter.clip(body, per_item, " … ")
            body = mark_outdated(body, superseded, lifted=lifted)
            group = _heading(h, self.state.key)
            if (group, body) in said or held_by(body, pinned):
                continue
            if h.found_by == ("context",) and _says_little(h) and not _beside(h, chosen, self.state):
                continue  # "Understood.", "好的。" mean something only after the turn they answer
            cost = self.counter.count(body) + 2 + (0 if group in groups else self.counter.count(group) + 2)
            if used + cost > limit:
                continue
            groups.add(group)
            said.add((group, body))
            chosen.append((h, body))
            used += cost
        return _render(chosen, self.state.key)

    def hot_lines(self) -> set[tuple[str, str]]:
        """The hot tier's messages as (heading, text) pairs, the text as the archive writes it
        with its spaces collapsed: an archived copy of one of them adds nothing to the prompt."""
        return {(_heading_of(self.state.key, m.created_at, self.state.key), " ".join(item_line(m).split()))
                for m in self.state.hot if m.role != "tool"}

    def referenced_hits(self, hot: set[str]) -> list[Hit]:
        """Archived items holding what the assistant quoted in its last turns (an id, a time)
        that no other hot message holds any more: the agent went back to something that has
        left the hot tier, so it comes back, verbatim, as recalled memory."""
        recent = [m for m in reversed(self.state.hot) if m.role == "assistant"][: self.settings.reference_turns]
        if not recent or not self.possible:
            return []
        quoted: set[str] = set()
        for m in recent:
            quoted |= references(m.text_and_calls)
        others = fold(" ".join(m.text for m in self.state.hot if m.role != "assistant"))  # references are folded
        hits: list[Hit] = []
        for ref in sorted(r for r in quoted if r not in others)[:4]:
            hits += self.archival.search(ref, 2, mode="keyword", exclude_message_ids=hot)
        return [h for h in hits if any(r in fold(h.text) for r in quoted)]

    def superseded(self) -> list[str]:
        """Values of the scope that a later value replaced (lower-cased), cached per fact version."""
        if self._superseded is None or self._superseded[0] != self.cold.version:
            values = [v.lower() for v in self.cold.superseded_values(max_chars=120) if len(v) >= 4]
            self._superseded = (self.cold.version, values)
        return self._superseded[1]

    def lifted(self) -> list[str]:
        """Rules of the scope the user lifted (as :func:`rule_words` gives them), cached per
        fact version."""
        if self._lifted is None or self._lifted[0] != self.cold.version:
            values = [w for v in self.cold.lifted_values() if len(w := rule_words(v)) >= 4]
            self._lifted = (self.cold.version, values)
        return self._lifted[1]

    # -- retrieve ------------------------------------------------------------------

    def _listed(self, found: list[Hit], kind: str | None) -> list[Hit]:
        """The archive hits :meth:`search` lists of ``found``, best first: an item is left out
        when the hot tier or a hit above holds its words under the same heading, and a summary
        version when one of its session is listed or it adds no word to the hits above it
        (the earlier versions of a session's summary overlap; ``kind='summary'`` lists them all)."""
        said = self.hot_lines()
        words: set[str] = set()  # of the hits listed so far
        summarised: set[str] = set()  # sessions a summary version is listed of
        out: list[Hit] = []
        for h in found:
            line = (_heading(h, self.state.key), " ".join(h.text.split()))
            if line in said:
                continue
            terms = content_terms(h.text) - _SUMMARY_MARKS
            if h.kind == "summary" and kind != "summary" and (h.session in summarised or terms <= words):
                continue
            said.add(line)
            words |= terms
            if h.kind == "summary":
                summarised.add(h.session)
            out.append(h)
        return out

    def search(self, query: str, top_k: int = 5, *, since: float | datetime | None = None,
               until: float | datetime | None = None, kind: str | None = None,
               roles: str | Sequence[str] | None = None, page: int = 1,
               promote: bool = False) -> list[Hit]:
        """:meth:`memos.Memory.retrieve`: the archive (less what the hot tier holds) and the
        facts, merged by score; ``promote`` puts the hits in the next prompts."""
        if not isinstance(query, str) or not query.strip():
            raise ValueError("query must be a non-empty string")
        query = clean_text(query)
        if not _is_int(top_k) or not 1 <= top_k <= 100:
            raise ValueError(f"top_k must be an int between 1 and 100, got {top_k!r}")
        if not _is_int(page) or page < 1:
            raise ValueError(f"page must be an int >= 1, got {page!r}")
        top_k, page = int(top_k), int(page)  # a numpy int too, which the database cannot bind
        if kind is not None and kind != "fact" and kind not in ARCHIVE_KINDS:
            raise ValueError(f"kind must be 'fact' or one of {list(ARCHIVE_KINDS)}, got {kind!r}")
        roles = as_roles(roles) if roles is not None else None
        since, until = _unix_time(since, "since"), _unix_time(until, "until")
        offset = (page - 1) * top_k
        hits: list[Hit] = []
        if kind != "fact":  # what the hot tier holds is in the prompt already
            depth = search_depth(top_k, offset)
            pool = max(RETRIEVE_POOL, 4 * depth)  # one pool for the pages of a query: one order
            hot = {m.id for m in self.state.hot}
            while True:
                found = self.archival.search(query, depth, since=since, until=until, kinds=[kind] if kind else None,
                                             roles=roles, exclude_message_ids=hot, pool=pool)
                hits = self._listed(found, kind)
                # full, or the archive has no more, or 1,000 items past the page were looked at
                if len(hits) >= offset + top_k or len(found) < depth or depth >= offset + 20 * SEARCH_STEP:
                    break
                depth += SEARCH_STEP  # more were left out than the depth allowed for
        facts: list[Hit] = []
        if kind in (None, "fact") and not roles:
            facts = [fact_hit(f) for f in self.cold.search(query, limit=top_k + offset)
                     if (since is None or f.valid_from >= since) and (until is None or f.valid_from <= until)]
        # a fact's score is its place in the fact search, normalised as the archive's is
        facts = [replace(h, score=(RRF_K + 1) / (RRF_K + rank)) for rank, h in enumerate(facts, 1)]
        model = self.archival.model if facts and self.archival.dense else None
        if model is not None and covers(model, query):  # each fact's similarity, shown as the archive's are
            query_vec = self.archival.query_vector(query)
            vecs = model([h.text for h in facts])
            facts = [replace(h, similarity=float(v @ query_vec)) for h, v in zip(facts, vecs, strict=True)]
        # the two lists merge by the score each hit shows, so a hit never follows a lower one
        ranked = sorted(hits + facts, key=lambda h: -h.score)
        result = ranked[offset : offset + top_k]
        if promote:
            known = {h.id for h in self.promoted}
            self.promoted += [h for h in result if h.id not in known]
        return result


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _unix_time(value: float | datetime | None, name: str) -> float | None:
    """``value`` as a Unix time: a number as it is, a datetime by its ``timestamp()``."""
    if value is None:
        return None
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, datetime):
        return value.timestamp()
    raise ValueError(f"{name} must be a Unix time (a number) or a datetime, got {value!r}")


def search_depth(top_k: int, offset: int = 0) -> int:
    """How many archive items :meth:`Recall.search` asks for first to fill a page of ``top_k``
    after ``offset``: twice as many (a message said again word for word, or held hot in the same
    words, is listed once per session and day; a session's summary versions once), rounded up to
    :data:`SEARCH_STEP`."""
    return -(-2 * (top_k + offset) // SEARCH_STEP) * SEARCH_STEP


def fact_hit(f: Fact) -> Hit:
    """A fact as a search hit."""
    return Hit(id=f"fact:{f.id}", kind="fact", text=f.line(), score=0.0, message_ids=tuple(f.sources),
               first_seq=f.source_seq, last_seq=f.source_seq, roles=(), created_at=f.valid_from, source="fact",
               found_by=("facts",))


def _heading(h: Hit, session: str) -> str:
    """The heading a recalled item is listed under: its session (when another one) and day,
    written once for all the items that share them."""
    return _heading_of(h.session or session, h.created_at, session)


def _heading_of(item_session: str, created_at: float, session: str) -> str:
    where = "this session" if item_session == session else f"session {item_session.rsplit('/', 1)[-1]}"
    when = time.strftime("%Y-%m-%d", time.gmtime(created_at)) if created_at > 0 else ""
    return f"[{where}, {when}]" if when else f"[{where}]"


def _body(h: Hit, text: str) -> str:
    """One recalled item as a line: a message or a tool chain as its text (the heading says
    where it came from; retrieve returns the ids), anything else with its kind."""
    if h.source == "fact" or h.kind in TURN_KINDS:
        return text
    where = f"#{h.first_seq}" if h.first_seq == h.last_seq else f"#{h.first_seq}-#{h.last_seq}"
    return f"{h.kind} {where}: {text}"


def _speaker(h: Hit, text: str) -> str:
    """The ``"role: "`` prefix of a turn's ``text`` ("" when it has none)."""
    return next((f"{r}: " for r in h.roles[:1] if text.startswith(f"{r}: ")), "")


def _says_little(h: Hit) -> bool:
    """Whether a turn says next to nothing on its own: one content word at most ("Got it!"),
    or a few Chinese characters ("好的。")."""
    text = h.text[len(_speaker(h, h.text)):]
    if any(ch.isdigit() for ch in text):
        return False
    han = sum("\u4e00" <= ch <= "\u9fff" for ch in text)
    return han <= 4 if han else len(content_terms(text)) <= 1


def _beside(h: Hit, chosen: Sequence[tuple[Hit, str]], state: SessionState) -> bool:
    """Whether the turn ``h`` answers (the one before it in its session) is shown: recalled,
    or in the hot tier."""
    before = h.first_seq - 1
    if any(c.session == h.session and c.first_seq <= before <= c.last_seq for c, _ in chosen):
        return True
    return h.session == state.key and any(m.seq == before for m in state.hot)


def _render(chosen: list[tuple[Hit, str]], session: str) -> list[str]:
    """The recalled items grouped under their heading (groups in rank order, items in
    conversation order within a group)."""
    groups: dict[str, list[tuple[Hit, str]]] = {}
    for h, body in chosen:
        groups.setdefault(_heading(h, session), []).append((h, body))
    lines: list[str] = []
    for heading, items in groups.items():
        lines.append(heading)
        lines += [f"- {body}" for _, body in sorted(items, key=lambda x: (x[0].first_seq, x[0].last_seq))]
    return lines
