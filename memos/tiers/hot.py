"""The hot tier: recent raw messages, grouped into units.

A unit is what paging moves as one piece: a single message, or an assistant message
with ``tool_calls`` together with the tool messages answering it. A unit whose calls
are not all answered is *in flight*.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..messages import Message

__all__ = ["Unit", "group_units", "placeholder", "render_text"]


@dataclass(frozen=True)
class Unit:
    """Messages that move together: one message, or a whole tool chain."""

    messages: tuple[Message, ...]
    in_flight: bool = False

    @property
    def tokens(self) -> int:
        """Logged token count of the unit's messages."""
        return sum(m.tokens for m in self.messages)

    @property
    def ids(self) -> tuple[str, ...]:
        """Ids of the unit's messages, in order."""
        return tuple(m.id for m in self.messages)

    @property
    def is_tool_chain(self) -> bool:
        """Whether the unit is an assistant tool call with its results."""
        return bool(self.messages[0].tool_call_ids)


def group_units(messages: Sequence[Message]) -> list[Unit]:
    """Group consecutive messages into units; tool results join the call they answer.

    Assumes the order :func:`memos.messages.validate_batch` enforces: the results of an
    assistant's tool calls directly follow it.
    """
    units: list[Unit] = []
    i = 0
    n = len(messages)
    while i < n:
        m = messages[i]
        calls = m.tool_call_ids
        if not calls:
            units.append(Unit((m,)))
            i += 1
            continue
        pending = set(calls)
        chain = [m]
        i += 1
        while i < n and messages[i].role == "tool" and messages[i].data.get("tool_call_id") in pending:
            pending.discard(messages[i].data["tool_call_id"])
            chain.append(messages[i])
            i += 1
        units.append(Unit(tuple(chain), in_flight=bool(pending)))
    return units


def tool_names(units: Sequence[Unit]) -> dict[str, str]:
    """Map each tool call id in ``units`` to the function it called."""
    out = {}
    for u in units:
        for call in u.messages[0].data.get("tool_calls") or ():
            out[call["id"]] = call["function"]["name"]
    return out


def placeholder(message: Message, tool_name: str, preview_chars: int) -> str:
    """The text that stands in the hot tier for a compacted tool result."""
    text = " ".join(message.text.split())
    preview = text[:preview_chars] + ("…" if len(text) > preview_chars else "")
    return (
        f"[memos: result of {tool_name} compacted; {message.tokens} tokens, full text in the "
        f"memory log as message {message.id}] {preview}"
    )


def render_text(data: dict[str, Any]) -> str:
    """A one-line readable form of any chat message (tool calls spelled out)."""
    role = data.get("role", "")
    parts = []
    text = " ".join(_content_text(data).split())
    if text:
        parts.append(text)
    for call in data.get("tool_calls") or ():
        fn = call.get("function", {})
        parts.append(f"called {fn.get('name')}({fn.get('arguments', '')})")
    body = "; ".join(parts)
    if role == "tool":
        return f"tool result: {body}"
    return body


def _content_text(data: dict[str, Any]) -> str:
    content = data.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(
        p.get("text", "") if p.get("type") == "text" else json.dumps(p, ensure_ascii=False)
        for p in content
        if isinstance(p, dict)
    )
