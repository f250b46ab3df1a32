"""memos for LangChain and LangGraph: a chat history whose messages are the budgeted prompt.

:class:`MemosChatHistory` is a ``langchain_core`` ``BaseChatMessageHistory`` over a
:class:`memos.Memory`. ``messages`` is memos' prompt (pinned rules, facts, summary and
recalled memory as system messages, then the hot messages, tool calls paired with their
results) as LangChain messages, within the budget however long the session; ``add_messages``
logs new ones; ``clear`` sets the session aside (:meth:`memos.Memory.clear`). It serves
``RunnableWithMessageHistory`` and LangGraph nodes alike::

    history = MemosChatHistory("chat-42", user="ana", store="memos.db", budget=8192)
    llm = ChatOpenAI(model="gpt-4o-mini").bind_tools(history.tools())

    def agent(state: MessagesState) -> dict:
        history.add_messages(state["messages"])          # what the log already holds is skipped
        reply = llm.invoke(history.messages)             # the budgeted prompt
        history.add_messages([reply])
        return {"messages": [reply]}

Memory tool calls in a reply run with :meth:`MemosChatHistory.run_tool_calls`, which logs
and returns their ``ToolMessage`` results.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import require

require("langchain_core", "langgraph")

from langchain_core.chat_history import BaseChatMessageHistory  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    BaseMessage,
    ToolMessage,
    convert_to_messages,
    convert_to_openai_messages,
)

from ..core.messages import message_key  # noqa: E402
from ..core.sections import is_section  # noqa: E402
from ..session.memory import Memory  # noqa: E402

__all__ = ["MemosChatHistory"]


class MemosChatHistory(BaseChatMessageHistory):
    """A LangChain chat history backed by memos (see the module). Give either a ``memory``
    you opened or :class:`memos.Memory`'s options to open one with."""

    def __init__(self, session: str = "default", *, memory: Memory | None = None, tools: Sequence[dict[str, Any]] = (),
                 **memory_options: Any) -> None:
        if memory is not None and memory_options:
            raise TypeError(f"give either memory or options to open one, not both ({', '.join(memory_options)})")
        self._owns = memory is None
        self.memory = memory if memory is not None else Memory(session, **memory_options)
        self._app_tools = list(tools)
        # what requests carry, counted against the budget: memos' default schemas until tools() says
        self._schemas: list[dict[str, Any]] | None = self._app_tools or None

    def tools(self, prefix: str | None = None) -> list[dict[str, Any]]:
        """memos' tools as OpenAI function schemas, for ``bind_tools``; together with the
        app's ``tools`` given at construction they are counted against the budget."""
        own = self.memory.tools(prefix)
        self._schemas = own + self._app_tools
        return own

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The budgeted prompt as LangChain messages."""
        return _to_langchain(self.memory.context(tools=self._schemas))

    def context(self, query: str | None = None) -> list[BaseMessage]:
        """The prompt assembled for ``query`` as the next user message (not stored)."""
        return _to_langchain(self.memory.context(query, tools=self._schemas))

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Log ``messages`` (memos' own sections, if handed back, are skipped). Messages the
        log already ends with are skipped too, so a node may hand over the whole
        ``state["messages"]``: the part of it that starts like the log's newest messages is
        not logged twice."""
        converted = convert_to_openai_messages(list(messages))
        batch = [m for m in (converted if isinstance(converted, list) else [converted]) if not is_section(m)]
        for m in batch:
            if m.get("role") == "assistant" and m.get("tool_calls") and not m.get("content"):
                m["content"] = None
        if batch:
            logged = [message_key(m.data) for m in self.memory.store.newest_messages(self.memory.namespace, len(batch))]
            keys = [message_key(m) for m in batch]
            done = next((k for k in range(min(len(keys), len(logged)), 0, -1) if keys[:k] == logged[-k:]), 0)
            batch = batch[done:]
        if batch:
            self.memory.add(batch)

    def run_tool_calls(self, reply: AIMessage) -> list[ToolMessage]:
        """Run the memory tool calls of ``reply`` (already added), log their results and
        return them; calls to other tools are left to the app."""
        out = []
        for call in reply.tool_calls:
            if not self.memory.is_memory_tool(call["name"]):
                continue
            result = self.memory.handle_tool_call({"id": call["id"], "type": "function",
                                                   "function": {"name": call["name"], "arguments": call["args"]}})
            self.memory.add(result)
            out.append(ToolMessage(content=result["content"], tool_call_id=result["tool_call_id"]))
        return out

    def clear(self) -> None:
        """Set the session's messages aside; the user's long-term memory stays."""
        self.memory.clear()

    def close(self) -> None:
        """Close the :class:`memos.Memory` this history opened (one you passed stays open)."""
        if self._owns:
            self.memory.close()


def _to_langchain(messages: list[dict[str, Any]]) -> list[BaseMessage]:
    # an assistant message that only calls tools may come without "content"; LangChain wants the key
    return list(convert_to_messages([{"content": None, **m} for m in messages]))
