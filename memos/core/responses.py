"""OpenAI's Responses API at the edge: its items in, its items out, chat format inside.

memos keeps a session in chat-completions format. An app on ``client.responses.create``
hands :meth:`memos.Memory.add` the items it sends and gets back (``response.output``, SDK
objects or dicts; :func:`from_items` turns them into chat messages), and sends
:func:`to_items` of :meth:`memos.Memory.context` as ``input``, with :func:`to_tools` of the
tool schemas::

    tools = mem.tools() + MY_TOOLS                      # chat format, as memos counts them
    mem.add({"role": "user", "content": text})
    response = client.responses.create(model="gpt-4o-mini", input=to_items(mem.context(tools=tools)),
                                       tools=to_tools(tools))
    mem.add(response.output)                            # one response's items together

A response's function calls are one assistant turn: add its output items in one call, as
above, so they become one assistant message with its tool calls. ``reasoning`` items are
left out (the chat format has no place for them; a stateless request may omit them), and so
are the server-side tools' items (``web_search_call`` and the like: the model has already
used what they returned, in the message that follows them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import InvalidMessage

__all__ = ["RESPONSES_ITEM_TYPES", "as_plain", "from_items", "is_item_type", "is_responses_item", "to_items", "to_tools"]

# items memos turns into chat messages, and items it leaves out
_CONVERTED = {"message", "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output"}
_LEFT_OUT = {"reasoning", "web_search_call", "file_search_call", "image_generation_call", "code_interpreter_call",
             "mcp_list_tools", "mcp_call", "item_reference"}
RESPONSES_ITEM_TYPES = frozenset(_CONVERTED | _LEFT_OUT)
# content parts: the Responses API's name -> the chat format's
_TEXT_PARTS = {"input_text", "output_text"}


def as_plain(item: Any) -> Any:
    """An SDK object (one with ``model_dump``) as its dict, without its ``None`` fields;
    anything else as it is."""
    return item.model_dump(exclude_none=True) if hasattr(item, "model_dump") and not isinstance(item, Mapping) else item


def is_item_type(kind: Any) -> bool:
    """Whether ``kind`` names a Responses item (``function_call``, ``reasoning``, ``web_search_call``
    ...), as LangChain's chat model on the Responses API also puts them among a reply's
    content blocks, beside its text and its ``tool_calls``."""
    return isinstance(kind, str) and (kind in RESPONSES_ITEM_TYPES or kind.endswith(("_call", "_call_output")))


def is_responses_item(item: Any) -> bool:
    """Whether ``item`` is a Responses API item (a dict or SDK object whose ``type`` is an
    item's, such as ``message`` or ``function_call``: chat messages have none; or a message
    whose content parts are ``input_text`` / ``output_text`` / ``input_image`` /
    ``input_file``), not a chat message."""
    data = as_plain(item)
    if not isinstance(data, Mapping):
        return False
    if is_item_type(data.get("type")):
        return True  # chat messages have no type
    content = data.get("content")
    return "role" in data and isinstance(content, list) and any(
        isinstance(p, Mapping) and p.get("type") in (*_TEXT_PARTS, "input_image", "input_file") for p in content)


def _output_text(output: Any) -> Any:
    """A function call output (a string, or a list of content parts) as chat tool content."""
    if isinstance(output, str) or output is None:
        return output or ""
    if isinstance(output, list):
        return _chat_parts(output, "function_call_output")
    return json.dumps(output, ensure_ascii=False)


def _chat_parts(parts: Sequence[Any], where: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, p in enumerate(parts):
        p = as_plain(p)
        kind = p.get("type") if isinstance(p, Mapping) else None
        if kind in _TEXT_PARTS or kind == "text":
            out.append({"type": "text", "text": p.get("text")})
        elif kind == "refusal":
            out.append({"type": "text", "text": p.get("refusal")})
        elif kind == "input_image":
            if p.get("image_url") is None:  # an uploaded file_id has no chat form
                raise InvalidMessage(f"{where}: content part {i} is an input_image without an image_url "
                                     "(a file_id cannot be sent in chat format); give its URL or a data URL")
            image = {"url": p["image_url"]}
            if p.get("detail"):
                image["detail"] = p["detail"]
            out.append({"type": "image_url", "image_url": image})
        elif kind == "input_file":
            out.append({"type": "file", "file": {k: p[k] for k in ("file_id", "file_data", "filename") if k in p}})
        else:
            out.append(dict(p) if isinstance(p, Mapping) else p)  # validation names it
    return out


def _message_content(content: Any, role: str, where: str) -> Any:
    if not isinstance(content, list):
        return content
    parts = _chat_parts(content, where)
    if role != "user" and all(p.get("type") == "text" for p in parts):
        return "".join(str(p.get("text") or "") for p in parts)  # an assistant's or system's text, as chat has it
    return parts


def from_items(items: Any) -> list[dict[str, Any]]:
    """Responses API items (one, or a sequence) as chat messages, in order.

    A message item keeps its role and text (``input_text`` / ``output_text`` parts become
    text, ``input_image`` an ``image_url`` part, ``refusal`` its text); ``function_call`` and
    ``custom_tool_call`` items become the tool calls of one assistant message, with the
    assistant text just before them; ``function_call_output`` and
    ``custom_tool_call_output`` become tool messages. ``reasoning`` and server-side tool
    items are left out. Chat messages among them pass through unchanged. Raises
    :class:`~memos.core.errors.InvalidMessage` for an item of unknown type."""
    seq = list(items) if isinstance(items, (list, tuple)) else [items]
    out: list[dict[str, Any]] = []
    open_turn: dict[str, Any] | None = None  # the assistant message a response's calls join
    for i, raw in enumerate(seq):
        where = f"item {i}" if len(seq) > 1 else "item"
        data = as_plain(raw)
        if not isinstance(data, Mapping):
            raise InvalidMessage(f"{where}: expected a Responses item or chat message, got {type(data).__name__}")
        kind = data.get("type")
        if kind is None and not is_responses_item(data):
            out.append(dict(data))  # a chat message; an assistant's text is the start of a turn calls may join
            plain_text = data.get("role") == "assistant" and "tool_calls" not in data and isinstance(data.get("content"), str)
            open_turn = out[-1] if plain_text else None
            continue
        if kind in _LEFT_OUT:
            continue
        if kind in ("function_call", "custom_tool_call"):
            call_id = data.get("call_id")
            if not isinstance(call_id, str) or not call_id:
                raise InvalidMessage(f"{where}: a {kind} item needs a non-empty 'call_id'")
            if kind == "function_call":
                call = {"id": call_id, "type": "function",
                        "function": {"name": data.get("name"), "arguments": data.get("arguments", "{}")}}
            else:
                call = {"id": call_id, "type": "custom", "custom": {"name": data.get("name"), "input": data.get("input", "")}}
            if open_turn is None:
                open_turn = {"role": "assistant", "content": None}
                out.append(open_turn)
            open_turn.setdefault("tool_calls", []).append(call)
            continue
        if kind in ("function_call_output", "custom_tool_call_output"):
            out.append({"role": "tool", "tool_call_id": data.get("call_id"), "content": _output_text(data.get("output"))})
            open_turn = None
            continue
        if kind not in (None, "message"):
            raise InvalidMessage(f"{where}: Responses item type {kind!r} is not supported; memos reads "
                                 f"{sorted(_CONVERTED)} and leaves out {sorted(_LEFT_OUT)}")
        role = data.get("role")
        message = {"role": role, "content": _message_content(data.get("content"), str(role), where)}
        if role == "assistant" and open_turn is not None and "tool_calls" not in open_turn:
            # two message items of one response before its calls: one turn's text
            open_turn["content"] = "\n\n".join(str(t) for t in (open_turn.get("content"), message["content"]) if t)
            continue
        out.append(message)
        open_turn = message if role == "assistant" and isinstance(message["content"], str) else None
    return out


def _input_parts(parts: list[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in parts:
        kind = p.get("type") if isinstance(p, Mapping) else None
        if kind == "text":
            out.append({"type": "input_text", "text": p.get("text", "")})
        elif kind == "image_url":
            image = p.get("image_url") or {}
            url = image.get("url") if isinstance(image, Mapping) else image
            out.append({"type": "input_image", "image_url": url, "detail": (image.get("detail") if isinstance(image, Mapping)
                                                                           else None) or "auto"})
        elif kind == "file":
            out.append({"type": "input_file", **dict(p.get("file") or {})})
        elif isinstance(p, Mapping):  # audio and the like: named, as Responses input has no such part
            out.append({"type": "input_text", "text": f"[{kind}]"})
    return out


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return str(content)


def to_items(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages (what :meth:`memos.Memory.context` returns) as Responses ``input`` items:
    an assistant's tool calls become ``function_call`` (or ``custom_tool_call``) items after
    its text, a tool message the matching ``*_output`` item, any other message an input
    message (text parts as ``input_text``, images as ``input_image``)."""
    out: list[dict[str, Any]] = []
    custom: set[str] = set()
    for m in messages:
        role = m.get("role")
        if role == "tool":
            call_id = str(m.get("tool_call_id") or "")
            kind = "custom_tool_call_output" if call_id in custom else "function_call_output"
            out.append({"type": kind, "call_id": call_id, "output": _text(m.get("content"))})
            continue
        content = m.get("content")
        calls = m.get("tool_calls") or [] if role == "assistant" else []
        if isinstance(content, list) and role != "assistant":
            out.append({"role": role, "content": _input_parts(content)})
        elif content or not calls:
            out.append({"role": role, "content": _text(content)})
        for call in calls:
            call_id = str(call.get("id") or "")
            if call.get("type") == "custom":
                custom.add(call_id)
                c = call.get("custom") or {}
                out.append({"type": "custom_tool_call", "call_id": call_id, "name": str(c.get("name") or ""),
                            "input": str(c.get("input") or "")})
            else:
                fn = call.get("function") or {}
                out.append({"type": "function_call", "call_id": call_id, "name": str(fn.get("name") or ""),
                            "arguments": str(fn.get("arguments") or "{}")})
    return out


def to_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat-completions tool schemas (``{"type": "function", "function": {...}}``, as
    :meth:`memos.Memory.tools` gives them) as the Responses API takes them (the function's
    fields at the top level). A schema already in that form passes unchanged."""
    out: list[dict[str, Any]] = []
    for t in tools:
        kind = t.get("type")
        inner = t.get(kind) if isinstance(kind, str) else None
        out.append({"type": kind, **inner} if isinstance(inner, Mapping) else dict(t))
    return out
