"""The agent loop: one user turn against an OpenAI-compatible model that has the memory tools.

:func:`run_turn` adds the user's message, asks the model with memos' context and tools,
runs memory tool calls (``archive``, ``retrieve``, ``pin``) itself and asks again, up to
a step cap. Calls to other tools go to ``execute`` when given (a custom tool's free-form
input as ``{"input": ...}``); without it they get an error result (so the chat API still
sees every call answered) and are reported.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..core.messages import Message, call_input, call_name
from ..core.tokens import TokenCounter


class AgentMemory(Protocol):
    """What the agent loop needs of a session's memory (:class:`memos.Memory` is one)."""

    counter: TokenCounter

    def add(self, messages: Any) -> list[Message]:
        """Log messages."""
        ...

    def context(self, query: str | None = None, *, tools: Sequence[dict[str, Any]] | None = None,
                reserve: int = 0) -> list[dict[str, Any]]:
        """The prompt to send now."""
        ...

    def tools(self, prefix: str | None = None, *, names: str | Sequence[str] = ...) -> list[dict[str, Any]]:
        """memos' tool schemas."""
        ...

    def is_memory_tool(self, name: str) -> bool:
        """Whether a call named ``name`` is memos' own."""
        ...

    def handle_tool_call(self, tool_call: Any) -> dict[str, Any]:
        """Run one memory tool call; the tool message to add."""
        ...

__all__ = ["AgentMemory", "TurnResult", "run_turn"]


@dataclass
class TurnResult:
    """What one turn did."""

    reply: str = ""
    steps: int = 0
    prompt_tokens: list[int] = field(default_factory=list)  # per model call, as memos counted them
    memory_calls: list[str] = field(default_factory=list)
    other_calls: list[dict[str, Any]] = field(default_factory=list)
    stopped_by_step_cap: bool = False


def run_turn(
    memory: AgentMemory,
    client: Any,
    model: str,
    user_text: str,
    *,
    tools: Sequence[dict[str, Any]] = (),
    execute: Callable[[str, dict[str, Any]], str] | None = None,
    max_steps: int = 6,
    **create_kwargs: Any,
) -> TurnResult:
    """Run one user turn to the model's reply; see the module docstring."""
    if max_steps < 1:
        raise ValueError("max_steps must be >= 1")
    memory.add({"role": "user", "content": user_text})
    result = TurnResult()
    all_tools = memory.tools() + list(tools)
    while result.steps < max_steps:
        messages = memory.context(tools=all_tools)  # the budget covers the messages and these schemas together
        result.prompt_tokens.append(memory.counter.count_messages(messages) + memory.counter.count_tools(all_tools))
        response = client.chat.completions.create(model=model, messages=messages, tools=all_tools, **create_kwargs)
        message = response.choices[0].message
        (logged,) = memory.add(message)
        result.steps += 1
        calls = logged.data.get("tool_calls") or []  # normalised: function and custom calls alike
        if not calls:
            result.reply = logged.text  # the content, or what a refusal said
            return result
        for call in calls:
            name, given = call_name(call), call_input(call)
            if call["type"] == "custom":  # its free-form input goes to ``execute`` as {"input": ...}
                args = {"input": given}
            elif memory.is_memory_tool(name):
                memory.add(memory.handle_tool_call(call))
                result.memory_calls.append(name)
                continue
            else:
                try:
                    args = json.loads(given or "{}")
                except ValueError:
                    args = {"_raw": given}
            result.other_calls.append({"id": call["id"], "name": name, "arguments": args})
            if execute is not None:
                try:
                    content = execute(name, args)
                except Exception as exc:  # the tool's failure is the model's to read, not a crash
                    content = json.dumps({"status": "error", "error": f"{type(exc).__name__}: {exc}"})
            else:
                content = json.dumps({"status": "error", "error": f"tool {name!r} is not available here"})
            memory.add({"role": "tool", "tool_call_id": call["id"], "content": content})
    result.stopped_by_step_cap = True
    return result
