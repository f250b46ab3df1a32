"""Splitting text into sentences, for English, Chinese and mixed text."""

from __future__ import annotations

import re

__all__ = ["ABBREVIATION", "split_clauses", "split_sentences"]

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


_CLAUSE_END = re.compile(r"\s*[，、]\s*|,\s+")


def split_clauses(sentence: str) -> list[str]:
    """Split one sentence at its commas (",", "，", "、"; not inside "1,000")."""
    return [c.strip() for c in _CLAUSE_END.split(sentence) if c and c.strip()]
