"""The Responses API at the edge: the real ``openai`` client's ``responses.create`` against the
test server on 127.0.0.1, which answers 400 where the API does (a call without its output, an
output without its call, an item type it does not know)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai import OpenAI

from memos import InvalidMessage, Memory
from memos.core.responses import from_items, to_items, to_tools
from tests.llm_server import FakeOpenAI

FILLER = ("Tell me about the old railway line along the Douro, the river boats and which villages "
          "are worth a stop on a slow trip, with the wine terraces and the best season to go. ")


def _lookup(arguments: str) -> str:
    return json.dumps({"reference": json.loads(arguments).get("reference"), "status": "confirmed"})


LOOKUP = {"type": "function", "function": {"name": "lookup_booking", "description": "Look a booking up.",
                                           "parameters": {"type": "object", "properties": {"reference": {"type": "string"}},
                                                          "required": ["reference"]}}}


def test_an_agent_loop_on_responses_create_stays_in_budget_paired_and_finds_what_it_was_told(tmp_path):
    budget = 2048
    with FakeOpenAI() as srv:
        client = OpenAI(base_url=srv.url, api_key="test", max_retries=0)
        mem = Memory("trip", user="ana", store=str(tmp_path / "m.db"), budget=budget)
        tools = mem.tools() + [LOOKUP]
        sent: list[list[dict[str, Any]]] = []

        def turn(text: str) -> str:
            mem.add({"role": "user", "content": text})
            for _ in range(4):
                context = mem.context(tools=tools)
                assert mem.counter.count_messages(context) + mem.counter.count_tools(tools) <= budget
                sent.append(context)
                response = client.responses.create(model="test-model", input=to_items(context), tools=to_tools(tools))
                mem.add(response.output)  # the SDK's items, reasoning among them
                calls = [i for i in response.output if i.type == "function_call"]
                if not calls:
                    return response.output_text
                for call in calls:
                    if mem.is_memory_tool(call.name):
                        mem.add(mem.handle_tool_call(call))
                    else:
                        mem.add({"type": "function_call_output", "call_id": call.call_id, "output": _lookup(call.arguments)})
            raise AssertionError("no reply in four steps")

        turn("I never fly Ryanair. My booking reference is PNR-55120.")
        for i in range(40):
            turn(f"Question {i}: {FILLER * 2}")
        answer = turn("Remind me: what was my booking reference?")
        mem.close()

    assert set(srv.statuses) == {200}  # never a 400 for an orphan call or output
    assert "PNR-55120" in answer  # found by the retrieve call the model made through memos
    assert mem.stats().demotions > 0  # the session outgrew the budget
    assert all("I never fly Ryanair." in json.dumps(c) for c in sent)  # the rule in every request
    assert all(not any(i.get("type") == "reasoning" for i in r["input"]) for r in srv.requests)


def test_a_responses_output_is_one_assistant_turn_and_its_reasoning_is_left_out(tmp_path):
    mem = Memory("s", store=str(tmp_path / "m.db"))
    mem.add({"role": "user", "content": [{"type": "input_text", "text": "What is this?"},
                                         {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "low"}]})
    logged = mem.add([
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Let me look both up.", "annotations": []}]},
        {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "lookup_booking", "arguments": '{"reference": "A"}'},
        {"type": "function_call", "id": "fc_2", "call_id": "c2", "name": "lookup_booking", "arguments": '{"reference": "B"}'},
    ])
    assert [m.data for m in logged] == [{"role": "assistant", "content": "Let me look both up.", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "lookup_booking", "arguments": '{"reference": "A"}'}},
        {"id": "c2", "type": "function", "function": {"name": "lookup_booking", "arguments": '{"reference": "B"}'}}]}]
    mem.add([{"type": "function_call_output", "call_id": "c1", "output": "{}"},
             {"type": "function_call_output", "call_id": "c2", "output": "{}"}])
    assert mem.history()[0].data["content"][1] == {"type": "image_url",
                                                   "image_url": {"url": "https://example.com/a.png", "detail": "low"}}
    assert mem.add({"type": "reasoning", "id": "rs_2", "summary": []}) == []
    assert len(mem.history()) == 4
    items = to_items(mem.context(tools=[]))
    assert [i.get("type", i.get("role")) for i in items] == [
        "user", "assistant", "function_call", "function_call", "function_call_output", "function_call_output"]
    assert items[0]["content"][1] == {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "low"}


def test_responses_items_that_cannot_be_logged_are_clear_errors_and_nothing_is_stored(tmp_path):
    mem = Memory("s", store=str(tmp_path / "m.db"))
    mem.add({"role": "user", "content": "Look up A and B."})
    mem.add({"type": "function_call", "call_id": "c1", "name": "lookup_booking", "arguments": "{}"})
    with pytest.raises(InvalidMessage, match=r"add a response's output items in one call"):
        mem.add({"type": "function_call", "call_id": "c2", "name": "lookup_booking", "arguments": "{}"})
    with pytest.raises(InvalidMessage, match="'computer_call' is not supported"):
        mem.add({"type": "computer_call", "call_id": "c9", "action": {}})
    with pytest.raises(InvalidMessage, match="file_id cannot be sent in chat format"):
        from_items({"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}]})
    assert len(mem.history()) == 2


def test_a_memory_tool_call_item_gets_an_output_item(tmp_path):
    mem = Memory("s", store=str(tmp_path / "m.db"))
    mem.add({"role": "user", "content": "Keep this: the locker code is 4417."})
    call = {"type": "function_call", "call_id": "c1", "name": "archive", "arguments": json.dumps({"content": "locker code 4417", "message_ids": None, "tags": None})}
    mem.add(call)
    out = mem.handle_tool_call(call)
    assert out["type"] == "function_call_output" and out["call_id"] == "c1"
    assert json.loads(out["output"])["status"] == "ok"
    mem.add(out)
    assert mem.history()[-1].data["tool_call_id"] == "c1"


def test_tool_schemas_in_responses_form():
    mem_tools = [LOOKUP, {"type": "custom", "custom": {"name": "apply_patch", "description": "Apply a patch."}}]
    assert to_tools(mem_tools) == [
        {"type": "function", "name": "lookup_booking", "description": "Look a booking up.",
         "parameters": LOOKUP["function"]["parameters"]},
        {"type": "custom", "name": "apply_patch", "description": "Apply a patch."}]
    assert to_tools(to_tools(mem_tools)) == to_tools(mem_tools)


_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=40)


@st.composite
def _chat(draw: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": draw(_text)}]
    n = 0
    for _ in range(draw(st.integers(1, 6))):
        out.append({"role": "user", "content": draw(_text)})
        calls = draw(st.integers(0, 3))
        if calls:
            ids = [f"c{n + k}" for k in range(calls)]
            n += calls
            said = draw(st.one_of(st.none(), _text))
            out.append({"role": "assistant", **({"content": said} if said else {"content": None}), "tool_calls": [
                {"id": i, "type": "function", "function": {"name": "f", "arguments": json.dumps({"q": draw(_text)})}}
                for i in ids]})
            out += [{"role": "tool", "tool_call_id": i, "content": draw(_text)} for i in ids]
        out.append({"role": "assistant", "content": draw(_text)})
    return out


@settings(max_examples=200, deadline=None)
@given(_chat())
def test_chat_to_items_and_back_is_the_same_conversation(messages):
    assert from_items(to_items(messages)) == messages
