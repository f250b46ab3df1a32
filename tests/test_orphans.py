"""Orphan tool messages: the test chat server refuses them as the API does (HTTP 400), memos'
own check (find_orphans) finds each kind, and memos' prompts pass the server."""

from __future__ import annotations

import json

import openai
import pytest

from memos.core.sections import find_orphans
from tests.llm_server import FakeOpenAI


def call(cid: str, name: str = "lookup") -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}


def asks(*cids: str) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [call(c) for c in cids]}


def result(cid: str) -> dict:
    return {"role": "tool", "tool_call_id": cid, "content": "ok"}


USER = {"role": "user", "content": "hi"}
SOUND = [
    [USER, asks("a"), result("a"), {"role": "assistant", "content": "done"}],
    [USER, asks("a", "b"), result("b"), result("a"), USER],
    [USER, asks("a"), result("a"), asks("b"), result("b")],
]
ORPHANS = {
    "a result first": [result("a"), USER],
    "a result after a user message": [USER, asks("a"), result("a"), USER, result("a")],
    "a result of another call": [USER, asks("a"), result("b")],
    "a result twice": [USER, asks("a"), result("a"), result("a")],
    "a call left unanswered": [USER, asks("a"), USER],
    "one call of two answered": [USER, asks("a", "b"), result("a"), {"role": "assistant", "content": "x"}],
    "a result of an older chain": [USER, asks("a"), result("a"), asks("b"), result("a"), result("b")],
}


@pytest.fixture(scope="module")
def server():
    with FakeOpenAI(seed=1) as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)


@pytest.mark.parametrize("messages", SOUND)
def test_the_server_and_find_orphans_accept_whole_chains(client, messages):
    assert find_orphans(messages) == []
    client.chat.completions.create(model="m", messages=messages)


@pytest.mark.parametrize("name", ORPHANS)
def test_the_server_refuses_an_orphan_and_find_orphans_names_it(client, name):
    messages = ORPHANS[name]
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="m", messages=messages)
    assert err.value.status_code == 400 and "tool" in str(err.value)
    assert find_orphans(messages), name


def test_find_orphans_leaves_a_chain_in_flight_at_the_end_to_the_caller():
    # memos' prompt while the newest assistant message's calls await their results: the agent
    # adds the results before it calls the model (the server, like the API, would refuse it as is)
    assert find_orphans([USER, asks("a", "b"), result("a")]) == []


def test_memos_prompts_through_a_long_tool_session_pass_the_server(client, make_memory):
    mem = make_memory(budget=700)
    mem.add({"role": "system", "content": "You are an agent."})
    for i in range(40):
        mem.add({"role": "user", "content": f"Look up order ORD-{1000 + i} please."})
        mem.add(asks(f"c{i}a", f"c{i}b"))
        mem.add({"role": "tool", "tool_call_id": f"c{i}b", "content": json.dumps({"order": f"ORD-{1000 + i}",
                                                                               "status": "shipped " * 30})})
        mem.add({"role": "tool", "tool_call_id": f"c{i}a", "content": json.dumps({"matches": []})})
        ctx = mem.context()
        client.chat.completions.create(model="m", messages=ctx)  # a 400 here fails the test
        mem.add({"role": "assistant", "content": f"Order ORD-{1000 + i} has shipped."})
    assert mem.stats().demotions > 0
