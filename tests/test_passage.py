"""The passage of a long recalled item that bears on the query."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from memos.core.tokens import default_counter
from memos.text.passage import best_passage
from memos.text.sentences import split_sentences
from memos.text.terms import content_terms

from .conftest import assistant, user

COUNT = default_counter().count
REPORT = " ".join(f"Paragraph {i}: revenue of {i * 1000} EUR in region R{i}." for i in range(300))


def test_the_sentences_around_the_best_match_are_kept_within_the_limit():
    part = best_passage(REPORT, "What was region R150's revenue?", 60, COUNT)
    assert part is not None and "revenue of 150000 EUR in region R150." in part
    assert part.startswith("… ") and part.endswith(" …") and COUNT(part) <= 60
    # consecutive sentences, as the text has them
    assert part.strip("… ") in REPORT


def test_chinese_text_is_matched_by_bigrams_and_keeps_its_own_spacing():
    text = "".join(f"第{i}天我们去了不同的地方。" for i in range(40)) + "我婶婶的生日是在5月29号。" + \
        "".join(f"第{i}天天气很好。" for i in range(40))
    part = best_passage(text, "我婶婶的生日是啥时候来着？", 40, COUNT)
    assert part is not None and "我婶婶的生日是在5月29号。" in part and " " not in part.strip("… ")


def test_no_passage_when_nothing_matches_or_the_text_is_one_sentence():
    assert best_passage(REPORT, "weather in Lisbon", 60, COUNT) is None
    assert best_passage("One long sentence without a stop " * 40, "sentence", 20, COUNT) is None
    assert best_passage(REPORT, "", 60, COUNT) is None


def _pasted_report(make_memory):
    """A session where the report was pasted, answered, and followed by small talk."""
    mem = make_memory(budget=1024)
    mem.add(user("Summarise this: " + REPORT))
    mem.add(assistant("Revenue grew steadily across the regions."))
    for i in range(6):
        mem.add([user(f"Unrelated question number {i} about the weather."), assistant("Sunny.")])
    return mem


def test_a_question_about_the_middle_of_a_pasted_document_recalls_that_part(make_memory):
    mem = _pasted_report(make_memory)
    mem.add(user("What was region R150's revenue?"))
    text = json.dumps(mem.context(), ensure_ascii=False)
    assert "revenue of 150000 EUR in region R150." in text


sentence = st.text(alphabet=st.sampled_from(list("abcdefg xyz预算酒店早餐12")), min_size=1, max_size=30).map(
    lambda s: s.strip() or "a")


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(st.tuples(sentence, st.sampled_from([". ", "。", "! ", "\n"])), min_size=1, max_size=30),
       query=st.text(alphabet=st.sampled_from(list("abcdefg xyz预算酒店早餐?")), max_size=20),
       limit=st.integers(min_value=8, max_value=200))
def test_a_passage_is_consecutive_text_within_the_limit_holding_the_best_sentence(parts, query, limit):
    text = "".join(s + end for s, end in parts).strip()
    part = best_passage(text, query, limit, COUNT)
    if part is None:
        return
    body = part.removeprefix("… ").removesuffix(" …")
    assert body and body in text and COUNT(part) <= limit + 2  # the markers' join may merge tokens
    terms = content_terms(query)
    best = max(len(content_terms(s) & terms) for s in split_sentences(text))
    assert best > 0 and any(len(content_terms(s) & terms) == best for s in split_sentences(body))


def test_the_retrieve_tool_previews_the_passage_that_answers(make_memory):
    mem = _pasted_report(make_memory)
    call = {"id": "c1", "type": "function",
            "function": {"name": "retrieve", "arguments": json.dumps({"query": "region R150 revenue"})}}
    results = json.loads(mem.handle_tool_call(call)["content"])["results"]
    report = next(r for r in results if r["message_ids"] == [mem.history()[0].id])
    assert "region R150." in report["text"] and len(report["text"]) <= 300
