"""OpenAI chat messages: validation and the stored record.

:func:`validate_batch` checks messages against the chat shape the OpenAI API accepts and
against the tool calls still waiting for results, and returns them normalised (only the
keys the API reads, ``None`` values dropped). :class:`Message` is a message as the log
stores it: the OpenAI dict plus id, sequence number and token count.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidMessage
from .responses import as_plain, from_items, is_item_type, is_responses_item

__all__ = ["ROLES", "Message", "as_roles", "call_input", "call_name", "message_key", "message_text", "plain_json",
           "memory_traffic", "validate_batch", "validate_message", "with_input", "without_results_of"]

ROLES = ("system", "developer", "user", "assistant", "tool")
_KEYS = {"role", "content", "name", "tool_calls", "tool_call_id"}
# what no OpenAI-compatible API takes in a participant's name (the strictest take only [a-zA-Z0-9_-])
_BAD_NAME = re.compile(r"[\s<|\\/>\x00]")
# what a tool call passes, by its type: a function's JSON arguments, a custom tool's free-form input
_CALL_KINDS = {"function": ("arguments", "a JSON string"), "custom": ("input", "a string")}
# Keys an OpenAI response message carries that do not go back into a request (``parsed``:
# structured outputs' object, parsed from the content that is kept).
_DROPPED_KEYS = {"refusal", "annotations", "audio", "function_call", "reasoning_content", "parsed"}
# What to add instead of a whole API reply, by its "object"
_WHOLE_REPLIES = {"chat.completion": "its message, completion.choices[0].message",
                  "response": "its output items, response.output"}
# Content parts of a model's own reasoning (Anthropic-style thinking; LangChain's reasoning
# block from the Responses API is an item, below): the chat format has no place for them.
_PRIVATE_PARTS = {"thinking", "redacted_thinking"}
# What a text part of a response carries that a request's does not (its citations, its item id).
_RESPONSE_PART_KEYS = {"annotations", "id"}


@dataclass(frozen=True)
class Message:
    """One logged message.

    ``data`` is the OpenAI chat dict exactly as it is sent to the model; ``seq`` is its
    position in the session (0-based), ``id`` a stable identifier, ``tokens`` its size
    as counted by the session's :class:`~memos.core.tokens.TokenCounter`.
    """

    id: str
    seq: int
    data: dict[str, Any]
    tokens: int
    created_at: float = 0.0
    pinned: bool = False
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def role(self) -> str:
        """The message's role."""
        return str(self.data["role"])

    @property
    def text(self) -> str:
        """The message's text content ('' when it has none)."""
        return message_text(self.data)

    @property
    def text_and_calls(self) -> str:
        """The message's text with the arguments of the tool calls it makes (what it quotes)."""
        args = " ".join(call_input(c) for c in self.data.get("tool_calls") or ())
        return f"{self.text} {args}" if args else self.text

    @property
    def tool_call_ids(self) -> tuple[str, ...]:
        """Ids of the tool calls an assistant message makes (empty otherwise)."""
        return tuple(c["id"] for c in self.data.get("tool_calls") or ())

    def to_openai(self) -> dict[str, Any]:
        """A copy of the message in OpenAI chat format."""
        return json.loads(json.dumps(self.data))


def message_text(data: Mapping[str, Any]) -> str:
    """The text of a chat message: its string content, or its text parts joined."""
    content = data.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(
        str(part.get("text", "")) for part in content if isinstance(part, Mapping) and part.get("type") == "text"
    )


def as_roles(roles: str | Sequence[str]) -> tuple[str, ...]:
    """``roles`` (one role, or several) as a tuple; ``ValueError`` for a name not in :data:`ROLES`."""
    out = (roles,) if isinstance(roles, str) else tuple(roles)
    if unknown := [r for r in out if r not in ROLES]:
        raise ValueError(f"roles must be among {list(ROLES)}, got {unknown!r}")
    return out


def message_key(data: Mapping[str, Any]) -> tuple[Any, ...]:
    """What identifies a chat message whatever shape a converter gave it: its role, its text,
    the tool call it answers and the tool calls it makes."""
    calls = tuple(str(c.get("id")) for c in data.get("tool_calls") or [] if isinstance(c, Mapping))
    if data.get("role") == "tool":  # read as validate_message stores it
        data = {**data, "content": _plain_content(data.get("content"))}
    return (data.get("role"), message_text(data).strip(), str(data.get("tool_call_id") or ""), calls)


# One JSON escape: a surrogate pair, a \u and four hex digits, or a one-character escape (so
# "\\u00e9" is read as an escaped backslash and the text "u00e9", not as an é).
_JSON_ESCAPE = re.compile(r"\\(?:u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|.)", re.S)


def _written_out(m: re.Match[str]) -> str:
    high, low, one = m.groups()
    if high:
        return chr(0x10000 + ((int(high, 16) - 0xD800) << 10) + (int(low, 16) - 0xDC00))
    if one:
        code = int(one, 16)
        # ASCII escapes stay (some are needed, some chosen: "\u003c" for HTML), and so do lone
        # surrogates (not UTF-8) and the two line separators JavaScript reads as line ends
        if code >= 0x80 and not 0xD800 <= code <= 0xDFFF and code not in (0x2028, 0x2029):
            return chr(code)
    return m.group(0)


def plain_json(text: str) -> str:
    """``text`` with the ``\\u`` escapes (four hex digits) of its non-ASCII characters written
    as the characters when it is JSON (what ``json.dumps`` writes by default: "\\u676d\\u5dde" for
    "杭州"), and unchanged otherwise. The JSON value is the same; the text is searchable by its
    words and, for Chinese, costs about half the tokens."""
    if "\\u" not in text or text.lstrip()[:1] not in ('{', '[', '"'):
        return text
    try:
        json.loads(text)
    except ValueError:
        return text
    return _JSON_ESCAPE.sub(_written_out, text)


def _plain_content(content: Any) -> Any:
    """A tool result's content with :func:`plain_json` applied to its text, or to each text part."""
    if isinstance(content, str):
        return plain_json(content)
    if isinstance(content, list):
        return [{**p, "text": plain_json(p["text"])} if isinstance(p, Mapping) and p.get("type") == "text"
                and isinstance(p.get("text"), str) else p for p in content]
    return content


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` with lone surrogates (what undecodable bytes become under Python's
    ``surrogateescape``) and NUL characters (which PostgreSQL's text cannot hold) replaced
    by U+FFFD, so every store can keep it and it can be sent as UTF-8."""
    return _UNSTORABLE.sub("\ufffd", text) if "\x00" in text or not text.isascii() else text


def _text_content(content: Any, where: str, *, allow_none: bool) -> Any:
    if content is None:
        if allow_none:
            return None
        raise InvalidMessage(f"{where}: 'content' is required")
    if isinstance(content, (bytes, bytearray)):  # raw tool output: invalid UTF-8 becomes U+FFFD
        return clean_text(bytes(content).decode("utf-8", errors="replace"))
    if isinstance(content, str):
        return clean_text(content)
    if isinstance(content, list):
        parts: list[dict[str, Any]] = []
        for i, part in enumerate(content):
            if not isinstance(part, Mapping):
                raise InvalidMessage(f"{where}: content part {i} must be an object, got {type(part).__name__}")
            kind = part.get("type")
            if kind == "text":
                if not isinstance(part.get("text"), str):
                    raise InvalidMessage(f"{where}: content part {i} of type 'text' needs a string 'text'")
                kept = {k: v for k, v in part.items() if k not in _RESPONSE_PART_KEYS}
                parts.append({**kept, "text": clean_text(part["text"])})
            elif kind in _PRIVATE_PARTS or is_item_type(kind):
                continue  # reasoning, or a call the message's tool_calls hold (LangChain on the Responses API)
            elif kind in ("image_url", "input_audio", "file", "refusal"):
                parts.append(dict(part))
            else:
                raise InvalidMessage(f"{where}: content part {i} has unknown type {kind!r}")
        if not parts and content:  # nothing but the model's reasoning
            return None if allow_none else ""
        return parts
    raise InvalidMessage(f"{where}: 'content' must be a string or a list of content parts, got {type(content).__name__}")


def _tool_calls(calls: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(calls, list) or not calls:
        raise InvalidMessage(f"{where}: 'tool_calls' must be a non-empty list")
    out = []
    seen: set[str] = set()
    for i, call in enumerate(calls):
        if not isinstance(call, Mapping):
            raise InvalidMessage(f"{where}: tool_calls[{i}] must be an object")
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id or "\x00" in call_id:
            raise InvalidMessage(f"{where}: tool_calls[{i}] needs a non-empty string 'id' (no NUL character)")
        if call_id in seen:
            raise InvalidMessage(f"{where}: tool call id {call_id!r} appears twice")
        seen.add(call_id)
        kind = call.get("type", "function")
        if kind not in _CALL_KINDS:
            raise InvalidMessage(f"{where}: tool_calls[{i}] has type {kind!r}; expected 'function' or 'custom'")
        key, what = _CALL_KINDS[kind]
        body = call.get(kind)
        if not isinstance(body, Mapping) or not isinstance(body.get("name"), str) or not body.get("name") \
                or "\x00" in body["name"]:
            raise InvalidMessage(f"{where}: tool_calls[{i}] needs {kind!r} with a non-empty string 'name' (no NUL "
                                 f"character)")
        value = body.get(key, "")
        if not isinstance(value, str):
            raise InvalidMessage(f"{where}: tool_calls[{i}].{kind}.{key} must be {what}")
        value = plain_json(clean_text(value)) if kind == "function" else clean_text(value)
        out.append({"id": call_id, "type": kind, kind: {"name": body["name"], key: value}})
    return out


def call_name(call: Mapping[str, Any]) -> str:
    """The name of the tool a tool call calls: a function's, or a custom tool's."""
    return str((call.get("function") or call.get("custom") or {}).get("name", ""))


def without_results_of(messages: Sequence[Message], tool: Callable[[str], bool]) -> list[Message]:
    """``messages`` less the results of the calls among them to the tools ``tool`` names."""
    results = _results_of(messages, tool)
    return [m for m in messages if m.id not in results] if results else list(messages)


def memory_traffic(messages: Sequence[Message], tool: Callable[[str], bool], *, earlier: Iterable[Message] = ()) -> set[str]:
    """The ids of ``messages`` that are only traffic with the tools ``tool`` names: the results
    of their calls (made among ``earlier`` or ``messages``), and assistant messages that make
    such calls and say nothing of their own."""
    calls_only = {m.id for m in messages if (calls := m.data.get("tool_calls"))
                  and not m.text.strip() and all(tool(call_name(c)) for c in calls)}
    return calls_only | _results_of(messages, tool, earlier)


def _results_of(messages: Sequence[Message], tool: Callable[[str], bool], earlier: Iterable[Message] = ()) -> set[str]:
    """The ids of the tool results among ``messages`` that answer calls to the tools ``tool``
    names, made among ``earlier`` or ``messages``."""
    answers = [m for m in messages if m.role == "tool"]
    if not answers:  # most messages: nothing to look up
        return set()
    names = {str(c.get("id")): call_name(c) for m in (*earlier, *messages) for c in m.data.get("tool_calls") or ()}
    return {m.id for m in answers if tool(names.get(str(m.data.get("tool_call_id")), ""))}


def call_input(call: Mapping[str, Any]) -> str:
    """What a tool call passes: a function's JSON arguments, or a custom tool's free-form input."""
    if call.get("type") == "custom":
        return str((call.get("custom") or {}).get("input", ""))
    return str((call.get("function") or {}).get("arguments", ""))


def with_input(call: Mapping[str, Any], text: str) -> dict[str, Any]:
    """A copy of ``call`` that passes ``text`` (as its arguments, or its custom input)."""
    if call.get("type") == "custom":
        return {**call, "custom": {**call["custom"], "input": text}}
    return {**call, "function": {**call["function"], "arguments": text}}


def _said_instead(raw: Mapping[str, Any]) -> str | None:
    """What an assistant response with no content said: its refusal ("I can't help with
    that."), or the transcript of its audio."""
    refusal = raw.get("refusal")
    if isinstance(refusal, str) and refusal:
        return refusal
    audio = raw.get("audio")
    transcript = audio.get("transcript") if isinstance(audio, Mapping) else None
    return transcript if isinstance(transcript, str) and transcript else None


def validate_message(raw: Any, where: str = "message") -> dict[str, Any]:
    """Check one message's shape and return it normalised; raise :class:`InvalidMessage`.

    Accepts plain dicts and objects with ``model_dump()`` (the OpenAI SDK's message types). An
    assistant response with no content keeps its refusal, or its audio's transcript, as content.
    A tool result or function arguments that are JSON keep their value but have their
    escaped non-ASCII characters written out (:func:`plain_json`). Tool results are not
    matched to their calls here: see :func:`validate_batch`.
    """
    raw = as_plain(raw)
    if not isinstance(raw, Mapping):
        raise InvalidMessage(f"{where}: expected a dict in OpenAI chat format, got {type(raw).__name__}")
    whole = _WHOLE_REPLIES.get(str(raw.get("object")))
    if whole is not None:
        raise InvalidMessage(f"{where}: got a whole {raw.get('object')} object; add {whole}")
    data = {k: v for k, v in raw.items() if v is not None and k not in _DROPPED_KEYS}
    unknown = set(data) - _KEYS
    if unknown:
        raise InvalidMessage(f"{where}: unknown field(s) {sorted(unknown)}; allowed: {sorted(_KEYS)}")
    role = data.get("role")
    if role is None:
        raise InvalidMessage(f"{where}: 'role' is missing")
    if role not in ROLES:
        raise InvalidMessage(f"{where}: unknown role {role!r}; expected one of {list(ROLES)}")
    where = f"{where} (role {role!r})"
    out: dict[str, Any] = {"role": role}
    if "name" in data:
        if not isinstance(data["name"], str) or not data["name"]:
            raise InvalidMessage(f"{where}: 'name' must be a non-empty string")
        if _BAD_NAME.search(data["name"]):  # logged, it would fail every request that held it
            raise InvalidMessage(f"{where}: 'name' {data['name']!r} may not hold spaces, a NUL or any of <|\\/> (the "
                                 f"chat API refuses it); for example {_BAD_NAME.sub('_', data['name'])!r}")
        out["name"] = data["name"]
    if role == "assistant":
        if "tool_calls" in data:
            calls = _tool_calls(data["tool_calls"], where)
            content = _text_content(data.get("content"), where, allow_none=True)
            if content is not None:
                out["content"] = content
            out["tool_calls"] = calls
        else:
            out["content"] = _text_content(data.get("content", _said_instead(raw)), where, allow_none=False)
    else:
        if "tool_calls" in data:
            raise InvalidMessage(f"{where}: only assistant messages may have 'tool_calls'")
        out["content"] = _text_content(data.get("content"), where, allow_none=False)
    if role == "tool":
        out["content"] = _plain_content(out["content"])  # a JSON result's escapes written out: the same value
        call_id = data.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id or "\x00" in call_id:
            raise InvalidMessage(f"{where}: 'tool_call_id' is required and must be a non-empty string (no NUL "
                                 f"character)")
        out["tool_call_id"] = call_id
    elif "tool_call_id" in data:
        raise InvalidMessage(f"{where}: only tool messages may have 'tool_call_id'")
    return out


def validate_batch(raw: Any, pending_calls: Sequence[str], known_call_ids: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Validate one message or a list of them, in order, as the next messages of a session.

    ``pending_calls`` are the tool call ids of the newest assistant message still waiting
    for results. A tool message must answer one of them; while any is unanswered only
    tool messages may follow (the API rejects anything else). ``known_call_ids`` are all
    call ids already used in the session, so a reused id is caught.
    Responses API items are read as the chat messages they stand for
    (:func:`memos.core.responses.from_items`); a batch of nothing but reasoning items is empty.
    Returns the normalised messages; raises :class:`InvalidMessage` naming the first bad one.
    """
    # SDK objects as dicts once, here: the Responses check and validation both read them
    items = [as_plain(m) for m in (raw if isinstance(raw, (list, tuple)) else [raw])]
    if not items:
        raise InvalidMessage("add() needs at least one message")
    responses = any(map(is_responses_item, items))
    if responses:
        items = from_items(items)  # Responses API items: chat messages (reasoning items left out)
    hint = "; add a response's output items in one call, mem.add(response.output)" if responses else ""
    pending = list(pending_calls)
    used = set(known_call_ids)
    out = []
    for i, item in enumerate(items):
        where = f"message {i}" if len(items) > 1 else "message"
        msg = validate_message(item, where)
        role = msg["role"]
        if role == "tool":
            call_id = msg["tool_call_id"]
            if call_id not in pending:
                if pending:
                    raise InvalidMessage(
                        f"{where}: tool_call_id {call_id!r} does not match a pending tool call; pending: {pending}"
                    )
                raise InvalidMessage(
                    f"{where}: tool_call_id {call_id!r} does not answer any tool call (no call is waiting for a result)"
                )
            pending.remove(call_id)
        else:
            if pending:
                article = "an" if role[0] in "aeiou" else "a"
                raise InvalidMessage(f"{where}: {article} {role} message cannot follow unanswered tool calls {pending}; "
                                     f"add their tool results first{hint}")
            if role == "assistant" and "tool_calls" in msg:
                ids = [c["id"] for c in msg["tool_calls"]]
                reused = [c for c in ids if c in used]
                if reused:
                    raise InvalidMessage(f"{where}: tool call id(s) {reused} were already used in this session")
                used.update(ids)
                pending = ids
        out.append(msg)
    return out
