"""The passage of a long text that bears on a query: for a recalled item too long to show
whole (a pasted report, a long tool result), the sentences around the one that shares the
most content terms with the query, rather than the text's head and tail."""

from __future__ import annotations

from collections.abc import Callable

from .sentences import split_sentences
from .terms import content_terms

__all__ = ["best_passage"]


def best_passage(text: str, query: str, max_tokens: int, count: Callable[[str], int], marker: str = " … ") -> str | None:
    """The run of consecutive sentences of ``text`` grown around the sentence sharing the most
    content terms with ``query`` (towards the neighbour sharing more, the later one on a tie)
    while it fits ``max_tokens`` with ``marker`` where the text was cut. ``None`` when no
    sentence shares a term with the query, the text is one sentence, or the best sentence
    alone does not fit: the caller clips as usual."""
    sentences = split_sentences(text)
    terms = content_terms(query)
    if len(sentences) < 2 or not terms:
        return None
    overlap = [len(content_terms(s) & terms) for s in sentences]
    best = max(range(len(sentences)), key=overlap.__getitem__)
    room = max_tokens - 2 * count(marker)
    cost = [count(s) + 1 for s in sentences]
    if overlap[best] == 0 or cost[best] > room:
        return None
    lo = hi = best
    used = cost[best]
    while True:
        sides = [(overlap[i], i > hi, i) for i in (lo - 1, hi + 1) if 0 <= i < len(sentences)]
        fits = [i for _, _, i in sorted(sides, reverse=True) if used + cost[i] <= room]
        if not fits:
            break
        used += cost[fits[0]]
        lo, hi = min(lo, fits[0]), max(hi, fits[0])
    # the passage as the text has it (its own spacing), located sentence by sentence
    starts, pos = [], 0
    for s in sentences:
        pos = text.find(s, pos)
        starts.append(pos)
        pos += len(s)
    start, end = starts[lo], starts[hi] + len(sentences[hi])
    return (marker.lstrip() if start > 0 else "") + text[start:end] + (marker.rstrip() if end < len(text) else "")
