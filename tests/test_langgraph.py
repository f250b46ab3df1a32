"""memos in a LangGraph graph: a real ``StateGraph`` whose agent node calls ``ChatOpenAI``
(langchain-openai) on the OpenAI-speaking test server, with memos as the chat history."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, MessagesState, StateGraph

from memos.core.tokens import default_counter
from memos.integrations.langgraph import MemosChatHistory
from tests.llm_server import FakeOpenAI

FILLER = "Tell me about the old railway line up the Douro valley and the villages along it, stop by stop. "


def _graph(history: MemosChatHistory, llm: Any, *, whole_state: bool = False, checkpointer: Any = None) -> Any:
    """The agent node adds the new user message, or with ``whole_state`` the state as it stands."""

    def agent(state: MessagesState) -> dict:
        new = [m for m in state["messages"] if isinstance(m, HumanMessage)][-1:]
        last = state["messages"][-1]
        if whole_state:
            history.add_messages(state["messages"])
        elif not isinstance(last, ToolMessage):  # a tool result is already in memos
            history.add_messages(new)
        reply = llm.invoke(history.messages)
        history.add_messages([reply])
        return {"messages": [reply]}

    def memory_tools(state: MessagesState) -> dict:
        return {"messages": history.run_tool_calls(state["messages"][-1])}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", memory_tools)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, {"tools": "tools", END: END})
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=checkpointer)


def test_graph_turns_stay_in_budget_paired_and_keep_the_rules(tmp_path):
    budget = 2048
    with FakeOpenAI() as srv:
        history = MemosChatHistory("lg", user="ana", store=str(tmp_path / "lg.db"), budget=budget)
        llm = ChatOpenAI(model="test-model", base_url=srv.url, api_key="test", max_retries=0)
        graph = _graph(history, llm.bind_tools(history.tools(prefix="memory_")))
        graph.invoke({"messages": [HumanMessage("I'm vegetarian. My booking reference is PNR-31337.")]})
        for i in range(25):
            graph.invoke({"messages": [HumanMessage(f"Question {i}: {FILLER * 3}")]})
        out = graph.invoke({"messages": [HumanMessage("Remind me: what was my booking reference?")]})

        counter = default_counter(None)
        sizes = [counter.count_messages(b["messages"]) + counter.count_tools(b.get("tools") or []) for b in srv.requests]
        assert len(srv.requests) == 28 and max(sizes) <= budget
        for body in srv.requests:
            calls = [c["id"] for m in body["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []]
            assert sorted(calls) == sorted(m["tool_call_id"] for m in body["messages"] if m["role"] == "tool")
        assert history.memory.stats().demotions >= 1
        assert "vegetarian" in json.dumps(srv.requests[-1]["messages"])
        assert "PNR-31337" in out["messages"][-1].content
        assert any(isinstance(m, SystemMessage) for m in history.messages)
        history.clear()
        assert not any(isinstance(m, (HumanMessage, AIMessage)) for m in history.messages)
        assert any("vegetarian" in str(m.content) for m in history.messages)  # the user's rule stays
        history.close()


def test_a_chat_model_on_the_responses_api_is_logged_without_its_reasoning(tmp_path):
    # ChatOpenAI(use_responses_api=True) hands back content blocks: the model's reasoning and
    # text with its citations; add() refused the reasoning block ("unknown type 'reasoning'")
    budget = 2048
    with FakeOpenAI() as srv:
        history = MemosChatHistory("lg", user="ana", store=str(tmp_path / "lg.db"), budget=budget)
        llm = ChatOpenAI(model="test-model", base_url=srv.url, api_key="test", max_retries=0, use_responses_api=True)
        graph = _graph(history, llm.bind_tools(history.tools(prefix="memory_")))
        graph.invoke({"messages": [HumanMessage("I'm vegetarian. My booking reference is PNR-31337.")]})
        for i in range(12):
            graph.invoke({"messages": [HumanMessage(f"Question {i}: {FILLER * 3}")]})
        out = graph.invoke({"messages": [HumanMessage("Remind me: what was my booking reference?")]})

        assert set(srv.statuses) == {200}  # every request's calls and outputs paired
        assert "PNR-31337" in str(out["messages"][-1].content)
        logged = [m.data for m in history.memory.history() if m.role == "assistant"]
        assert logged and "reasoning" not in json.dumps(logged)
        assert all(m["input"] for m in srv.requests)
        assert "vegetarian" in json.dumps(srv.requests[-1]["input"])
        history.close()


def test_a_node_may_hand_over_the_whole_state_each_turn(tmp_path):
    """The module's example: the agent node adds ``state["messages"]`` as it stands, and a
    checkpointer keeps the thread, so each turn hands over every earlier message again (and,
    after a memory tool call, the call and its result)."""
    from langgraph.checkpoint.memory import InMemorySaver

    with FakeOpenAI() as srv:
        history = MemosChatHistory("lg", user="ana", store=str(tmp_path / "lg.db"), budget=2048)
        llm = ChatOpenAI(model="test-model", base_url=srv.url, api_key="test", max_retries=0).bind_tools(
            history.tools(prefix="memory_"))
        graph = _graph(history, llm, whole_state=True, checkpointer=InMemorySaver())
        thread = {"configurable": {"thread_id": "t1"}}
        said = ["I'm vegetarian. My booking reference is PNR-31337."] + [f"Question {i}: {FILLER}" for i in range(6)]
        said += ["Remind me: what was my booking reference?", "ok", "ok"]
        for text in said:
            out = graph.invoke({"messages": [HumanMessage(text)]}, thread)
        logged = history.memory.history()
        assert [m.text for m in logged if m.role == "user"] == said  # each once, in order ("ok" twice: said twice)
        assert len(logged) == len(out["messages"])  # the thread and the log hold the same messages
        assert any(m.role == "tool" for m in logged)
        for body in srv.requests:
            calls = [c["id"] for m in body["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []]
            assert sorted(calls) == sorted(m["tool_call_id"] for m in body["messages"] if m["role"] == "tool")
        history.close()


def test_a_whole_state_with_an_escaped_json_tool_result_is_not_logged_twice(tmp_path):
    """memos stores a JSON tool result with its escaped characters written out; handed the
    same messages again, it still knows them as logged."""
    history = MemosChatHistory("lg", user="ana", store=str(tmp_path / "lg.db"), budget=2048)
    state = [HumanMessage("帮我找杭州的酒店"),
             AIMessage("", tool_calls=[{"id": "c1", "name": "search_hotels", "args": {"city": "杭州"}}]),
             ToolMessage(json.dumps({"hotels": ["西湖国宾馆"]}), tool_call_id="c1")]
    history.add_messages(state)
    history.add_messages(state + [AIMessage("找到了西湖国宾馆。")])
    logged = history.memory.history()
    assert [m.role for m in logged] == ["user", "assistant", "tool", "assistant"]
    assert json.loads(logged[2].text) == {"hotels": ["西湖国宾馆"]} and "西湖国宾馆" in logged[2].text
    history.close()
