"""The Agents SDK session, driven by the real ``openai-agents`` package's ``Runner.run``
against the OpenAI-speaking test server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agents import Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

from memos import MemosSettings
from memos.core.tokens import default_counter
from memos.integrations.openai_agents import MemosSession, message_to_items
from tests.llm_server import FakeOpenAI, chat_request

set_tracing_disabled(True)  # the SDK would send traces to OpenAI; there is no network here

FILLER = ("Tell me something about the history of the Douro valley and its wine terraces, the river boats, "
          "the old railway line and which villages are worth a stop on a slow trip. ")


def _agent(srv: FakeOpenAI, session: MemosSession, api: str = "chat") -> Agent:
    @function_tool
    def lookup_booking(reference: str) -> str:
        """Look a booking up by its reference."""
        return json.dumps({"reference": reference, "status": "confirmed"})

    client = AsyncOpenAI(base_url=srv.url, api_key="test", max_retries=0)
    model = (OpenAIChatCompletionsModel(model="test-model", openai_client=client) if api == "chat"
             else OpenAIResponsesModel(model="test-model", openai_client=client))  # the SDK's default
    agent = Agent(name="assistant", instructions="You are a careful travel assistant.", model=model,
                  tools=[lookup_booking, *session.tools()])
    return agent


def _paired(messages: list[dict[str, Any]]) -> bool:
    calls = [c["id"] for m in messages if m.get("role") == "assistant" for c in m.get("tool_calls") or []]
    results = [m.get("tool_call_id") for m in messages if m.get("role") == "tool"]
    return sorted(calls) == sorted(results)


@pytest.mark.parametrize(("api", "system_messages"), [("chat", "separate"), ("responses", "separate"), ("chat", "one")])
def test_runner_keeps_every_request_in_budget_paired_and_holding_the_rules(tmp_path, api, system_messages):
    budget = 2048
    with FakeOpenAI() as srv:
        # 'one': a model whose chat template takes one system message, first (the SDK sends the
        # agent's instructions as one); the server answers 400 to a second
        srv.system_first_only = system_messages == "one"
        session = MemosSession("trip", user="ana", store=str(tmp_path / "m.db"),
                               settings=MemosSettings(budget_tokens=budget, system_messages=system_messages))
        agent = _agent(srv, session, api)

        config = session.run_config()

        async def conversation() -> str:
            await Runner.run(agent, "I never fly Ryanair. My booking reference is PNR-55120.", session=session,
                             run_config=config)
            for i in range(30):
                await Runner.run(agent, f"Question {i}: {FILLER * 2}", session=session, run_config=config)
            result = await Runner.run(agent, "Remind me: what was my booking reference?", session=session,
                                      run_config=config)
            return str(result.final_output)

        answer = asyncio.run(conversation())
        counter = default_counter(None)
        bodies = [b if api == "chat" else chat_request(b) for b in srv.requests]  # a 400 would have ended the run
        sizes = [counter.count_messages(b["messages"]) + counter.count_tools(b.get("tools") or []) for b in bodies]
        assert len(srv.requests) >= 33 and max(sizes) <= budget
        assert set(srv.statuses) == {200} and all(_paired(b["messages"]) for b in bodies)
        stats = session.memory.stats()
        assert stats.demotions >= 1 and stats.messages > len(session.memory.hot())  # it paged
        last = json.dumps(bodies[-1]["messages"])
        assert "Ryanair" in last  # the rule from the first turn is in the last prompt
        if system_messages == "one":
            assert all(m["role"] != "system" for b in bodies for m in b["messages"][1:])
            assert bodies[-1]["messages"][0]["content"].startswith("You are a careful travel assistant.\n\n[memory: ")
        # the model called memos' prefixed retrieve tool and answered from what it found
        tool_names = {c["function"]["name"] for b in bodies for m in b["messages"]
                      if m.get("role") == "assistant" for c in m.get("tool_calls") or []}
        assert "memory_retrieve" in tool_names
        assert "PNR-55120" in answer
        # the run's function_call and function_call_output were logged as a tool chain
        roles = [m.role for m in session.memory.history()]
        assert "tool" in roles and roles.count("user") == 32
        session.close()


def test_items_round_trip_and_pop_and_clear(tmp_path):
    session = MemosSession("edits", user="ben", store=str(tmp_path / "e.db"))

    async def scenario() -> None:
        await session.add_items([
            {"role": "user", "content": "I'm allergic to peanuts. Look up order ORD-7781."},
            {"type": "function_call", "call_id": "call_1", "name": "lookup_order", "arguments": '{"id": "ORD-7781"}'},
            {"type": "function_call_output", "call_id": "call_1", "output": '{"status": "shipped"}'},
            {"role": "assistant", "content": "ORD-7781 has shipped."},
        ])
        items = await session.get_items()
        kinds = [i.get("type") or i["role"] for i in items]
        assert kinds[-4:] == ["user", "function_call", "function_call_output", "assistant"]
        assert items[-3]["call_id"] == items[-2]["call_id"] == "call_1"
        assert any(i.get("role") == "system" and "peanuts" in i["content"] for i in items)  # pinned rule
        assert await session.get_items(limit=2) == items[-2:]
        # memos' own sections handed back are not logged again
        before = len(session.memory.history())
        await session.add_items([i for i in items if i.get("role") == "system"])
        assert len(session.memory.history()) == before

        popped = await session.pop_item()
        assert popped == {"role": "assistant", "content": "ORD-7781 has shipped."}
        assert [i.get("type") for i in (await session.get_items())][-1] == "function_call_output"

        await session.clear_session()
        after = await session.get_items()
        assert not any(i.get("type") == "function_call" for i in after)
        assert any("peanuts" in json.dumps(i) for i in after)  # the user's rule outlives the chat
        assert await session.get_items(limit=5) == []
        assert await session.pop_item() is None

    asyncio.run(scenario())
    session.close()


def test_message_to_items_pairs_calls_and_results():
    msg = {"role": "assistant", "content": "Checking.", "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "b", "type": "function", "function": {"name": "g", "arguments": '{"x": 1}'}}]}
    assert message_to_items(msg) == [
        {"role": "assistant", "content": "Checking."},
        {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
        {"type": "function_call", "call_id": "b", "name": "g", "arguments": '{"x": 1}'},
    ]
    assert message_to_items({"role": "tool", "tool_call_id": "a", "content": "done"}) == [
        {"type": "function_call_output", "call_id": "a", "output": "done"}]


def test_bad_tool_arguments_reach_the_model_as_an_error_result(tmp_path):
    session = MemosSession("bad", store=str(tmp_path / "b.db"))
    retrieve = next(t for t in session.tools() if t.name == "memory_retrieve")
    out = json.loads(asyncio.run(retrieve.on_invoke_tool(None, '{"query": ""}')))
    assert out["status"] == "error" and "query must not be empty" in out["error"]
    out = json.loads(asyncio.run(retrieve.on_invoke_tool(None, "{not json")))
    assert out["status"] == "error" and "not valid JSON" in out["error"]
    with pytest.raises(ValueError, match="session_id"):
        MemosSession(" ")
    session.close()
