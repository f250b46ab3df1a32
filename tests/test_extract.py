"""The rule-based fact extractor, message by message."""

from __future__ import annotations

import json

import pytest

from memos.core.messages import Message
from memos.core.tokens import default_counter
from memos.paging.guards import is_promise
from memos.text.classifiers.revocations import RevocationClassifier
from memos.text.classifiers.rules import RuleClassifier, default_classifier
from memos.tiers.extract import ADDRESS, RuleExtractor, identifier_facts, message_source
from tests.conftest import assistant, tool_chain, user


def msgs(*datas):
    return [Message(id=f"m{i}", seq=i, data=d, tokens=1) for i, d in enumerate(datas)]


def extract(*datas):
    return RuleExtractor().extract(msgs(*datas))


def kinds(extraction):
    return {(c.kind, c.key if c.kind in ("identifier", "fact", "task_state") else c.value) for c in extraction.candidates}


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("I prefer aisle seats.", "preference"),
        ("I don't eat pork.", "preference"),
        ("I'm allergic to shellfish.", "preference"),
        ("我不吃香菜。", "preference"),
        ("Never call me after 8pm.", "constraint"),
        ("预算不超过500元。", "constraint"),
    ],
)
def test_preferences_and_constraints_are_pinned(text, kind):
    (c,) = [c for c in extract(user(text)).candidates if c.kind in ("preference", "constraint")]
    # the classifier names the kind; either way the rule is pinned under its text's key
    assert c.kind in ("preference", "constraint") and c.pinned and c.value == text and c.source_ids == ("m0",)
    assert c.origin == "classifier" and 0.0 < c.confidence <= 1.0


def judged_by_ngrams(*datas):
    # judged by the n-gram model (memos' detector with or without the embedding model on disk)
    return RuleExtractor(detector=default_classifier()).extract(msgs(*datas))


@pytest.mark.parametrize("text", ["I love hiking in the hills.", "I really enjoy jazz."])
def test_a_taste_the_detector_does_not_call_a_rule_is_a_preference_fact_not_pinned(text):
    # whether a taste is a rule is the detector's call (the corpus calls "I love hiking, so
    # outdoorsy ideas are welcome." one); a detector whose bar is above this sentence's score
    # shows what is kept of a taste it does not call one
    strict = RuleClassifier(threshold=(default_classifier().score(text) + 1) / 2)
    (c,) = [c for c in RuleExtractor(detector=strict).extract(msgs(user(text))).candidates if c.kind == "preference"]
    assert c.value == text and not c.pinned


@pytest.mark.parametrize(
    "text",
    ["That must've been breathtaking!", "You must love it.", "I'll never forget that day.", "We don't go often."],
)
def test_chit_chat_is_not_a_constraint(text):
    assert not [c for c in extract(user(text)).candidates if c.kind == "constraint"]


def test_identifiers_and_addresses_from_a_user_message():
    found = extract(user("Order ORD-12345 was $114.50 on 2026-05-20; email maya@example.com, ship to 14 Rua Augusta, 1100-053 Lisbon."))
    keys = {c.key for c in found.candidates if c.kind == "identifier"}
    assert {"ORD-12345", "$114.50", "2026-05-20", "maya@example.com", "address"} <= keys
    addr = next(c for c in found.candidates if c.key == "address")
    assert addr.value == "14 Rua Augusta, 1100-053 Lisbon" and addr.single


@pytest.mark.parametrize(
    "address",
    ["221B Baker Street, London NW1 6XE", "42 Rua do Ouro, 1100-060 Lisbon", "1600 Pennsylvania Avenue", "12 Elm Road"],
)
def test_address_pattern(address):
    assert ADDRESS.search(f"please use {address}.").group(0).rstrip(".") == address


def test_my_x_is_y_is_a_single_valued_fact():
    (c,) = [c for c in extract(user("My seat number is 14C.")).candidates if c.kind == "fact"]
    assert (c.key, c.value, c.single) == ("seat number", "14C", True)


@pytest.mark.parametrize(("text", "value"), [
    ("My order number is ORD-55121, can you track it?", "ORD-55121"),
    ("My name is Ana, and I live in Porto.", "Ana"),
    ("My budget is 3000, which is tight.", "3000"),
    ("My address is 42 Rua do Ouro, Lisbon, please ship there.", "42 Rua do Ouro, Lisbon"),
])
def test_a_fact_value_ends_where_another_clause_begins(text, value):
    (c,) = [c for c in extract(user(text)).candidates if c.kind == "fact"]
    assert c.value == value


def test_revocations_are_proposed_and_a_rule_in_revocation_words_is_kept():
    # none of these sentences is in the revocation or rule corpus
    found = extract(user("You can put me in aisle seats again."), user("我现在可以吃辣了。"), user("I no longer eat fish."),
                    user("My flight got cancelled."), user("航班被取消了。"))
    revoked = {i.text for i in found.invalidations}
    assert {"You can put me in aisle seats again.", "我现在可以吃辣了。"} <= revoked
    assert not revoked & {"My flight got cancelled.", "航班被取消了。"}
    # a rule is proposed, or carried by its revocation for the cold tier to add if it lifts nothing
    kept = {c.value for c in found.candidates if c.pinned} | {i.otherwise.value for i in found.invalidations if i.otherwise}
    assert "I no longer eat fish." in kept


def test_a_sentence_of_a_long_message_needs_a_higher_score_to_lift_a_rule():
    clf = RevocationClassifier()  # the n-gram model, whose scores the comments give
    cheer = "You can go back there again soon!"  # 0.839 as a revocation: above the English threshold (0.76), below 0.85
    assert clf.judge([cheer]) == [True]
    chat = ["Wow, congrats on the new job!", cheer, "Tell me everything when you're back."]
    assert clf.judge(chat) == [False, False, False]
    assert clf.judge([*chat, "Spicy is okay for me now."]) == [False, False, False, True]


def test_tool_chain_gives_task_state_failures_and_json_identifiers():
    ok = tool_chain("a", result=json.dumps({"order_id": "ORD-9", "tracking": "1Z999", "ship_to": "12 Elm Road, London"}), name="get_order")
    bad = tool_chain("b", result="Error: payment declined (timeout)", name="pay")
    found = extract(*ok, *bad)
    got = kinds(found)
    assert ("task_state", "last get_order call") in got and ("task_state", "last pay call") in got
    assert ("identifier", "ORD-9") in got and ("identifier", "1Z999") in got and ("identifier", "address") in got
    failed = [c for c in found.candidates if c.kind == "failed_attempt"]
    assert len(failed) == 1 and failed[0].key.startswith("pay(") and "declined" in failed[0].value


def test_assistant_decisions():
    found = extract(assistant("I booked the Chiado hotel, reference BK-77812."), assistant("Let me think."))
    decisions = [c.value for c in found.candidates if c.kind == "decision"]
    assert decisions == ["I booked the Chiado hotel, reference BK-77812."]


def test_identifier_safety_net_adds_only_what_is_missing():
    sources = [message_source(m) for m in msgs(user("Codes: ORD-1111, ORD-2222 and ORD-3333."))]
    out = identifier_facts(sources, covered="summary mentions ORD-1111", known="ORD-2222\nsome value")
    assert [c.key for c in out] == ["ORD-3333"] and out[0].once and "ORD-3333" in out[0].value


@pytest.mark.parametrize("text", [
    "I refuse to watch any movie or show that includes excessive violence or gore.",
    "I have a strong aversion to horror movies.",
    "I'm not comfortable with pets that can jump on furniture.",
    "I only wear clothing free of any leather, suede, fur, or other animal-derived materials.",
    "I find flashcards ineffective and prefer storytelling for memorization.",
    "I dislike series with a lot of episodes; they feel overwhelming.",
])
def test_more_ways_of_stating_a_preference_are_pinned_whole(text):
    found = extract(user(text))
    # a refusal ("I refuse to watch ...") is as much a constraint as a preference: either kind is a
    # rule; one worded like a revocation is carried by it, for the cold tier to add
    rules = [c for c in found.candidates if c.kind in ("preference", "constraint")]
    rules += [i.otherwise for i in found.invalidations if i.otherwise and i.otherwise.confidence > i.confidence]
    assert rules and all(c.pinned for c in rules)
    assert rules[0].value == text  # a short message is kept whole, with the reason that came with it


def test_a_short_message_is_kept_whole_up_to_a_count_of_tokens_in_any_language():
    english = ("I'm allergic to peanuts, even a trace gives me hives. So skip any dish with peanuts in it. "
               "The Thai place last time had them in the salad.")
    chinese = "我对花生严重过敏，吃一点点就会起疹子。以后帮我订餐都别选有花生的菜，包括花生酱和花生油做的。上次那家泰国菜馆的沙拉里就有，害我去了趟医院。"
    # the same three sentences: the Chinese has half the characters and nearly three times the tokens
    assert len(chinese) < len(english) and default_counter().count(chinese) > 80 >= default_counter().count(english)
    rules = [c for c in extract(user(english)).candidates if c.kind in ("preference", "constraint")]
    assert rules and all(c.value == english for c in rules)
    rules = [c for c in extract(user(chinese)).candidates if c.kind in ("preference", "constraint")]
    # each rule is pinned as its sentence; the story after them is not pinned at all
    assert {c.value for c in rules} == {"我对花生严重过敏，吃一点点就会起疹子。", "以后帮我订餐都别选有花生的菜，包括花生酱和花生油做的。"}


@pytest.mark.parametrize("text", ["Do you only wear black?", "Make this grammatically correct: I like your watch."])
def test_questions_and_tastes_are_not_pinned(text):
    found = judged_by_ngrams(user(text))
    assert not any(c.pinned for c in found.candidates)


def test_a_user_who_writes_traditional_chinese_is_read_as_one_who_writes_simplified():
    # a rule among a greeting and thanks must score 0.85; in Traditional characters it scored 0.41 before
    chatty = "嗨！請記住，我對花生過敏。謝謝你！"
    found = extract(user(chatty), user("出差只坐高鐵，不坐飛機。"), user("今天天氣不錯，我們去公園散步了。"))
    pinned = {c.value for c in found.candidates if c.pinned}
    assert pinned == {chatty, "出差只坐高鐵，不坐飛機。"}  # kept as the user wrote them (a short message whole)
    lifted = extract(user("出差不用只坐高鐵了。"), user("週末可以幫我排會議了。"), user("我昨天坐高鐵去了台中。"))
    assert {i.text for i in lifted.invalidations} == {"出差不用只坐高鐵了。", "週末可以幫我排會議了。"}
    # the user's own number, filed under its key without the adverb or the "new" before it
    facts = extract(user("我的手機號其實是0912 345 678，有事打我。"), user("我的新郵箱是mei@example.tw。"))
    assert {(c.key, c.value) for c in facts.candidates if c.kind == "fact"} == {("手機號", "0912 345 678"),
                                                                                 ("郵箱", "mei@example.tw")}
    # an assistant's promise in Traditional characters holds what it refers to, as in Simplified
    assert is_promise("我會在你確認後預訂九點四十的那班。") and is_promise("我会在你确认后预订九点四十的那班。")
    assert not is_promise("九點四十的那班已經訂好了。")
