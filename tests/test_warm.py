"""The warm tier: extractive summaries, incremental updates, the cap, full re-summaries."""

from __future__ import annotations

import pytest

from memos.core.messages import Message
from memos.core.tokens import TokenCounter
from memos.tiers.warm import EARLIER, OLDEST, ExtractiveSummarizer, SummaryPlan, fit_summary, layers, prepare_summary
from tests.conftest import assistant, tool_chain, user

COUNTER = TokenCounter()


def msgs(*datas, start=0):
    return tuple(Message(id=f"m{start + i}", seq=start + i, data=d, tokens=COUNTER.count_message(d)) for i, d in enumerate(datas))


def test_keeps_goals_constraints_ids_and_tool_outcomes_and_drops_small_talk():
    chain = tool_chain("c", result='{"order_id": "ORD-12345", "status": "shipped"}', name="get_order")
    segment = msgs(
        user("Hello!"),
        assistant("Hi, how can I help?"),
        user("I need to return order ORD-12345. I never want store credit."),
        *chain,
        assistant("Thanks!"),
        user("ok"),
        assistant("I decided to file the return for ORD-12345 with a refund to your card."),
    )
    text = ExtractiveSummarizer(COUNTER).summarize(SummaryPlan("full", None, segment, 500, segment[-1].seq))
    assert "ORD-12345" in text
    assert "I never want store credit." in text
    assert "get_order returned" in text and "called get_order" in text
    assert "decided to file the return" in text
    for small_talk in ("Hello!", "Thanks!", "- user: ok"):
        assert small_talk not in text


def test_incremental_summary_folds_the_new_segment_into_the_old():
    s = ExtractiveSummarizer(COUNTER)
    first = s.summarize(SummaryPlan("full", None, msgs(user("My flight is LX-1234 on 2026-06-10.")), 300, 0))
    second = s.summarize(SummaryPlan("incremental", first, msgs(user("The hotel booking is BK-77812."), start=1), 300, 1))
    assert "LX-1234" in second and "BK-77812" in second
    assert second.index("LX-1234") < second.index("BK-77812")


def test_summary_respects_its_token_cap_and_prefers_high_scored_lines():
    s = ExtractiveSummarizer(COUNTER)
    filler = [user(f"The weather on day {i} was pleasant and we walked around town.") for i in range(40)]
    key = user("Never share my passport number P-99887766 with anyone.")
    text = s.summarize(SummaryPlan("full", None, msgs(*filler, key), 60, 40))
    assert COUNTER.count(text) <= 60
    assert "P-99887766" in text


def test_fit_summary_compresses_the_oldest_lines_and_keeps_their_ids():
    text = "\n".join(f"- user: line {i} is about booking BK-{1000 + i} for the trip to the coast and back" for i in range(50))
    fitted = fit_summary(text, 200, COUNTER)
    assert COUNTER.count(fitted) <= 200
    lines = fitted.splitlines()
    assert lines[-1] == "- user: line 49 is about booking BK-1049 for the trip to the coast and back"  # newest: detail
    assert any(ln.startswith(EARLIER) and "BK-" in ln for ln in lines)  # older: compressed, ids kept
    assert lines[0].startswith(OLDEST) and "BK-10" in lines[0]  # oldest: their ids on one line
    layered = fit_summary(fitted, 200, COUNTER)
    assert layered == fitted  # fitting again changes nothing
    tight = fit_summary(text, 40, COUNTER)
    assert COUNTER.count(tight) <= 40 and "BK-1049" in tight


def test_layers_keep_ids_of_many_more_segments_than_detail_alone():
    s = ExtractiveSummarizer(COUNTER)
    summary = None
    for k in range(40):
        seg = msgs(user(f"Please hold reservation RES-{5000 + k} for the conference in hall {k}."),
                   assistant(f"Reservation RES-{5000 + k} is on hold until Friday; hall {k} has 40 seats."), start=2 * k)
        summary = s.summarize(SummaryPlan("incremental" if summary else "full", summary, seg, 400, seg[-1].seq))
        assert COUNTER.count(summary) <= 400
    _, earlier, detail = layers(summary)
    kept = [k for k in range(40) if f"RES-{5000 + k}" in summary]
    in_detail = [k for k in range(40) if any(f"RES-{5000 + k}" in ln for ln in detail)]
    assert 39 in in_detail and earlier  # the newest in detail, older ones compressed
    assert len(kept) >= 2 * len(in_detail)  # ids of twice as many segments as the detailed lines hold


def test_prepare_summary_rebuilds_from_originals_every_nth_time():
    seg = msgs(user("new"), start=10)
    originals = msgs(user("old"), user("new"))
    calls = []

    def read_originals():
        calls.append(1)
        return originals

    plan = prepare_summary(previous="- user: old", segment=seg, demotion_number=4, full_every=5, max_tokens=100, originals=read_originals)
    assert plan.kind == "incremental" and plan.previous == "- user: old" and plan.messages == seg and not calls
    plan = prepare_summary(previous="- user: old", segment=seg, demotion_number=5, full_every=5, max_tokens=100, originals=read_originals)
    assert plan.kind == "full" and plan.previous is None and plan.messages == originals and calls
    first = prepare_summary(previous=None, segment=seg, demotion_number=1, full_every=5, max_tokens=100, originals=read_originals)
    assert first.kind == "full" and first.messages == seg and first.through_seq == 10
    with pytest.raises(ValueError):
        prepare_summary(previous=None, segment=(), demotion_number=1, full_every=5, max_tokens=100, originals=read_originals)
