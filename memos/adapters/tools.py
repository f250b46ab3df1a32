"""The memory tools the agent can call: a registry of pydantic argument models, the OpenAI
function-calling schemas generated from them, and the dispatch.

Each :class:`MemoryTool` pairs a name and description with the pydantic model that validates
its arguments; its schema is generated from that model by ``openai.pydantic_function_tool``
(strict: every property listed as required, optional ones nullable, the length and range
limits included), so the schema the model sees and the validation it meets cannot drift.
:func:`tool_schemas` gives the schemas, optionally with a name prefix (``memory_retrieve``)
so they never collide with an app's own tools; :func:`dispatch` routes a call by name
through :data:`REGISTRY`. Whatever is wrong with a call (bad JSON, wrong types, unknown
fields, out-of-range numbers, an empty query, an unknown tool) comes back as an error result
the model can read and correct, never as an exception.

``archive``, ``retrieve`` and ``pin`` are offered to a chat agent by default; ``facts`` and
``forget`` are there for hosts that manage the memory itself (the MCP server).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal, Protocol

import openai
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..core.config import TOOL_PREFIX
from ..storage.facts import Fact, ForgetRecord
from ..storage.items import Hit

__all__ = [
    "AGENT_TOOLS", "REGISTRY", "TOOLS", "TOOL_NAMES", "MemoryTool", "RequestTools", "ToolHost", "check_prefix", "dispatch",
    "handle_tool_call", "run_tool", "tool_name", "tool_schemas",
]

MAX_TOP_K = 20
HitKind = Literal["message", "tool_chain", "summary", "tool_result", "note", "excerpt", "fact"]


class _Args(BaseModel):
    # no docstrings on the argument models: pydantic would send them to the model as descriptions
    model_config = ConfigDict(extra="forbid", strict=True)


class ArchiveArgs(_Args):
    content: str | None = Field(default=None, max_length=20_000, description="Text to save.")
    message_ids: list[str] | None = Field(default=None, max_length=200,
                                          description="Ids of logged messages to save verbatim.")
    tags: list[str] | None = Field(default=None, max_length=20, description="Labels for later search.")

    @field_validator("content")
    @classmethod
    def _content(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("content must not be empty")
        return v


class RetrieveArgs(_Args):
    query: str = Field(max_length=2000, description="What to look for.")
    top_k: int | None = Field(default=None, ge=1, le=MAX_TOP_K, description=f"How many results, 1-{MAX_TOP_K} (default 5).")
    since: str | None = Field(default=None, max_length=40, description="Only items from this time on (ISO 8601).")
    until: str | None = Field(default=None, max_length=40, description="Only items up to this time (ISO 8601).")
    kind: HitKind | None = Field(default=None, description="Only results of this kind.")
    page: int | None = Field(default=None, ge=1, le=100, description="Page of results, from 1 (default 1).")

    @field_validator("query")
    @classmethod
    def _query(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("query must not be empty")
        return v


class PinArgs(_Args):
    text: str = Field(min_length=1, max_length=500, description="The rule or fact, in one sentence.")


class FactsArgs(_Args):
    query: str | None = Field(default=None, max_length=2000,
                              description="Only facts matching this, best first (default: every current fact).")
    kind: str | None = Field(default=None, max_length=40,
                             description="Only facts of this kind, e.g. constraint, preference, identifier.")


class ForgetArgs(_Args):
    fact_id: int = Field(ge=1, description="The id of the fact to forget, as `facts` lists it.")
    reason: str | None = Field(default=None, max_length=200, description="Why (kept with the deletion record).")


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


class ToolHost(Protocol):
    """What the memory tools run against: a session's memory (:class:`memos.Memory` is one)."""

    def archive(self, content: str | None = None, *, message_ids: str | Sequence[str] | None = None,
                tags: str | Sequence[str] = ()) -> str:
        """Save a note or logged messages; the archived item's id."""
        ...

    def retrieve(self, query: str, top_k: int = 5, *, since: float | datetime | None = None,
                 until: float | datetime | None = None, kind: str | None = None,
                 roles: str | Sequence[str] | None = None, page: int = 1, promote: bool = False) -> list[Hit]:
        """Search archival memory and facts."""
        ...

    def pin(self, message_id: str | None = None, *, fact_id: int | None = None, text: str | None = None) -> Fact | None:
        """Keep something in every prompt."""
        ...

    def facts(self, kind: str | None = None, *, include_history: bool = False, query: str | None = None) -> list[Fact]:
        """The facts of the cold tier."""
        ...

    def forget(self, fact_id: int, reason: str = "user request") -> ForgetRecord:
        """Forget a fact everywhere."""
        ...


def _error(message: str) -> dict[str, Any]:
    return {"status": "error", "error": message}


def _archive(memory: ToolHost, a: ArchiveArgs) -> dict[str, Any]:
    if not a.content and not a.message_ids:
        return _error("give content or message_ids")
    return {"status": "ok", "archived_id": memory.archive(content=a.content, message_ids=a.message_ids,
                                                          tags=a.tags or ())}


def _retrieve(memory: ToolHost, r: RetrieveArgs) -> dict[str, Any]:
    since, until = _timestamp(r.since, "since"), _timestamp(r.until, "until")
    top_k, page = r.top_k or 5, r.page or 1
    hits = memory.retrieve(r.query, top_k, since=since, until=until, kind=r.kind, page=page, promote=True)
    return {"status": "ok", "page": page, "results": [h.to_dict(preview_chars=300, query=r.query) for h in hits],
            "note": "the full text of these results is in the [memory: recalled] section of your context"}


def _pin(memory: ToolHost, p: PinArgs) -> dict[str, Any]:
    fact = memory.pin(text=p.text)
    return {"status": "ok", "pinned_fact_id": fact.id if fact is not None else None}


def _facts(memory: ToolHost, f: FactsArgs) -> dict[str, Any]:
    facts = memory.facts(f.kind, query=f.query) if f.query and f.query.strip() else memory.facts(f.kind)
    return {"status": "ok", "facts": [{"id": x.id, "kind": x.kind, "key": x.key, "value": x.value,
                                       "pinned": x.pinned} for x in facts[:200]]}


def _forget(memory: ToolHost, f: ForgetArgs) -> dict[str, Any]:
    if not any(x.id == f.fact_id for x in memory.facts(include_history=True)):
        return _error(f"no fact with id {f.fact_id}; `facts` lists them")
    record = memory.forget(f.fact_id, f.reason or "user request")
    return {"status": "ok", "forgotten_fact_id": f.fact_id, "erased": json.loads(record.erased or "{}")}


@dataclass(frozen=True)
class MemoryTool:
    """One memory tool: its name, what it does (for the model), the pydantic model of its
    arguments and the function that runs it against a :class:`~memos.Memory`."""

    name: str
    description: str
    args: type[BaseModel]
    run: Callable[[ToolHost, Any], dict[str, Any]]

    def input_schema(self) -> dict[str, Any]:
        """The JSON schema of the arguments as MCP lists it (optional fields not required)."""
        return dict(_untitled(self.args.model_json_schema()))

    def schema(self, prefix: str = "") -> dict[str, Any]:
        """The OpenAI function-calling schema, generated from ``args`` (strict)."""
        return _untitled(dict(openai.pydantic_function_tool(self.args, name=prefix + self.name,
                                                            description=self.description)))


def _untitled(schema: Any) -> Any:
    """``schema`` without pydantic's ``title`` keys, which cost tokens and tell the model nothing."""
    if isinstance(schema, dict):
        return {k: _untitled(v) for k, v in schema.items() if not (k == "title" and isinstance(v, str))}
    if isinstance(schema, list):
        return [_untitled(v) for v in schema]
    return schema


REGISTRY: dict[str, MemoryTool] = {t.name: t for t in (
    MemoryTool("archive", "Save something to long-term memory verbatim, so it can be found later with `retrieve` even "
               "after it has left the conversation. Give `content` (text to save) or `message_ids` (ids of earlier "
               "messages to save as they are), and optional `tags`.", ArchiveArgs, _archive),
    MemoryTool("retrieve", "Search long-term memory (earlier messages, summaries, archived notes and known facts) by "
               "meaning and keywords. The results are added to your context as recalled memory.", RetrieveArgs,
               _retrieve),
    MemoryTool("pin", "Keep a rule or fact the user gave in every future context (for example a constraint like "
               "'never book flights before 9am'). Use sparingly.", PinArgs, _pin),
    MemoryTool("facts", "List what memory knows about the user: current facts (rules, preferences, identifiers, "
               "details), with their ids.", FactsArgs, _facts),
    MemoryTool("forget", "Forget a fact everywhere, on the user's request: its value is erased from every message, "
               "summary and archived note, and it is not learnt again.", ForgetArgs, _forget),
)}
# the tools a chat agent is offered by default
AGENT_TOOLS = ("archive", "retrieve", "pin")


def check_prefix(prefix: str) -> str:
    """``prefix`` if it can start a tool name (letters, digits, ``_`` and ``-``, at most 40)."""
    if not isinstance(prefix, str) or not TOOL_PREFIX.fullmatch(prefix):
        raise ValueError(f"a tool prefix is up to 40 letters, digits, '_' or '-', got {prefix!r}")
    return prefix


def tool_schemas(prefix: str = "", names: str | Iterable[str] = AGENT_TOOLS) -> list[dict[str, Any]]:
    """The OpenAI function schemas of the tools ``names`` (default: the agent's three; one
    name may be a string), each named ``prefix + name``. Raises ``ValueError`` for a name
    that is not a memory tool."""
    check_prefix(prefix)
    wanted = [names] if isinstance(names, str) else list(names)
    unknown = [n for n in wanted if n not in REGISTRY]
    if unknown:
        raise ValueError(f"unknown memory tools {unknown}; there are {sorted(REGISTRY)}")
    return [REGISTRY[n].schema(prefix) for n in wanted]


def tool_name(name: str, prefixes: Sequence[str] = ("",)) -> str | None:
    """The registry name that ``name`` (as the model called it) stands for under one of
    ``prefixes``, or ``None`` when it is not a memory tool."""
    for prefix in sorted(set(prefixes), key=len, reverse=True):
        if name.startswith(prefix) and name[len(prefix):] in REGISTRY:
            return name[len(prefix):]
    return None


class RequestTools:
    """The tool schemas one session's requests carry, and the prefixes its memory tools go by.

    ``tools`` (default: memos' own under ``prefix``) are what :meth:`measure` answers for
    when a request does not say; every prefix :meth:`schemas` hands out is recognised by
    :meth:`name`.
    """

    def __init__(self, count: Callable[[Sequence[dict[str, Any]]], int], prefix: str = "",
                 tools: Sequence[dict[str, Any]] | None = None) -> None:
        self.count = count
        self.prefixes = {check_prefix(prefix)}
        self.default = tool_schemas(prefix) if tools is None else self.checked(tools)
        self.default_tokens = self.count(self.default)

    @staticmethod
    def checked(tools: Any) -> list[dict[str, Any]]:
        """``tools`` as a list, or ``ValueError`` when it is not a list of schemas."""
        if not isinstance(tools, (list, tuple)) or not all(isinstance(t, dict) for t in tools):
            raise ValueError("tools must be a list of function schemas (dicts), as sent in the request")
        return list(tools)

    def schemas(self, prefix: str, names: Sequence[str] = AGENT_TOOLS) -> list[dict[str, Any]]:
        """:func:`tool_schemas`, remembering ``prefix``."""
        self.prefixes.add(check_prefix(prefix))
        return tool_schemas(prefix, names)

    def name(self, called: str) -> str | None:
        """The memory tool ``called`` stands for under a known prefix, or ``None``."""
        return tool_name(called, tuple(self.prefixes))

    def measure(self, tools: Sequence[dict[str, Any]] | None = None) -> tuple[int, bool]:
        """Tokens ``tools`` (default: the session's) add to a request, and whether they
        include memos' ``archive``; ``ValueError`` when they are not a list of schemas."""
        given = self.default if tools is None else self.checked(tools)
        tokens = self.default_tokens if tools is None else self.count(given)
        fns = (t["function"] if isinstance(t.get("function"), dict) else t for t in given)
        return tokens, any(isinstance(n := f.get("name"), str) and self.name(n) == "archive" for f in fns)


TOOLS: tuple[dict[str, Any], ...] = tuple(tool_schemas())
TOOL_NAMES = frozenset(AGENT_TOOLS)


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(x) for x in err.get("loc", ())) or "arguments"
        msg = err.get("msg", "invalid")
        if err.get("type") == "extra_forbidden":
            msg = "unknown field"
        parts.append(f"{where}: {msg}")
    return "invalid arguments: " + "; ".join(parts)


def dispatch(memory: ToolHost, name: str, arguments: Any, *, prefixes: Sequence[str] = ("",)) -> dict[str, Any]:
    """Run one memory tool call; returns the result as data (``status`` 'ok' or 'error').
    ``name`` may carry one of ``prefixes``."""
    base = tool_name(name, prefixes)
    if base is None:
        known = sorted(p + n for p in set(prefixes) for n in REGISTRY)
        return _error(f"unknown tool {name!r}; memory tools are {known}")
    if isinstance(arguments, (str, bytes)):
        try:
            arguments = json.loads(arguments or "{}")
        except (ValueError, UnicodeDecodeError) as exc:
            return _error(f"arguments are not valid JSON ({exc})")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return _error("arguments must be a JSON object")
    tool = REGISTRY[base]
    try:
        return tool.run(memory, tool.args.model_validate(arguments))
    except ValidationError as exc:
        return _error(_validation_message(exc))
    except ValueError as exc:
        return _error(str(exc))


def handle_tool_call(memory: ToolHost, tool_call: Any, *, prefixes: Sequence[str] = ("",)) -> dict[str, Any]:
    """Run one memory tool call against ``memory`` and return the ``tool`` message to add.

    Accepts the SDK's tool-call objects or their dicts, and the Responses API's
    ``function_call`` items, answered with a ``function_call_output`` item. Whatever is
    wrong with the call comes back as an error result the model can read, never as an
    exception."""
    if hasattr(tool_call, "model_dump") and not isinstance(tool_call, dict):
        tool_call = tool_call.model_dump()

    def field(obj: Any, key: str) -> Any:  # a dict's item or another SDK's attribute
        return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)

    item = field(tool_call, "type") == "function_call"  # the Responses API's: name and arguments at the top
    call_id = str(field(tool_call, "call_id" if item else "id") or "")
    fn = tool_call if item else field(tool_call, "function")
    name, args = (str(field(fn, "name") or ""), field(fn, "arguments")) if fn is not None else ("", None)
    if not name:
        result: dict[str, Any] = {"status": "error", "error": "a tool call needs function.name and function.arguments"}
    else:
        result = run_tool(memory, name, args, prefixes=prefixes)
    output = json.dumps(result, ensure_ascii=False)
    if item:
        return {"type": "function_call_output", "call_id": call_id, "output": output}
    return {"role": "tool", "tool_call_id": call_id, "content": output}


def run_tool(memory: ToolHost, name: str, arguments: Any, *, prefixes: Sequence[str] = ("",)) -> dict[str, Any]:
    """:func:`dispatch`, with a failure inside memos turned into an error result too: a
    memory tool must not end the agent's turn."""
    try:
        return dispatch(memory, name, arguments, prefixes=prefixes)
    except Exception as exc:
        return {"status": "error", "error": f"{name} failed: {type(exc).__name__}: {exc}"}
