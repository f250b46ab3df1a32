"""Splitting text into sentences, for English, Chinese and mixed text."""

from __future__ import annotations

import re

__all__ = ["split_sentences"]

_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])\s*|\n+")


def split_sentences(text: str) -> list[str]:
    """Split text into sentences (English and Chinese punctuation, and line breaks)."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]
