"""The memory tools the agent can call: OpenAI function-calling schemas and their dispatch.

:data:`TOOLS` goes into ``client.chat.completions.create(tools=...)`` (strict JSON
schemas: every property listed as required, optional ones nullable). :func:`dispatch`
checks a call's arguments with Pydantic and runs it against a :class:`memos.Memory`;
whatever is wrong with the call (bad JSON, wrong types, unknown fields, out-of-range
numbers, an empty query, an unknown tool) comes back as an error result the model can
read and correct, never as an exception.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

if TYPE_CHECKING:
    from .memory import Memory

__all__ = ["ARCHIVE_TOOL", "PIN_TOOL", "RETRIEVE_TOOL", "TOOLS", "TOOL_NAMES", "dispatch", "handle_tool_call"]

MAX_TOP_K = 20

ARCHIVE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "archive",
        "description": (
            "Save something to long-term memory verbatim, so it can be found later with `retrieve` even after "
            "it has left the conversation. Give `content` (text to save) or `message_ids` (ids of earlier "
            "messages to save as they are), and optional `tags`."
        ),
        "strict": True,
        "parameters": {
            "type": "object",
            "properties": {
                "content": {"type": ["string", "null"], "description": "Text to save."},
                "message_ids": {"type": ["array", "null"], "items": {"type": "string"},
                                "description": "Ids of logged messages to save verbatim."},
                "tags": {"type": ["array", "null"], "items": {"type": "string"}, "description": "Labels for later search."},
            },
            "required": ["content", "message_ids", "tags"],
            "additionalProperties": False,
        },
    },
}

RETRIEVE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "retrieve",
        "description": (
            "Search long-term memory (earlier messages, summaries, archived notes and known facts) by meaning "
            "and keywords. The results are added to your context as recalled memory."
        ),
        "strict": True,
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for."},
                "top_k": {"type": ["integer", "null"], "description": f"How many results, 1-{MAX_TOP_K} (default 5)."},
                "since": {"type": ["string", "null"], "description": "Only items from this time on (ISO 8601)."},
                "until": {"type": ["string", "null"], "description": "Only items up to this time (ISO 8601)."},
                "kind": {"type": ["string", "null"],
                         "enum": ["message", "tool_chain", "summary", "tool_result", "note", "excerpt", "fact", None],
                         "description": "Only results of this kind."},
                "page": {"type": ["integer", "null"], "description": "Page of results, from 1 (default 1)."},
            },
            "required": ["query", "top_k", "since", "until", "kind", "page"],
            "additionalProperties": False,
        },
    },
}

PIN_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "pin",
        "description": (
            "Keep a rule or fact the user gave in every future context (for example a constraint like "
            "'never book flights before 9am'). Use sparingly."
        ),
        "strict": True,
        "parameters": {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "The rule or fact, in one sentence."}},
            "required": ["text"],
            "additionalProperties": False,
        },
    },
}

TOOLS: tuple[dict[str, Any], ...] = (ARCHIVE_TOOL, RETRIEVE_TOOL, PIN_TOOL)
TOOL_NAMES = frozenset(t["function"]["name"] for t in TOOLS)


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ArchiveArgs(_Args):
    content: str | None = None
    message_ids: list[str] | None = None
    tags: list[str] | None = None

    @field_validator("content")
    @classmethod
    def _content(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("content must not be empty")
        return v


class RetrieveArgs(_Args):
    query: str
    top_k: int | None = Field(default=None, ge=1, le=MAX_TOP_K)
    since: str | None = None
    until: str | None = None
    kind: Literal["message", "tool_chain", "summary", "tool_result", "note", "excerpt", "fact"] | None = None
    page: int | None = Field(default=None, ge=1, le=100)

    @field_validator("query")
    @classmethod
    def _query(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("query must not be empty")
        if len(v) > 2000:
            raise ValueError("query must be at most 2000 characters")
        return v


class PinArgs(_Args):
    text: str = Field(min_length=1, max_length=500)


def _timestamp(value: str | None, name: str) -> float | None:
    if value is None:
        return None
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"{name} must be an ISO 8601 time like 2026-05-20 or 2026-05-20T14:30:00Z") from exc
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def _error(message: str) -> dict[str, Any]:
    return {"status": "error", "error": message}


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(x) for x in err.get("loc", ())) or "arguments"
        msg = err.get("msg", "invalid")
        if err.get("type") == "extra_forbidden":
            msg = "unknown field"
        parts.append(f"{where}: {msg}")
    return "invalid arguments: " + "; ".join(parts)


def dispatch(memory: Memory, name: str, arguments: Any) -> dict[str, Any]:
    """Run one memory tool call; returns the result as data (``status`` 'ok' or 'error')."""
    if name not in TOOL_NAMES:
        return _error(f"unknown tool {name!r}; memory tools are {sorted(TOOL_NAMES)}")
    if isinstance(arguments, (str, bytes)):
        try:
            arguments = json.loads(arguments or "{}")
        except (ValueError, UnicodeDecodeError) as exc:
            return _error(f"arguments are not valid JSON ({exc})")
    if not isinstance(arguments, dict):
        return _error("arguments must be a JSON object")
    try:
        if name == "archive":
            a = ArchiveArgs.model_validate(arguments)
            if not a.content and not a.message_ids:
                return _error("give content or message_ids")
            item = memory.archive(content=a.content, message_ids=a.message_ids, tags=a.tags or ())
            return {"status": "ok", "archived_id": item}
        if name == "retrieve":
            r = RetrieveArgs.model_validate(arguments)
            since, until = _timestamp(r.since, "since"), _timestamp(r.until, "until")
            top_k, page = r.top_k or 5, r.page or 1
            hits = memory.retrieve(r.query, top_k, since=since, until=until, kind=r.kind, page=page, promote=True)
            return {"status": "ok", "page": page, "results": [h.to_dict(preview_chars=300) for h in hits],
                    "note": "the full text of these results is in the [memory: recalled] section of your context"}
        p = PinArgs.model_validate(arguments)
        fact = memory.pin(text=p.text)
        return {"status": "ok", "pinned_fact_id": fact.id if fact is not None else None}
    except ValidationError as exc:
        return _error(_validation_message(exc))
    except ValueError as exc:
        return _error(str(exc))


def handle_tool_call(memory: Memory, tool_call: Any) -> dict[str, Any]:
    """Run one memory tool call against ``memory`` and return the ``tool`` message to add.

    Accepts the SDK's tool-call objects or their dicts. Whatever is wrong with the call
    comes back as an error result the model can read, never as an exception."""
    if hasattr(tool_call, "model_dump") and not isinstance(tool_call, dict):
        tool_call = tool_call.model_dump()
    call_id, name, args = "", "", None
    if isinstance(tool_call, dict):
        call_id = str(tool_call.get("id") or "")
        fn = tool_call.get("function")
        if isinstance(fn, dict):
            name, args = str(fn.get("name") or ""), fn.get("arguments")
    if not name:
        result: dict[str, Any] = {"status": "error", "error": "a tool call needs function.name and function.arguments"}
    else:
        try:
            result = dispatch(memory, name, args)
        except Exception as exc:  # a failure inside memos must not end the agent's turn
            result = {"status": "error", "error": f"{name} failed: {type(exc).__name__}: {exc}"}
    return {"role": "tool", "tool_call_id": call_id, "content": json.dumps(result, ensure_ascii=False)}
