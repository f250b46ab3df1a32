"""Property-based tests of the pager's invariants over random sessions.

For any session of user, assistant and tool-chain messages (chains possibly still in
flight), any budget and any thresholds:
- the context never exceeds the budget,
- it never holds an orphan tool message or a finished call without its results,
- it always holds every pinned message and every in-flight chain,
- every message ever added is still in the log, in order (a JSON text by its value).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from memos import Memory, MemosSettings, PinLimitExceeded
from memos.core.sections import PINNED_HEADER, find_orphans

WORDS = ["order", "ORD-4411", "hotel", "flight", "weather", "search", "result", "again", "details", "Lisbon", "price", "€45"]

text = st.lists(st.sampled_from(WORDS), min_size=5, max_size=150).map(" ".join)
big_text = st.lists(st.sampled_from(WORDS), min_size=50, max_size=1500).map(" ".join)

op = st.one_of(
    st.tuples(st.just("user"), text),
    st.tuples(st.just("assistant"), text),
    st.tuples(st.just("constraint"), st.sampled_from(["I never fly before 9am.", "Budget at most $200.", "不要辣的。"])),
    st.tuples(st.just("pin"), st.integers(min_value=0, max_value=10_000)),
    # (calls, results given, result text, a long argument: a file written through a tool call)
    st.tuples(st.just("chain"), st.tuples(st.integers(1, 3), st.integers(0, 3), st.one_of(text, big_text),
                                          st.one_of(st.none(), big_text))),
    st.tuples(st.just("context"), st.sampled_from(["all", "retrieve", "none"])),
    # a prompt for a question that is not logged (context(query=)), short or long
    st.tuples(st.just("ask"), st.tuples(st.sampled_from(["all", "retrieve", "none"]), st.one_of(text, big_text))),
    st.tuples(st.just("image"), st.tuples(st.one_of(text, big_text), st.sampled_from(["low", "high", None]))),
)


@st.composite
def memo_settings(draw):
    budget = draw(st.integers(min_value=500, max_value=4000))
    hard = draw(st.floats(min_value=0.3, max_value=1.0))
    soft = draw(st.floats(min_value=0.1, max_value=hard))
    hot = draw(st.floats(min_value=0.1, max_value=hard))
    share = draw(st.floats(min_value=0.05, max_value=0.3))
    keep = draw(st.integers(min_value=1, max_value=3))
    return MemosSettings(budget_tokens=budget, soft_threshold=soft, hard_threshold=hard, hot_target=hot,
                         summary_share=share, keep_recent_units=keep, full_resummary_every=draw(st.integers(1, 4)),
                         system_messages=draw(st.sampled_from(["separate", "one"])))


def check_context(mem: Memory, pinned_texts: list[str], in_flight_id: str | None, rules: list[str] = (),
                  sent: str = "all", query: str | None = None) -> None:
    # the request carries memos' tools (all, or retrieve alone) when the budget can hold them, else
    # none, whatever add() counted (the constructor's tools): messages and tools together fit
    budget = mem.settings.budget_tokens
    tools = (mem.tools() if sent == "all" and budget >= 1200 else
             mem.tools(names=["retrieve"]) if sent != "none" and budget >= 800 else [])
    if query is not None and in_flight_id is not None:  # a user message may not follow unanswered calls
        with pytest.raises(ValueError, match="unanswered tool calls"):
            mem.context(tools=tools, query=query)
        query = None
    ctx = mem.context(tools=tools, query=query)
    assert mem.counter.count_messages(ctx) + mem.counter.count_tools(tools) <= mem.settings.budget_tokens
    if query is not None:  # the prompt ends with the question, whole or clipped head and tail
        assert ctx[-1]["role"] == "user" and ctx[-1]["content"].startswith(query[:20]), ctx[-1]
    assert find_orphans(ctx) == []
    if mem.settings.system_messages == "one":  # the sessions here log no system message
        assert all(m["role"] != "system" for m in ctx[1:])
    for m in ctx:  # the pinned section stays within its cap (alone, or merged with the other sections)
        if PINNED_HEADER in str(m.get("content")):
            section = PINNED_HEADER + str(m["content"]).split(PINNED_HEADER, 1)[1].split("\n\n[memory:", 1)[0]
            assert mem.counter.count_message({"role": "system", "content": section}) <= mem.settings.pinned_max_tokens
    dump = json.dumps(ctx, ensure_ascii=False)
    for t in pinned_texts:  # explicit pins: always there
        assert json.dumps(t, ensure_ascii=False)[1:-1] in dump, t
    facts = " ".join(f.value for f in mem.facts())
    for t in rules:  # rules the user stated: there, or past the pinned cap (the agent is told) and kept as facts
        assert json.dumps(t, ensure_ascii=False)[1:-1] in dump or ("more stated rule(s)" in dump and t in facts), t
    if in_flight_id is not None:
        assert any(m.get("tool_calls") and m["tool_calls"][0]["id"] == in_flight_id for m in ctx)


def _values(msg: dict) -> dict:
    """``msg`` with its JSON texts (tool results, function arguments) read as values: the log
    keeps the value, with escaped non-ASCII characters written out."""

    def value(text: str) -> object:
        try:
            return ("json", json.loads(text))
        except ValueError:
            return text

    out = dict(msg)
    if out.get("role") == "tool" and isinstance(out.get("content"), str):
        out["content"] = value(out["content"])
    if out.get("tool_calls"):
        out["tool_calls"] = [{**c, "function": {**c["function"], "arguments": value(c["function"]["arguments"])}}
                             for c in out["tool_calls"]]
    return out


@pytest.mark.slow
@settings(max_examples=int(__import__("os").environ.get("MEMOS_HYPOTHESIS_EXAMPLES", "100")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=20, max_size=80), conf=memo_settings())
def test_paging_invariants_hold_for_random_sessions(ops, conf):
    run_session(ops, conf)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=20, max_size=80), conf=memo_settings())
def test_paging_invariants_hold_for_a_few_random_sessions(ops, conf):
    # the same invariants on a dozen sessions, in the quick run; the slow one draws a hundred
    run_session(ops, conf)


def run_session(ops, conf) -> None:
    with tempfile.TemporaryDirectory() as d:
        mem = Memory("prop", store=str(Path(d) / "m.db"), settings=conf)
        added: list[dict] = []
        pinned_texts: list[str] = []
        rules: list[str] = []
        pending: list[str] = []
        in_flight: str | None = None
        n_chain = 0

        def add(msg: dict) -> None:
            mem.add(msg)
            added.append({k: v for k, v in msg.items() if v is not None})

        def answer_pending() -> None:
            nonlocal in_flight
            for cid in list(pending):
                add({"role": "tool", "tool_call_id": cid, "content": f"late result for {cid}"})
                pending.remove(cid)
            in_flight = None

        try:
            for kind, arg in ops:
                if kind == "context":
                    check_context(mem, pinned_texts, in_flight, rules, arg)
                    continue
                if kind == "ask":
                    check_context(mem, pinned_texts, in_flight, rules, *arg)
                    continue
                if kind == "pin":
                    logged = mem.history()
                    if logged:
                        target = logged[arg % len(logged)]
                        if target.role in ("user", "assistant") and target.text and len(target.text) < 120 and len(pinned_texts) < 6:
                            try:
                                mem.pin(target.id)
                            except PinLimitExceeded:  # refused at pin() time, nothing pinned
                                continue
                            pinned_texts.append(target.text)
                    continue
                answer_pending()
                if kind == "user":
                    add({"role": "user", "content": arg})
                elif kind == "assistant":
                    add({"role": "assistant", "content": arg})
                elif kind == "image":
                    words, detail = arg
                    url = {"url": "data:image/png;base64," + "iVBORw0KGgo" * 2000, **({"detail": detail} if detail else {})}
                    add({"role": "user", "content": [{"type": "text", "text": words}, {"type": "image_url", "image_url": url}]})
                elif kind == "constraint":
                    add({"role": "user", "content": arg})
                    rules.append(arg)
                else:
                    calls, answered, result, long_arg = arg
                    n_chain += 1
                    ids = [f"c{n_chain}-{i}" for i in range(calls)]
                    add({"role": "assistant", "content": None, "tool_calls": [
                        {"id": cid, "type": "function", "function": {"name": "search", "arguments": json.dumps(
                            {"q": cid, **({"body": long_arg} if long_arg else {})})}}
                        for cid in ids]})
                    for cid in ids[: min(answered, calls)]:
                        add({"role": "tool", "tool_call_id": cid, "content": result})
                    pending[:] = ids[min(answered, calls):]
                    in_flight = ids[0] if pending else None
            check_context(mem, pinned_texts, in_flight, rules)
            stats = mem.stats()
            event(f"demoted: {stats.demotions > 0}, soft-compacted: {stats.soft_compactions > 0}")
            history = mem.history()
            assert [_values(m.data) for m in history] == [_values(m) for m in added]
            assert [m.seq for m in history] == list(range(len(added)))
        finally:
            mem.close()
