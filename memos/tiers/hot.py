"""The hot tier: recent raw messages, grouped into units.

A unit is what paging moves as one piece: a single message, or an assistant message
with ``tool_calls`` together with the tool messages answering it. A unit whose calls
are not all answered is *in flight*.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.messages import Message, call_input, call_name
from ..text.patterns import identifier_spans

__all__ = ["Unit", "clip_json", "group_units", "placeholder", "render_text"]


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

    Assumes the order :func:`memos.core.messages.validate_batch` enforces: the results of an
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
            out[call["id"]] = call_name(call)
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
        parts.append(f"called {call_name(call)}({call_input(call)})")
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
    return "\n".join(_part_text(p) for p in content if isinstance(p, dict))


def _part_text(part: dict[str, Any]) -> str:
    """A content part as text: its text, or a short stand-in for an image, a file or audio
    (never the bytes of a data URL, which would fill a summary, a transcript or the archive)."""
    kind = part.get("type")
    if kind == "text":
        return str(part.get("text", ""))
    if kind == "refusal":
        return str(part.get("refusal", ""))
    inner = part.get(str(kind))
    if kind == "image_url" and isinstance(inner, dict):
        url = str(inner.get("url", ""))
        return f"[image: {url[:200]}]" if url.startswith(("http://", "https://")) else "[image]"
    if kind == "file" and isinstance(inner, dict) and inner.get("filename"):
        return f"[file: {str(inner['filename'])[:200]}]"
    return f"[{kind}]"


_ITEM_STEPS = (40, 20, 10, 5, 3, 2, 1)
_MIN_CHARS = 8
_USEFUL_CHARS = 80
_ID_OVERRUN = 40  # how far past the cut an id is carried whole when tails lose their ids


def _cut(s: str, chars: int, keep_ids: bool, spans: Sequence[tuple[int, int, str]]) -> str:
    """``s`` cut to about ``chars`` characters, never inside one of its identifier ``spans``;
    with ``keep_ids`` the identifiers of the cut-off tail follow the ellipsis."""
    if len(s) <= chars:
        return s
    end = chars
    for start, stop, _ in spans:
        if start >= end:
            break
        if stop > end:
            end = stop if keep_ids or stop - end <= _ID_OVERRUN else start
            break
    if end >= len(s):
        return s
    head = s[:end]
    tail = list(dict.fromkeys(t for start, _, t in spans if start >= end and t not in head)) if keep_ids else []
    return head + "…" + ("(" + ", ".join(tail) + ")" if tail else "")


def clip_json(text: str, max_tokens: int, count: Callable[[str], int], note: str) -> str | None:
    """``text`` (a JSON object or array) cut to about ``max_tokens`` tokens and still valid
    JSON: long strings are shortened (the longest most, never inside an identifier, and the
    identifiers of a cut-off tail kept while they fit), long arrays keep their first items, and
    ``note`` (where the full text is) is added under ``"_memos"`` (or as the last item of an
    array). None when ``text`` is not a JSON object or array."""
    try:
        value = json.loads(text)
    except (ValueError, TypeError):
        return None
    if not isinstance(value, (dict, list)):
        return None

    spans: dict[str, list[tuple[int, int, str]]] = {}

    def shrink(v: Any, chars: int, items: int, keep_ids: bool) -> Any:
        if isinstance(v, str):
            if len(v) <= chars:
                return v
            if v not in spans:
                spans[v] = identifier_spans(v)
            return _cut(v, chars, keep_ids, spans[v])
        if isinstance(v, list):
            kept = [shrink(x, chars, items, keep_ids) for x in v[:items]]
            return kept + ([f"… {len(v) - items} more"] if len(v) > items else [])
        if isinstance(v, dict):
            keys = list(v)[: max(items, 8)]
            out = {k: shrink(v[k], chars, items, keep_ids) for k in keys}
            if len(v) > len(keys):
                out["…"] = f"{len(v) - len(keys)} more fields"
            return out
        return v

    def dump(v: Any) -> str:
        if isinstance(v, dict):
            v = {"_memos": note, **v}
        else:
            v = [*v, {"_memos": note}]
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"))

    def longest(v: Any) -> int:
        if isinstance(v, str):
            return len(v)
        children = v.values() if isinstance(v, dict) else v if isinstance(v, list) else ()
        return max((longest(x) for x in children), default=0)

    def fitted(chars: int, items: int, keep_ids: bool) -> str | None:
        out = dump(shrink(value, chars, items, keep_ids))
        return out if count(out) <= max_tokens else None

    top = max(longest(value), _MIN_CHARS)
    for keep_ids in (True, False):
        for floor in (min(top, _USEFUL_CHARS), _MIN_CHARS):  # fewer items read whole before many stubs
            for items in _ITEM_STEPS:
                best = fitted(floor, items, keep_ids)
                if best is None:
                    continue
                lo, hi = floor, top  # the longest cut that fits: short strings stay whole, long ones give way
                while lo < hi:
                    mid = (lo + hi + 1) // 2
                    out = fitted(mid, items, keep_ids)
                    if out is None:
                        hi = mid - 1
                    else:
                        lo, best = mid, out
                return best
    return json.dumps({"_memos": note}, ensure_ascii=False)
