"""Content terms of a text, for overlap and relevance: words that carry meaning and, for
Chinese (which has no spaces), every two-character window of a run of Han characters.
:data:`STOP_WORDS` is the one stop-word set of memos (keyword search uses it too)."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

__all__ = ["STOP_WORDS", "content_terms", "held_by", "holds_words", "line_words"]

_WORD = re.compile(r"[\w$€£¥.-]+|[\u4e00-\u9fff]+", re.UNICODE)
STOP_WORDS = frozenset({
    "the", "and", "for", "that", "this", "with", "you", "your", "are", "was", "not", "but", "have", "has",
    "any", "all", "can", "will", "would", "should", "what", "when", "where", "from", "into", "about", "there",
    "their", "they", "them", "then", "than", "just", "also", "more", "some", "please", "thanks", "don't",
    "could", "find", "tell", "show", "give", "know", "want", "need", "like", "how", "who", "why", "which",
    "dont", "doesn't", "longer", "anymore", "now", "again", "still", "only", "never", "always",
    "did", "does", "had", "were", "her", "his", "him", "she", "its", "our", "been", "being", "after", "before",
    # two-letter words: keyword search takes words of two letters and more
    "is", "to", "of", "in", "on", "at", "by", "it", "be", "do", "my", "me", "we", "us", "an", "as", "or", "if",
    "so", "up", "he", "am", "i'm", "it's",
})


@functools.lru_cache(maxsize=8192)
def content_terms(text: str, *, parts: bool = False) -> frozenset[str]:
    """Lower-cased words of three or more characters that are not stop words, and the
    character bigrams of Chinese runs. With ``parts``, a hyphenated word's parts count as
    words too ("the no-pork rule" has pork)."""
    out: set[str] = set()
    for w in _WORD.findall(text.lower()):
        w = w.strip(".-")
        if any("\u4e00" <= ch <= "\u9fff" for ch in w):
            out.update(w[i : i + 2] for i in range(max(1, len(w) - 1)))
            continue
        for part in (w, *w.split("-")) if parts and "-" in w else (w,):
            if len(part) >= 3 and part not in STOP_WORDS:
                out.add(part)
    return frozenset(out)


_WORDS = re.compile(r"\w+")
_LABEL = re.compile(r"^(?:\(\w+, #\d+\) |[a-z_]+(?: [^:]{0,40})?: )")


def line_words(line: str) -> str:
    """A prompt line's words without its label (``constraint:``, ``user:``, ``(user, #12)``),
    lower-cased, punctuation and spacing dropped: what one line holding another is checked on."""
    return " ".join(_WORDS.findall(_LABEL.sub("", line, count=1).lower()))


def holds_words(outer: str, inner: str) -> bool:
    """Whether ``outer`` holds all of ``inner``, word for word and in order (both as
    :func:`line_words` gives them; an empty ``inner`` is held by nothing)."""
    return bool(inner) and f" {inner} " in f" {outer} "


def held_by(line: str, shown: Sequence[str]) -> bool:
    """Whether one of the ``shown`` lines (words, as :func:`line_words` gives them) is mostly
    ``line``: it holds all of ``line``'s words, and they are at least half of its own. A line
    so held adds nothing beside it."""
    words = line_words(line)
    return any(holds_words(s, words) and 2 * len(words) >= len(s) for s in shown)
