"""The warm tier: a rolling summary of what left the hot tier.

A demotion summarises in three steps, kept apart so each is easy to test:
:func:`prepare_summary` decides what to summarise (incremental, or every Nth time a full
re-summary from the logged originals) and returns a :class:`SummaryPlan`; a
:class:`Summarizer` turns the plan into text; :func:`fit_summary` holds the result to its
token cap whatever wrote it, in layers: the newest lines in detail, older ones compressed
to their first words and identifiers, the oldest as one line of identifiers.
:class:`memos.Memory` persists the version.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from ..core.messages import Message, call_input, call_name
from ..core.tokens import TokenCounter
from ..text.classifiers.detector import default_detector
from ..text.patterns import ACK, DECISION, FAILURE, GOAL, find_identifiers
from ..text.script import simplified
from ..text.sentences import split_sentences

__all__ = [
    "ExtractiveSummarizer",
    "SummaryPlan",
    "Summarizer",
    "condense",
    "fit_summary",
    "layers",
    "prepare_summary",
]

SummaryKind = Literal["incremental", "full"]


@dataclass(frozen=True)
class SummaryPlan:
    """What one summary step should do.

    ``incremental``: fold ``messages`` (the demoted segment) into ``previous``.
    ``full``: summarise ``messages`` (every demoted original) from nothing.
    """

    kind: SummaryKind
    previous: str | None
    messages: tuple[Message, ...]
    max_tokens: int
    through_seq: int
    # values the user has since corrected: a summary should not present them as current
    superseded: tuple[str, ...] = ()


@runtime_checkable
class Summarizer(Protocol):
    """Turns a :class:`SummaryPlan` into summary text."""

    name: str

    def summarize(self, plan: SummaryPlan) -> str:
        """The new summary text (one fact or event per line is best)."""
        ...


def prepare_summary(
    *,
    previous: str | None,
    segment: Sequence[Message],
    demotion_number: int,
    full_every: int,
    max_tokens: int,
    originals: Callable[[], Sequence[Message]],
    superseded: Sequence[str] = (),
) -> SummaryPlan:
    """Plan the summary for the ``demotion_number``-th demotion (1-based).

    Every ``full_every``-th demotion rebuilds the summary from ``originals()`` (all
    demoted messages, read from the log) so that errors of incremental updates do not
    compound; the others fold ``segment`` into ``previous``.
    """
    if not segment:
        raise ValueError("prepare_summary needs a non-empty segment")
    through = max(m.seq for m in segment)
    if previous is None or demotion_number % full_every == 0:
        msgs = tuple(originals()) if previous is not None else tuple(segment)
        return SummaryPlan("full", None, msgs, max_tokens, through, tuple(superseded))
    return SummaryPlan("incremental", previous, tuple(segment), max_tokens, through, tuple(superseded))


EARLIER = "- (earlier) "  # a line of the compressed layer
OLDEST = "- (oldest) ids: "  # the one line of the oldest layer
_HEAD_WORDS = 8


def condense(line: str) -> str:
    """One detailed summary line as a line of the compressed layer: its role and first
    words, and every identifier of the rest."""
    body = line[2:] if line.startswith("- ") else line
    words = body.split()
    head = " ".join(words[:_HEAD_WORDS])
    lost = [i for i in find_identifiers(body) if i not in head]
    return EARLIER + head + ("…" if len(words) > _HEAD_WORDS else "") + (f" [ids: {', '.join(lost)}]" if lost else "")


def layers(text: str) -> tuple[list[str], list[str], list[str]]:
    """A summary's oldest identifiers, its compressed lines and its detailed lines."""
    oldest: list[str] = []
    earlier: list[str] = []
    detail: list[str] = []
    for ln in (ln for ln in text.splitlines() if ln.strip()):
        if ln.startswith(OLDEST):
            oldest += [i.strip() for i in ln[len(OLDEST):].split(",") if i.strip()]
        elif ln.startswith(EARLIER):
            earlier.append(ln)
        else:
            detail.append(ln)
    return oldest, earlier, detail


def fit_summary(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """``text`` held to ``max_tokens`` in layers, whatever wrote it: the newest lines stay as
    they are; older ones are compressed to their first words and identifiers
    (``- (earlier) ...``); the oldest are kept only as their identifiers, on one line
    (``- (oldest) ids: ...``), the oldest of which go last of all. A lone long line is clipped."""
    oldest, earlier, detail = layers(text)
    sizes: dict[str, int] = {}

    def cost(line: str) -> int:  # each line is counted once
        n = sizes.get(line)
        if n is None:
            n = sizes[line] = counter.count(line) + 1
        return n

    def oldest_line() -> list[str]:
        return [OLDEST + ", ".join(dict.fromkeys(oldest))] if oldest else []

    def render() -> list[str]:
        return oldest_line() + earlier + detail

    # the compressed layer may take up to 3/10 of the cap and the identifiers 1/10; the
    # newest lines keep the rest
    earlier_cap, oldest_cap = max_tokens * 3 // 10, max_tokens // 10
    detail_t, earlier_t = sum(map(cost, detail)), sum(map(cost, earlier))
    oldest_t = sum(map(cost, oldest_line()))
    total = detail_t + earlier_t + oldest_t
    while total > max_tokens:
        if len(detail) > 1 and (not earlier or earlier_t <= earlier_cap):
            line = detail.pop(0)  # the oldest detailed line is compressed
            squeezed = condense(line)
            earlier.append(squeezed)
            detail_t -= cost(line)
            earlier_t += cost(squeezed)
        elif earlier:
            line = earlier.pop(0)  # the oldest compressed line keeps its identifiers only
            earlier_t -= cost(line)
            oldest += find_identifiers(line)
        elif oldest:
            oldest.pop(0)
        else:
            break
        oldest_t = sum(map(cost, oldest_line()))
        while oldest and oldest_t > oldest_cap:
            oldest.pop(0)
            oldest_t = sum(map(cost, oldest_line()))
        total = detail_t + earlier_t + oldest_t
    kept = render()
    if kept and total > max_tokens:
        kept = [counter.clip(kept[-1], max_tokens - 2, " … ")]
    return "\n".join(kept)


_LINE_CHARS = 240
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class _Candidate:
    score: int
    order: int
    text: str


_RULE_ROLES = ("user", "system", "developer")


def _prescore(lines: Sequence[tuple[str, str]]) -> None:
    """Let the rule detector score the ``(sentence, role)`` lines whose role sets rules in
    one batch, where it can (the MiniLM model: one forward pass instead of one a line); its
    cache then answers :func:`_score`'s one-sentence judgements."""
    batch = getattr(default_detector(), "scores", None)
    texts = [t for t, role in dict.fromkeys(lines) if role in _RULE_ROLES and not ACK.match(t.strip())]
    if callable(batch) and len(texts) > 1:
        batch(texts)


def _score(sentence: str, role: str) -> int:
    read = simplified(sentence)  # the cue words are written in Simplified Chinese
    if ACK.match(read.strip()):
        return -1
    score = 0
    if role in _RULE_ROLES and default_detector().judge([sentence])[0].is_rule:
        score += 4
    ids = find_identifiers(sentence)
    score += min(4, 2 * len(ids))
    if DECISION.search(read):
        score += 2
    if GOAL.search(read):
        score += 2
    if FAILURE.search(read):
        score += 2
    if any(ch.isdigit() for ch in sentence):
        score += 1
    if len(sentence.split()) < 4 and not ids and not any("\u4e00" <= ch <= "\u9fff" for ch in sentence):
        score -= 1
    return score


def _clip_line(text: str) -> str:
    text = _SPACES.sub(" ", text).strip()
    if len(text) <= _LINE_CHARS:
        return text
    head = text[:_LINE_CHARS]
    lost = [i for i in find_identifiers(text) if i not in head]
    return head + "…" + (f" [ids: {', '.join(lost[:8])}]" if lost else "")


def _compact_json(text: str) -> str:
    try:
        value = json.loads(text)
    except (ValueError, TypeError):
        return text
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class ExtractiveSummarizer:
    """Offline summariser: keeps the sentences that carry goals, constraints, decisions,
    numbers and ids, and tool outcomes; drops greetings and acknowledgements.

    Each kept sentence becomes one line ``- role: sentence``. When the lines exceed the
    cap, the lowest-scored go first (older ones first among equals). Lines holding a
    value the user has since corrected (``plan.superseded``) are dropped.
    """

    name = "extractive"

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        # each summary re-scores the lines it keeps: a line's score is computed once
        self._score = functools.lru_cache(maxsize=16384)(_score)

    def candidates(self, messages: Sequence[Message], start: int = 0) -> list[_Candidate]:
        """Scored summary lines for ``messages``; ``start`` numbers them after older lines."""
        out: list[_Candidate] = []
        order = start
        names: dict[str, str] = {}
        sentences = [[] if m.role == "tool" else split_sentences(m.text) for m in messages]
        _prescore([(sentence, m.role) for m, said in zip(messages, sentences, strict=True) for sentence in said])
        for m, said in zip(messages, sentences, strict=True):
            role = m.role
            for call in m.data.get("tool_calls") or ():
                name, args = call_name(call), call_input(call)
                names[call["id"]] = name
                out.append(_Candidate(3 + min(2, len(find_identifiers(args))), order,
                                      _clip_line(f"- assistant called {name}({_compact_json(args)})")))
                order += 1
            if role == "tool":
                name = names.get(str(m.data.get("tool_call_id")), "tool")
                text = _compact_json(m.text)
                score = 2 + (3 if FAILURE.search(text) else 0) + min(2, len(find_identifiers(text)))
                out.append(_Candidate(score, order, _clip_line(f"- {name} returned: {text}")))
                order += 1
                continue
            for sentence in said:
                score = self._score(sentence, role)
                if score >= 1:
                    out.append(_Candidate(score, order, _clip_line(f"- {role}: {sentence}")))
                order += 1
        return out

    def summarize(self, plan: SummaryPlan) -> str:
        """Fold the plan's messages into the previous summary (or start afresh), within the
        cap: the best lines in detail, the lines that do not fit compressed before them
        (see :func:`fit_summary`)."""
        cands: list[_Candidate] = []
        oldest, earlier, detail = layers(plan.previous or "")
        if plan.previous:
            roles = [line[2:].split(":", 1)[0] if line.startswith("- ") else "" for line in detail]
            _prescore(list(zip(detail, roles, strict=True)))
            for i, (line, role) in enumerate(zip(detail, roles, strict=True)):
                cands.append(_Candidate(self._score(line, role) + 1, i, line))
        cands.extend(self.candidates(plan.messages, start=len(cands)))
        seen: set[str] = set()
        unique = []
        stale = [v.lower() for v in plan.superseded if v.strip()]
        for c in cands:
            key = c.text.lower()
            if any(v in key for v in stale):
                continue
            if key not in seen:
                seen.add(key)
                unique.append(c)
        budget = plan.max_tokens * 3 // 4  # the rest is for the compressed layers
        chosen = []
        for c in sorted(unique, key=lambda c: (-c.score, -c.order)):
            cost = self.counter.count(c.text) + 1
            if cost <= budget:
                chosen.append(c)
                budget -= cost
        kept = {id(c) for c in chosen}
        squeezed = [condense(c.text) for c in sorted(unique, key=lambda c: c.order) if id(c) not in kept]
        stale_ok = [ln for ln in earlier if not any(v in ln.lower() for v in stale)]
        ids = [i for i in oldest if not any(v in i.lower() for v in stale)]
        text = "\n".join(([OLDEST + ", ".join(ids)] if ids else []) + stale_ok + squeezed
                         + [c.text for c in sorted(chosen, key=lambda c: c.order)])
        return fit_summary(text, plan.max_tokens, self.counter)
