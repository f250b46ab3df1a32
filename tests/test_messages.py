"""Validation of OpenAI chat messages: bad shapes get a ValueError naming the problem."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memos import InvalidMessage
from memos.core.messages import Message, memory_traffic, message_key, message_text, plain_json, validate_message
from tests.conftest import assistant, call, tool_chain, user


@pytest.mark.parametrize(
    ("message", "fragment"),
    [
        ({"role": "wizard", "content": "hi"}, "unknown role 'wizard'"),
        ({"content": "hi"}, "'role' is missing"),
        ({"role": "user"}, "'content' is required"),
        ({"role": "user", "content": 42}, "'content' must be a string"),
        ({"role": "user", "content": {"text": "hi"}}, "'content' must be a string"),
        ({"role": "user", "content": [{"type": "text", "text": 5}]}, "needs a string 'text'"),
        ({"role": "user", "content": [{"type": "weird"}]}, "unknown type 'weird'"),
        ({"role": "user", "content": "hi", "colour": "red"}, "unknown field(s) ['colour']"),
        ({"role": "assistant"}, "'content' is required"),
        ({"role": "tool", "content": "x"}, "'tool_call_id' is required"),
        ({"role": "tool", "content": "x", "tool_call_id": "nope"}, "does not answer any tool call"),
        ({"role": "user", "content": "x", "tool_call_id": "c1"}, "only tool messages may have 'tool_call_id'"),
        ({"role": "user", "content": "x", "tool_calls": [call("c1")]}, "only assistant messages may have 'tool_calls'"),
        ({"role": "assistant", "tool_calls": []}, "'tool_calls' must be a non-empty list"),
        ({"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f"}}]}, "non-empty string 'id'"),
        ({"role": "assistant", "tool_calls": [{"id": "c1", "function": {"arguments": "{}"}}]}, "non-empty string 'name'"),
        ({"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": {}}}]}, "must be a JSON string"),
        ({"role": "assistant", "tool_calls": [call("c1"), call("c1")]}, "appears twice"),
        ({"role": "assistant", "tool_calls": [{"id": "c1", "type": "custom", "custom": {"input": "x"}}]},
         "'custom' with a non-empty string 'name'"),
        ({"role": "assistant", "tool_calls": [{"id": "c1", "type": "custom", "custom": {"name": "sql", "input": 3}}]},
         "custom.input must be a string"),
        ({"role": "assistant", "tool_calls": [{"id": "c1", "type": "web", "web": {}}]}, "expected 'function' or 'custom'"),
        ("just a string", "expected a dict"),
        ({"role": "user", "content": "ok", "name": ""}, "'name' must be a non-empty string"),
        ({"role": "user", "content": "ok", "name": "Bob Smith"}, "for example 'Bob_Smith'"),
    ],
)
def test_bad_shape_is_a_value_error_naming_the_problem(make_memory, message, fragment):
    mem = make_memory()
    mem.add(user("before"))
    before = [m.data for m in mem.history()]
    with pytest.raises(ValueError) as info:
        mem.add(message)
    assert isinstance(info.value, InvalidMessage)
    assert fragment in str(info.value)
    assert [m.data for m in mem.history()] == before


def test_a_bad_message_in_a_batch_stores_none_of_the_batch(make_memory):
    mem = make_memory()
    mem.add(user("kept"))
    with pytest.raises(InvalidMessage, match="message 2"):
        mem.add([user("a"), user("b"), {"role": "user", "content": None}])
    assert [m.text for m in mem.history()] == ["kept"]


def test_tool_result_must_answer_a_pending_call(make_memory):
    mem = make_memory()
    chain = tool_chain("c", n=2)
    mem.add(chain[0])
    with pytest.raises(InvalidMessage, match="does not match a pending tool call"):
        mem.add({"role": "tool", "tool_call_id": "other", "content": "x"})
    with pytest.raises(InvalidMessage, match="cannot follow unanswered tool calls"):
        mem.add(user("what happened?"))
    mem.add(chain[1:])
    mem.add(user("thanks"))
    with pytest.raises(InvalidMessage, match="does not answer any tool call"):
        mem.add({"role": "tool", "tool_call_id": "c-0", "content": "late duplicate"})
    with pytest.raises(InvalidMessage, match="already used"):
        mem.add(tool_chain("c", n=1))
    assert len(mem.history()) == 4


def test_sdk_style_messages_are_accepted_and_normalised(make_memory):
    mem = make_memory()
    raw = {"role": "assistant", "content": "hello", "refusal": None, "annotations": None, "audio": None,
           "function_call": None, "tool_calls": None}
    (logged,) = mem.add(raw)
    assert logged.data == {"role": "assistant", "content": "hello"}
    (parts,) = mem.add({"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]})
    assert parts.text == "look"


def test_a_whole_api_reply_is_refused_with_what_to_add_instead(make_memory):
    from openai.types.chat import ChatCompletion
    from openai.types.responses import Response

    mem = make_memory()
    mem.add(user("Hello."))
    completion = ChatCompletion.model_validate({
        "id": "c", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Hi."}}]})
    with pytest.raises(InvalidMessage, match=r"whole chat.completion object; add its message, completion.choices\[0\].message"):
        mem.add(completion)
    response = Response.model_validate({
        "id": "r", "object": "response", "created_at": 0, "model": "m", "parallel_tool_calls": True, "tool_choice": "auto",
        "tools": [], "output": [{"type": "message", "id": "m1", "role": "assistant", "status": "completed",
                                 "content": [{"type": "output_text", "text": "Hi.", "annotations": []}]}]})
    with pytest.raises(InvalidMessage, match=r"whole response object; add its output items, response.output"):
        mem.add(response)
    assert [m.text for m in mem.add(response.output)] == ["Hi."]


def test_a_structured_output_reply_is_logged_as_its_json_text(make_memory):
    # client.chat.completions.parse(response_format=Trip) returns a message whose `parsed` holds a Trip
    from openai.types.chat import ParsedChatCompletionMessage
    from pydantic import BaseModel

    class Trip(BaseModel):
        city: str
        days: int

    mem = make_memory()
    mem.add(user("Plan three days in Porto."))
    reply = ParsedChatCompletionMessage[Trip](role="assistant", content='{"city":"Porto","days":3}',
                                              parsed=Trip(city="Porto", days=3))
    (logged,) = mem.add(reply)
    assert logged.data == {"role": "assistant", "content": '{"city":"Porto","days":3}'}


def test_a_refusal_or_an_audio_reply_is_logged_with_what_it_said(make_memory):
    # the SDK's message for a refusal has no content; add() raised and the turn was not logged
    from openai.types.chat import ChatCompletionMessage

    mem = make_memory()
    mem.add(user("Write my essay on ORD-5521 for me."))
    refusal = ChatCompletionMessage.model_validate({"role": "assistant", "content": None,
                                                    "refusal": "I can't write graded work for you."})
    (logged,) = mem.add(refusal)
    assert logged.data == {"role": "assistant", "content": "I can't write graded work for you."}
    mem.add(user("Then read me the summary."))
    spoken = ChatCompletionMessage.model_validate({"role": "assistant", "content": None, "audio": {
        "id": "audio_1", "data": "UklGRg==", "expires_at": 0, "transcript": "Here is the summary."}})
    (logged,) = mem.add(spoken)
    assert logged.text == "Here is the summary." and "audio" not in logged.data
    assert [m["content"] for m in mem.context() if m["role"] == "assistant"][-2:] == [
        "I can't write graded work for you.", "Here is the summary."]
    with pytest.raises(InvalidMessage, match="'content' is required"):  # nothing said at all
        mem.add({"role": "assistant", "content": None})


def test_a_custom_tools_call_is_kept_counted_and_clipped_like_a_functions(make_memory):
    # the chat API's custom tools take free-form input ("type": "custom"); they were refused
    from openai.types.chat import ChatCompletionMessage

    mem = make_memory(budget=1024, tools=None)  # the request carries memos' schemas
    mem.add(user("Apply the patch for ORD-4471."))
    patch = "*** Begin Patch\n" + "+ a line of the new module\n" * 3000 + "*** End Patch"
    reply = ChatCompletionMessage.model_validate({"role": "assistant", "content": None, "tool_calls": [
        {"id": "p1", "type": "custom", "custom": {"name": "apply_patch", "input": patch}}]})
    (logged,) = mem.add(reply)  # the SDK's own object
    assert logged.data["tool_calls"] == [{"id": "p1", "type": "custom", "custom": {"name": "apply_patch", "input": patch}}]
    assert logged.tokens > 10 * mem.counter.count("a line of the new module")
    mem.add({"role": "tool", "tool_call_id": "p1", "content": "applied"})
    ctx = mem.context()
    assert mem.counter.count_messages(ctx) + mem.counter.count_tools(mem.tools()) <= 1024
    sent = next(m for m in ctx if m.get("tool_calls"))["tool_calls"][0]
    assert sent["custom"]["name"] == "apply_patch" and sent["custom"]["input"].startswith("*** Begin Patch")
    assert "full call in the memory log as message" in sent["custom"]["input"]
    assert ctx[-1] == {"role": "tool", "tool_call_id": "p1", "content": "applied"}


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_JSON_VALUES, st.sampled_from([None, 2]))
def test_plain_json_keeps_the_value_and_writes_out_every_character_it_can(value, indent):
    text = json.dumps(value, indent=indent)
    out = plain_json(text)
    assert json.loads(out) == value
    # what is still escaped is ASCII, a lone surrogate or a JavaScript line end
    for m in re.finditer(r"\\(?:u([0-9a-fA-F]{4})|.)", out, re.S):
        if m.group(1):
            code = int(m.group(1), 16)
            assert code < 0x80 or 0xD800 <= code <= 0xDFFF or code in (0x2028, 0x2029)
    assert plain_json(json.dumps(value, ensure_ascii=False, indent=indent)) == json.dumps(
        value, ensure_ascii=False, indent=indent)


@pytest.mark.parametrize("text", [
    "not JSON: \\u676d\\u5dde",            # a log line that quotes an escape
    "{'city': '\\u676d\\u5dde'}",          # a Python repr, not JSON
    '{"city": "\\u676d\\u5dde"',           # cut off
    "\\u676d\\u5dde",
])
def test_plain_json_leaves_what_is_not_json_as_it_is(text):
    assert plain_json(text) == text


def test_an_escaped_json_tool_result_is_stored_readable_and_found_by_its_words(make_memory):
    mem = make_memory(budget=800)
    hotels = {"hotels": [{"name": "西湖国宾馆", "price": 880, "addr": "杨公堤18号"}]}
    mem.add(user("帮我找杭州的酒店"))
    (asked,) = mem.add({"role": "assistant", "content": None,
                        "tool_calls": [call("c1", "search_hotels", city="杭州")]})
    (result,) = mem.add({"role": "tool", "tool_call_id": "c1", "content": json.dumps(hotels)})
    assert json.loads(result.text) == hotels and "西湖国宾馆" in result.text
    assert result.tokens < mem.counter.count(json.dumps(hotels))
    assert json.loads(asked.data["tool_calls"][0]["function"]["arguments"]) == {"city": "杭州"}
    assert mem.history()[-1].data["content"] == result.text  # as logged
    for i in range(30):  # the chain leaves the hot tier and is archived
        mem.add([user(f"Tell me fun fact number {i} about the sea."), assistant(f"Fact {i}: the sea is deep.")])
    assert mem.stats().demotions > 0
    hits = mem.retrieve("杨公堤")
    assert any("880" in h.text and "tool" in h.text for h in hits), [h.text for h in hits]


def test_a_tool_result_is_known_by_its_key_however_its_json_is_escaped():
    escaped = json.dumps({"城市": "杭州"})
    for content in (escaped, [{"type": "text", "text": escaped}, {"type": "text", "text": escaped}]):
        raw = {"role": "tool", "tool_call_id": "c1", "content": content}
        stored = validate_message(raw)
        assert "杭州" in message_text(stored) and message_key(raw) == message_key(stored)


def test_memory_traffic_is_calls_to_the_named_tools_that_say_nothing_and_their_results():
    ours = lambda name: name.startswith("memory_")  # noqa: E731
    data = [
        {"role": "assistant", "content": None, "tool_calls": [call("a", "memory_retrieve", query="order")]},
        {"role": "tool", "tool_call_id": "a", "content": "{\"results\": []}"},
        {"role": "assistant", "content": "Let me look that up.", "tool_calls": [call("b", "memory_retrieve", query="x")]},
        {"role": "tool", "tool_call_id": "b", "content": "{\"results\": []}"},
        {"role": "assistant", "content": None, "tool_calls": [call("c", "memory_pin", text="t"), call("d", "weather")]},
        {"role": "tool", "tool_call_id": "c", "content": "{\"status\": \"ok\"}"},
        {"role": "tool", "tool_call_id": "d", "content": "sunny"},
        user("memory_retrieve is a tool name, said by the user"),
    ]
    msgs = [Message(f"m{i}", i, d, 1) for i, d in enumerate(data)]
    # the calls-only message, and each result of a call to a named tool, even beside a text or another tool
    assert memory_traffic(msgs, ours) == {"m0", "m1", "m3", "m5"}
    # a result whose call was logged before is known by the call among ``earlier``
    assert memory_traffic(msgs[1:2], ours) == set()
    assert memory_traffic(msgs[1:2], ours, earlier=msgs[:1]) == {"m1"}
    assert memory_traffic(msgs, lambda name: False) == set()
