"""Splitting text into sentences, for English, Chinese and mixed text."""

from __future__ import annotations

import re

__all__ = ["ABBREVIATION", "split_clauses", "split_sentences", "without_code"]

# Abbreviations a name or an example follows ("Dr. Alvarez", "St. Louis", "e.g. km"): their
# dot ends no sentence. A closed class; "etc.", "No." and "Jr." end sentences as often.
_ABBREVIATIONS = ("mr", "mrs", "ms", "mx", "dr", "prof", "st", "mt", "vs", "e.g", "i.e")
ABBREVIATION = "(?:" + "|".join(rf"(?<![a-z]){re.escape(a)}\." for a in _ABBREVIATIONS) + ")"
_NOT_ABBREVIATED = "".join(rf"(?<!(?<![a-z]){re.escape(a)}\.)" for a in _ABBREVIATIONS)
_SENTENCE_END = re.compile(rf"(?<=[.!?;]){_NOT_ABBREVIATED}\s+|(?<=[。！？；])\s*|\n+", re.IGNORECASE)


def split_sentences(text: str) -> list[str]:
    """Split text into sentences (English and Chinese punctuation, and line breaks; not
    after a title or "e.g.": ``ABBREVIATION``)."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


# a fenced code block (Markdown): a line of three or more backticks or tildes, indented by at
# most three spaces, opens it; a line of the same character, at least as long, closes it, and
# a block left open runs to the end of the text
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def without_code(text: str) -> str:
    """``text`` with its fenced code blocks left out (each leaves a line break): code a user
    pastes is data, not something they say, so no rule is read from it."""
    if "```" not in text and "~~~" not in text:  # most messages: nothing to leave out
        return text
    out: list[str] = []
    fence = ""
    for line in text.splitlines(keepends=True):
        m = _FENCE.match(line)
        if not fence:
            if m and not (m.group(1)[0] == "`" and "`" in line[m.end():]):  # "```x```" is inline code
                fence = m.group(1)
                out.append("\n")
            else:
                out.append(line)
        elif m and len(m.group(1)) >= len(fence) and not line.strip().strip(fence[0]):  # fence characters alone
            fence = ""
    return "".join(out)


_CLAUSE_END = re.compile(r"\s*[，、]\s*|,\s+")


def split_clauses(sentence: str) -> list[str]:
    """Split one sentence at its commas (",", "，", "、"; not inside "1,000")."""
    return [c.strip() for c in _CLAUSE_END.split(sentence) if c and c.strip()]
