"""Scorers that need no LLM: is the evidence, or the answer, in the prompt?"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..core.messages import call_input

__all__ = ["answer_contained", "context_text", "evidence_recall", "mean", "preference_in_context"]


def context_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """All text a prompt shows the model (contents and tool-call arguments), one block."""
    parts = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
        for call in m.get("tool_calls") or ():
            parts.append(call_input(call))
    return "\n".join(parts)


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


def evidence_recall(context: str, evidence: Sequence[str]) -> float | None:
    """Share of the evidence texts found verbatim (whitespace and case folded) in the
    context; None when there is no evidence to look for."""
    if not evidence:
        return None
    ctx = _norm(context)
    return sum(_norm(e) in ctx for e in evidence) / len(evidence)


def answer_contained(context: str, answer: Any) -> bool:
    """Whether the gold answer string appears in the context (case and whitespace folded)."""
    text = _norm(str(answer))
    return bool(text) and text in _norm(context)


def preference_in_context(context: str, preference: str) -> bool:
    """Whether the stated preference appears in the context (case and whitespace folded)."""
    text = _norm(preference)
    return bool(text) and text in _norm(context)


def mean(values: Sequence[float]) -> float:
    """The mean rounded to 4 places (0.0 for no values), as the results record rates."""
    return round(sum(values) / len(values), 4) if values else 0.0
