"""A budgeted session for the OpenAI Agents SDK.

:class:`MemosSession` implements the SDK's ``Session`` protocol over a :class:`memos.Memory`,
and :meth:`MemosSession.run_config` makes memos assemble every model call of a run::

    from agents import Agent, Runner
    from memos.integrations.openai_agents import MemosSession

    session = MemosSession("chat-42", user="ana", store="memos.db", budget=8192)
    agent = Agent(name="assistant", instructions="...", tools=[*my_tools, *session.tools()])
    result = await Runner.run(agent, "Book me a train to Porto", session=session,
                              run_config=session.run_config())

- Every model call's input is memos' budgeted prompt (``run_config``'s
  ``call_model_input_filter``): the pinned rules, facts, summary and recalled memory as
  system items, then the hot messages, with every ``function_call`` next to its
  ``function_call_output``. The agent's instructions and tool schemas are counted, so the
  request never outgrows the budget however long the session and however many tool calls
  a run makes; recall follows the newest user message.
- ``get_items()`` is the same prompt as Responses input items (without ``run_config``, it
  is what the SDK starts a run from; it leaves ``input_reserve`` tokens for the input the
  SDK appends). With ``limit``, it is the newest ``limit`` logged items, raw.
- ``add_items()`` logs what the run produced (through the SDK's own item-to-message
  converter); ``pop_item()`` takes back the newest message (:meth:`memos.Memory.pop`);
  ``clear_session()`` sets the session's messages aside (:meth:`memos.Memory.clear`): the
  user's rules, facts and archive stay theirs.
- ``tools()`` are memos' ``archive``, ``retrieve`` and ``pin`` as SDK function tools
  (prefixed ``memory_`` by default, so they never collide with the agent's own).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Sequence
from typing import Any

from . import require

require("agents", "agents")

from agents import FunctionTool, RunConfig  # noqa: E402
from agents.models.chatcmpl_converter import Converter  # noqa: E402
from agents.run_config import CallModelData, ModelInputData  # noqa: E402

from ..adapters.tools import AGENT_TOOLS, run_tool, tool_schemas  # noqa: E402
from ..core.messages import Message, message_key, message_text  # noqa: E402
from ..core.responses import to_items  # noqa: E402
from ..core.sections import is_section  # noqa: E402
from ..session.memory import Memory  # noqa: E402

__all__ = ["MemosSession", "message_to_items"]


def message_to_items(message: dict[str, Any]) -> list[dict[str, Any]]:
    """One chat message as Responses input items (:func:`memos.core.responses.to_items`): a tool
    message becomes a ``function_call_output``, an assistant message's tool calls become
    ``function_call`` items (after its text, if any), any other message an input message."""
    return to_items([message])


def _chat_tool(tool: Any) -> dict[str, Any] | None:
    """An SDK tool (or a chat-completions schema) as the request will carry it: function
    tools through the SDK's own converter, so the budget counts exactly what is sent."""
    if isinstance(tool, dict):
        return tool
    if isinstance(tool, FunctionTool):
        return dict(Converter.tool_to_openai(tool))
    schema = getattr(tool, "params_json_schema", None)
    if schema is None:
        return None
    return {"type": "function", "function": {"name": tool.name, "description": getattr(tool, "description", ""),
                                             "parameters": schema}}


class MemosSession:
    """An Agents SDK ``Session`` whose history is memos' budgeted context (see the module).

    Give a ``session_id`` and either a ``memory`` (a :class:`memos.Memory` you opened) or
    the options to open one with (:class:`memos.Memory`'s: ``user``, ``agent``, ``store``,
    ``budget``, ``settings``, ...). ``input_reserve`` (default an eighth of the budget) is
    what :meth:`get_items` leaves free for the input the SDK appends to it.
    """

    session_settings: Any = None

    def __init__(self, session_id: str, *, memory: Memory | None = None, tool_prefix: str = "memory_",
                 input_reserve: int | None = None, **memory_options: Any) -> None:
        if not isinstance(session_id, str) or not session_id.strip():
            raise ValueError("session_id must be a non-empty string")
        self.session_id = session_id
        self._owns = memory is None
        if memory is None:
            memory = Memory(session_id, **memory_options)
        elif memory_options:
            raise TypeError(f"give either memory or options to open one, not both ({', '.join(memory_options)})")
        self.memory = memory
        self.tool_prefix = tool_prefix
        self._schemas: list[dict[str, Any]] = memory.tools(tool_prefix)
        self._reserve = 0
        budget = memory.settings.budget_tokens
        self.input_reserve = budget // 8 if input_reserve is None else input_reserve
        if not 0 <= self.input_reserve < budget // 2:
            raise ValueError(f"input_reserve must be in [0, {budget // 2}) tokens, got {self.input_reserve}")
        # memos is synchronous: its calls run on a worker thread, one at a time
        self._lock = threading.Lock()

    # -- what the request carries -----------------------------------------------------

    def tools(self, names: str | Sequence[str] = AGENT_TOOLS) -> list[FunctionTool]:
        """memos' tools as SDK function tools (names prefixed with ``tool_prefix``; see
        :func:`~memos.adapters.tools.tool_schemas`). A bad call comes back to the model as an
        error result, never as an exception."""
        out = []
        for schema in (s["function"] for s in tool_schemas(self.tool_prefix, names)):

            async def invoke(ctx: Any, arguments: str, _name: str = schema["name"]) -> str:
                result = await self._call(run_tool, self.memory, _name, arguments, prefixes=(self.tool_prefix,))
                return json.dumps(result, ensure_ascii=False)

            out.append(FunctionTool(name=schema["name"], description=schema["description"],
                                    params_json_schema=schema["parameters"], on_invoke_tool=invoke,
                                    strict_json_schema=True))
        return out

    def count(self, agent: Any) -> None:
        """Count ``agent``'s instructions (when they are a string) and tools against the
        budget in :meth:`get_items` (:meth:`run_config` counts them at every call itself)."""
        self._schemas = _schemas(agent)
        instructions = getattr(agent, "instructions", None)
        self._reserve = self._instruction_tokens(instructions if isinstance(instructions, str) else None)

    def run_config(self, **options: Any) -> RunConfig:
        """A ``RunConfig`` (with ``options``) whose model calls get memos' prompt as input."""
        return RunConfig(call_model_input_filter=self.model_input, **options)

    async def model_input(self, data: CallModelData[Any]) -> ModelInputData:
        """The ``call_model_input_filter``: the input for this model call is memos' budgeted
        prompt, counting the agent's instructions and tools. Items of the run the SDK has not
        handed to :meth:`add_items` yet are kept after it, their tokens counted too. With
        ``system_messages="one"`` the prompt's system message joins the instructions, which
        the SDK sends as the first system message."""
        given = data.model_data.input
        instructions = data.model_data.instructions
        schemas = _schemas(data.agent)

        def assemble() -> list[dict[str, Any]]:
            logged = {message_key(m.data) for m in self.memory.store.newest_messages(self.memory.namespace, len(given) + 8)}
            pending = [m for m in (dict(x) for x in Converter.items_to_messages([_plain(i) for i in given]))
                       if not is_section(m) and message_key(m) not in logged]
            reserve = self._instruction_tokens(instructions) + self.memory.counter.count_messages(pending)
            return self.memory.context(tools=schemas, reserve=reserve) + pending

        messages = await self._call(assemble)
        if self.memory.settings.system_messages == "one" and messages and messages[0].get("role") in ("system",
                                                                                                       "developer"):
            opening = message_text(messages.pop(0))
            instructions = f"{instructions}\n\n{opening}" if instructions else opening
        items: list[Any] = to_items(messages)
        return ModelInputData(input=items, instructions=instructions)

    def _instruction_tokens(self, instructions: str | None) -> int:
        return self.memory.counter.count_message({"role": "system", "content": instructions}) if instructions else 0

    # -- the Session protocol ---------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The budgeted prompt as input items; with ``limit``, the newest ``limit`` logged items."""
        if limit is not None:
            if limit < 0:
                raise ValueError("limit must be >= 0")
            newest = await self._call(self.memory.store.newest_messages, self.memory.namespace, limit) if limit else []
            items = to_items([m.data for m in newest])
            return items[-limit:] if limit else []
        messages = await self._call(self.memory.context, tools=self._schemas,
                                    reserve=self._reserve + self.input_reserve)
        return to_items(messages)

    async def add_items(self, items: list[Any]) -> None:
        """Log the items a run produced (memos' own sections, if handed back, are skipped)."""
        messages = [dict(m) for m in Converter.items_to_messages([_plain(i) for i in items])]
        messages = [m for m in messages if not is_section(m)]
        if messages:
            await self._call(self.memory.add, messages)

    async def pop_item(self) -> Any | None:
        """Take back the newest message; returns its last input item (``None`` when empty)."""
        popped: Message | None = await self._call(self.memory.pop)
        if popped is None:
            return None
        return message_to_items(popped.data)[-1]

    async def clear_session(self) -> None:
        """Set the session's messages aside; the user's long-term memory stays."""
        await self._call(self.memory.clear)

    # -- lifecycle ----------------------------------------------------------------------

    def close(self) -> None:
        """Close the :class:`memos.Memory` this session opened (one you passed stays open)."""
        if self._owns:
            self.memory.close()

    async def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        def locked() -> Any:
            with self._lock:
                return fn(*args, **kwargs)

        return await asyncio.to_thread(locked)

    def __repr__(self) -> str:
        return f"MemosSession({self.session_id!r}, {self.memory!r})"


def _schemas(agent: Any) -> list[dict[str, Any]]:
    return [s for s in (_chat_tool(t) for t in getattr(agent, "tools", None) or []) if s is not None]


def _plain(item: Any) -> Any:
    return item.model_dump(exclude_unset=True) if hasattr(item, "model_dump") else item
