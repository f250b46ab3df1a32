"""Splitting text into sentences, for English, Chinese and mixed text."""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["ABBREVIATION", "headings", "in_context", "list_item", "split_clauses", "split_sentences", "without_code"]

# Abbreviations a name or an example follows ("Dr. Alvarez", "St. Louis", "e.g. km"): their
# dot ends no sentence. A closed class; "etc.", "No." and "Jr." end sentences as often.
_ABBREVIATIONS = ("mr", "mrs", "ms", "mx", "dr", "prof", "st", "mt", "vs", "e.g", "i.e")
ABBREVIATION = "(?:" + "|".join(rf"(?<![a-z]){re.escape(a)}\." for a in _ABBREVIATIONS) + ")"
_NOT_ABBREVIATED = "".join(rf"(?<!(?<![a-z]){re.escape(a)}\.)" for a in _ABBREVIATIONS)
_SENTENCE_END = re.compile(rf"(?<=[.!?;]){_NOT_ABBREVIATED}\s+|(?<=[。！？；])\s*|\n+", re.IGNORECASE)


# the marker a list item opens with: a bullet, or a number ("1.", "2)", "（3）", "一、")
_ITEM = re.compile(r"^(?:[-*+•·●▪–]|\(?（?\d{1,2}[.)）、]|[一二三四五六七八九十]{1,2}[、.])(?=\s|[^\d\s])\s*")
_HEADING_END = (":", "：")
_CJK_CHAR = re.compile(r"[\u3400-\u9fff]")


def split_sentences(text: str) -> list[str]:
    """Split text into sentences (English and Chinese punctuation, and line breaks; not
    after a title or "e.g.": ``ABBREVIATION``). A list item's number stays with its item
    ("1. Only book trains." is one sentence, not "1." and the rest)."""
    out: list[str] = []
    for s in _SENTENCE_END.split(text):
        s = s.strip() if s else ""
        if not s:
            continue
        if out and _ITEM.fullmatch(out[-1] + " "):
            out[-1] = f"{out[-1]} {s}"
        else:
            out.append(s)
    return out


def headings(sentences: Sequence[str]) -> list[str | None]:
    """For each of ``sentences``, the heading of the list it is an item of, or None: the
    nearest sentence before it that ends with a colon or is a Markdown heading, when it and
    every sentence between them open with a list marker ("My travel rules:", "- never
    Ryanair"; "**Requirements:**"; "## Rules")."""
    out: list[str | None] = []
    heading: str | None = None
    for s in sentences:
        if _ITEM.match(s) and heading is not None:
            out.append(heading)
            continue
        out.append(None)
        heading = s if _heading_text(s).endswith(_HEADING_END) or s.startswith("#") else None
    return out


def _heading_text(heading: str) -> str:
    """A heading without its Markdown marks ("## Rules", "**Requirements:**")."""
    return heading.lstrip("#").strip().strip("*_").strip()


def list_item(sentence: str) -> str:
    """``sentence`` without the list marker it opens with, if any ("- window seat": "window seat")."""
    return _ITEM.sub("", sentence, count=1)


def in_context(sentence: str, heading: str | None) -> str:
    """A list item read with its heading, its marker left out ("My travel rules: never
    Ryanair"; "我的要求，只订高铁"); any other sentence as it is. An item alone is often no
    sentence ("- window seat"): the heading says what it is."""
    if heading is None:
        return sentence
    item = list_item(sentence)
    head = _heading_text(heading).rstrip(":：").rstrip()
    return f"{head}，{item}" if _CJK_CHAR.search(head) else f"{head}: {item}"



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
