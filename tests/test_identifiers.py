"""The identifier net: every id of a session survives, whatever the summariser writes."""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memos import Memory, MemosSettings
from memos.core.tokens import default_counter
from memos.text.patterns import find_codes, find_identifiers, fold
from memos.tiers.hot import clip_json
from memos.tiers.warm import ExtractiveSummarizer, SummaryPlan


class DroppingSummarizer:
    """A summariser endpoint that fails some of the time and otherwise leaves ids out."""

    name = "dropping"

    def __init__(self, seed: int, fail_rate: float = 0.3, drop_rate: float = 0.7) -> None:
        self.rng = random.Random(seed)
        self.fail_rate, self.drop_rate = fail_rate, drop_rate
        self.inner = ExtractiveSummarizer(default_counter())

    def summarize(self, plan: SummaryPlan) -> str:
        if self.rng.random() < self.fail_rate:
            raise RuntimeError("503 from the summariser endpoint")
        text = self.inner.summarize(plan)
        for ident in find_identifiers(text):
            if self.rng.random() < self.drop_rate:
                text = text.replace(ident, "the reference")
        return text


def make_id(kind: int, n: int) -> str:
    return [f"PNR-{n:05d}", f"ORD-{n + 10000}", f"TKT{n:04d}X", f"user{n}@example.com", f"INV-{n:03d}-B"][kind]


def wide(ident: str) -> str:
    """``ident`` as a Chinese or Japanese input method types it in full-width mode."""
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in ident)


FILLER = ["Sounds good, thanks.", "What about the weather there?", "我们周末再说吧。", "Let me think about it.",
          "Could you compare the two hotels?", "好的，没问题。"]

ops = st.lists(st.one_of(
    st.tuples(st.just("en"), st.integers(0, 4)),
    st.tuples(st.just("zh"), st.integers(0, 4)),
    st.tuples(st.just("wide"), st.integers(0, 4)),
    st.tuples(st.just("tool"), st.integers(0, 4)),
    st.tuples(st.just("filler"), st.integers(0, len(FILLER) - 1)),
), min_size=30, max_size=90)


@pytest.mark.slow
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ops, seed=st.integers(0, 10_000), budget=st.integers(700, 1600))
def test_no_id_of_the_session_is_lost_when_the_summariser_drops_them(ops, seed, budget):
    with tempfile.TemporaryDirectory() as d:
        conf = MemosSettings(budget_tokens=budget, background_indexing=False)
        mem = Memory("ids", store=str(Path(d) / "m.db"), settings=conf, summarizer=DroppingSummarizer(seed))
        ids: list[str] = []
        try:
            for i, (kind, arg) in enumerate(ops):
                ident = make_id(arg, i) if kind != "filler" else ""
                if kind == "en":
                    mem.add({"role": "user", "content": f"My booking reference is {ident}, please keep it handy."})
                    mem.add({"role": "assistant", "content": "Got it, I'll keep that reference."})
                    ids.append(ident)
                elif kind in ("zh", "wide"):  # an id glued to Chinese text, typed as it is or full-width
                    mem.add({"role": "user", "content": f"我的订单号是{ident if kind == 'zh' else wide(ident)}，帮我查一下物流。"})
                    mem.add({"role": "assistant", "content": "好的，我来查。"})
                    ids.append(ident)
                elif kind == "tool":
                    cid = f"call-{i}"
                    mem.add({"role": "assistant", "content": None, "tool_calls": [
                        {"id": cid, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]})
                    mem.add({"role": "tool", "tool_call_id": cid,
                             "content": json.dumps({"status": "ok", "record": ident, "note": "x" * 200})})
                    ids.append(ident)
                else:
                    mem.add({"role": "user", "content": FILLER[arg]})
                    mem.add({"role": "assistant", "content": "Sure."})
            # an id counts as kept as it was typed, full-width or not; it is searched for in ASCII
            prompt = fold(json.dumps(mem.context(tools=[]), ensure_ascii=False))
            facts = fold("\n".join(f.key + " " + f.value for f in mem.facts()))
            lost = []
            for ident in ids:
                if ident in prompt or ident in facts:
                    continue
                if any(ident in fold(h.text) for h in mem.retrieve(ident, top_k=10)):
                    continue
                lost.append(ident)
            assert not lost, f"lost {lost} after {mem.stats().demotions} demotions"
        finally:
            mem.close()


NOTE = "clipped; full text in the memory log as message m1"


def test_a_clipped_tool_result_keeps_a_short_hit_whole_and_cuts_no_id_in_half():
    count = default_counter().count
    result = {"status": "ok", "hits": [
        {"text": "fact booking reference: PNR-55120", "score": 0.61},
        {"text": "user: I never fly Ryanair. " + "The trip notes go on about hotels and trains. " * 12
                 + "The seat is 14C on flight TP-1234.", "score": 0.42},
        {"text": "assistant: " + "Here is a long answer about the weather in Porto. " * 12
                 + "Reference ORD-77120 was refunded.", "score": 0.40}]}
    text = json.dumps(result)
    for cap in (60, 90, 120, 160, 220):
        out = clip_json(text, cap, count, NOTE)
        data = json.loads(out)  # still JSON
        assert count(out) <= cap or data == {"_memos": NOTE}
        if data == {"_memos": NOTE}:
            continue
        assert data["hits"][0]["text"] == "fact booking reference: PNR-55120"
        # every id shown is an id of the result (or of the note): none is the cut-off head of one
        assert set(find_identifiers(out)) <= set(find_identifiers(text)) | set(find_identifiers(NOTE))
    roomy = json.loads(clip_json(text, 160, count, NOTE))
    assert {"PNR-55120", "TP-1234", "ORD-77120"} <= set(find_identifiers(json.dumps(roomy)))


ids = st.one_of(st.integers(0, 10**7).map(lambda n: f"PNR-{n}"), st.integers(0, 99_999).map(lambda n: f"ORD-{n:05d}"),
                st.integers(1, 999).map(lambda n: f"user{n}@example.com"),
                st.dates().map(lambda d: d.isoformat()))
words = st.sampled_from(["the", "trip", "notes", "hotel", "train", "seat", "订单", "物流", "好的，", "refund", "weather"])
strings = st.lists(st.one_of(ids, ids, words), max_size=40).map(" ".join)
json_values = st.recursive(st.one_of(strings, st.integers(), st.none()),
                           lambda kids: st.one_of(st.lists(kids, max_size=12),
                                                  st.dictionaries(st.sampled_from("abcdefghijkl"), kids, max_size=10)),
                           max_leaves=40)


@settings(max_examples=150, deadline=None)
@given(value=st.one_of(st.lists(json_values, max_size=12), st.dictionaries(st.sampled_from("abcdefghijkl"), json_values)),
       cap=st.integers(20, 400))
def test_clipped_json_is_json_within_the_cap_and_never_shows_half_an_id(value, cap):
    count = default_counter().count
    text = json.dumps(value, ensure_ascii=False)
    out = clip_json(text, cap, count, NOTE)
    assert out is not None
    data = json.loads(out)
    assert count(out) <= cap or data == {"_memos": NOTE}
    assert set(find_identifiers(out)) <= set(find_identifiers(text)) | set(find_identifiers(NOTE))


def test_codes_are_the_identifiers_written_one_way_only():
    text = ("订单号是ORD-77123，the booking HX88321, tracking 1Z999AA10123456784, write to maya.chen@example.com "
            "or https://example.com/a; 150 euros on 2023-05-08, call +351 912 345 678, 42 Rua do Ouro, COVID-19.")
    # amounts, dates, phone numbers and addresses are identifiers too, but not codes
    assert find_codes(text) == ["ORD-77123", "HX88321", "1Z999AA10123456784", "maya.chen@example.com",
                                "https://example.com/a", "COVID-19"]
    assert {"150 euros", "2023-05-08", "+351 912 345 678"} <= set(find_identifiers(text))
