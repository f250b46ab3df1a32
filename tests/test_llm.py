"""The LLM paths, with the real openai client against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import openai
import pytest

from memos import Memory, MemosSettings
from memos.adapters.llm import LLMConfig, LLMError, LLMSummarizer, complete, make_client
from memos.adapters.llm.summarizer import SUMMARY_INSTRUCTIONS
from memos.core.messages import Message
from memos.core.sections import is_section
from memos.tiers.warm import SummaryPlan
from tests.conftest import assistant, tool_chain, user
from tests.llm_server import FakeOpenAI


@pytest.fixture
def server():
    with FakeOpenAI(seed=7) as srv:
        yield srv


def config(srv: FakeOpenAI, **kw) -> LLMConfig:
    base = {"base_url": srv.url, "model": "test-model", "api_key": "test", "timeout_s": 1.0, "max_attempts": 3,
            "deadline_s": 5.0, "max_backoff_s": 0.02}
    base.update(kw)
    return LLMConfig(**base)


def test_the_summary_prompt_asks_for_what_must_be_kept():
    for phrase in ("goal", "constraint", "decisions", "done, in progress and blocked", "failed attempts",
                   "next steps", "exactly as written", "Drop greetings", "repeated reasoning", "later corrected"):
        assert phrase in SUMMARY_INSTRUCTIONS
    m = Message(id="m1", seq=4, data={"role": "user", "content": "Ship ORD-1 to 1 Elm Road"}, tokens=10)
    s = LLMSummarizer(LLMConfig(base_url="http://127.0.0.1:9/v1", api_key="x"))
    inc = s.messages(SummaryPlan("incremental", "- user: old line", (m,), 300, 4, ("9 Oak Street",)))
    assert "Current memory (update it; do not rewrite it from nothing):\n- user: old line" in inc[1]["content"]
    assert "#4 user: Ship ORD-1 to 1 Elm Road" in inc[1]["content"] and "9 Oak Street" in inc[1]["content"]
    full = s.messages(SummaryPlan("full", None, (m,), 300, 4))
    assert "from scratch" in full[1]["content"] and "Current memory" not in full[1]["content"]


def test_retry_after_is_honoured_and_5xx_retried(server):
    server.retry_after = 0.4
    server.faults.extend(["429", "500"])
    cfg = config(server, max_backoff_s=1.0)
    start = time.perf_counter()
    reply = complete(make_client(cfg), cfg, [{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content == "OK: hi"
    assert time.perf_counter() - start >= 0.4
    assert server.statuses == [429, 500, 200]


def test_context_length_errors_are_not_retried(server):
    server.faults.append("context_length")
    cfg = config(server)
    with pytest.raises(LLMError, match="maximum context length"):
        complete(make_client(cfg), cfg, [{"role": "user", "content": "hi"}])
    assert server.statuses == [400]


def test_timeouts_and_malformed_answers_fail_cleanly(server):
    server.slow_s = 1.5
    server.faults.extend(["slow", "slow", "slow"])
    cfg = config(server, timeout_s=0.3)
    with pytest.raises(LLMError):
        complete(make_client(cfg), cfg, [{"role": "user", "content": "hi"}])
    server.faults.clear()
    server.faults.extend(["malformed"] * 3)
    with pytest.raises(LLMError):
        complete(make_client(cfg), cfg, [{"role": "user", "content": "hi"}])


def fill(mem: Memory, start: int, turns: int) -> int:
    n = 0
    for i in range(start, start + turns):
        mem.add(user(f"Please check order ORD-{1000 + i} and tell me when it ships."))
        mem.add(tool_chain(f"c{i}", result=json.dumps({"order": f"ORD-{1000 + i}", "notes": "details " * 40})))
        mem.add(assistant(f"Order ORD-{1000 + i} ships tomorrow."))
        n += 4
    return n


def test_100_compactions_complete_with_30_percent_failures_and_record_the_fallback(server, store):
    server.fail_rate = 0.3
    cfg = config(server, max_attempts=2)
    mem = Memory("flaky", store=store, settings=MemosSettings(budget_tokens=700), llm=cfg)
    added, turn = 0, 0
    while mem.stats().demotions < 100:
        added += fill(mem, turn, 1)
        turn += 1
        assert mem.counter.count_messages(mem.context()) <= 700
    assert len(mem.history()) == added
    events = [e for e in mem.store.compactions(mem.namespace) if e.kind == "hard" and e.summary_version]
    assert len(events) >= 100
    by_summarizer = {"llm": 0, "fallback": 0}
    for e in events:
        by_summarizer["fallback" if "fallback" in e.summarizer else "llm"] += 1
    assert by_summarizer["llm"] > 0 and by_summarizer["fallback"] > 0, by_summarizer
    assert all(e.summarizer == "llm" or e.summarizer.startswith("extractive (fallback: ") for e in events)
    assert any(e.extractor.startswith("rules (fallback: ") for e in events)
    assert 429 in server.statuses and 500 in server.statuses
    mem.close()


def test_a_summary_that_drops_an_order_id_is_repaired(server, store):
    server.drop_pattern = r"ORD-1002\b"
    mem = Memory("repair", store=store, settings=MemosSettings(budget_tokens=700), llm=config(server))
    fill(mem, 0, 12)
    assert mem.stats().demotions > 0
    assert "ORD-1002" not in mem.summary()
    assert [f for f in mem.facts("identifier") if f.key == "ORD-1002"]
    mem.close()


def test_run_turn_executes_memory_tools_and_reports_other_calls(server, store):
    mem = Memory("agent", store=store, budget=2000)
    mem.archive("The boarding gate for flight LX-1723 is B42.")
    mem.flush()
    client = make_client(config(server))
    result = mem.run_turn(client, "test-model", "What was my boarding gate?")
    assert result.memory_calls == ["retrieve"] and result.steps == 2
    assert "B42" in result.reply and len(result.prompt_tokens) == 2
    assert all(t <= 2000 for t in result.prompt_tokens)  # messages and tool schemas together
    plain = mem.run_turn(client, "test-model", "Thanks, book a taxi.")
    assert plain.reply == "OK: Thanks, book a taxi." and plain.steps == 1
    roles = [m.role for m in mem.history()]
    assert roles[:4] == ["user", "assistant", "tool", "assistant"]
    mem.close()


def test_run_turn_logs_a_refusal_and_returns_it_as_the_reply(server, store):
    # the response's message has no content, only a refusal: add() raised, and `memos chat` with it
    mem = Memory("refusal", store=store, budget=2000)
    client = make_client(config(server))
    result = mem.run_turn(client, "test-model", "Write my graded essay for me.")
    assert result.reply == "I can't write graded work for you." and result.steps == 1
    assert mem.history()[-1].data == {"role": "assistant", "content": "I can't write graded work for you."}
    assert mem.run_turn(client, "test-model", "Fine, book a taxi.").reply == "OK: Fine, book a taxi."
    mem.close()


def test_run_turn_passes_a_custom_tools_input_to_execute(server, store):
    mem = Memory("custom", store=store, budget=2000)
    patch_tool = {"type": "custom", "custom": {"name": "apply_patch", "description": "Apply a patch to the repo."}}
    ran = []
    result = mem.run_turn(make_client(config(server)), "test-model", "Please apply the patch.", tools=[patch_tool],
                          execute=lambda name, args: ran.append((name, args)) or "applied")
    assert ran == [("apply_patch", {"input": "*** Begin Patch\n+ print('hi')\n*** End Patch"})]
    assert result.other_calls[0]["name"] == "apply_patch" and result.steps == 2
    call = next(m for m in mem.history() if m.role == "assistant").data["tool_calls"][0]
    assert call["type"] == "custom" and call["custom"]["name"] == "apply_patch"
    mem.close()


def test_memos_chat_runs_50_turns_from_stdin(server, tmp_path):
    lines = []
    for i in range(50):
        if i == 40:
            lines.append("What was the code for the storage unit?")
        elif i == 3:
            lines.append("The storage unit code is SU-4471, please remember it.")
        else:
            lines.append(f"Turn {i}: tell me something about topic {i} " + "with details " * 15)
    lines.insert(45, "/inspect")
    env = dict(os.environ, MEMOS_LLM_BASE_URL=server.url, MEMOS_LLM_MODEL="test-model", OPENAI_API_KEY="test")
    proc = subprocess.run(
        [sys.executable, "-m", "memos", "chat", "--store", str(tmp_path / "chat.db"), "--budget", "1500"],
        input="\n".join(lines) + "\n/quit\n", capture_output=True, text=True, env=env, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert sum(line.startswith("assistant: ") for line in out.splitlines()) == 50
    assert "[memory tool: retrieve]" in out and "From memory:" in out and "SU-4471" in out.split("[memory tool: retrieve]")[1]
    assert "demotions" in out and "bye after 50 turns" in out
    retrieves = [r for r in server.requests if r.get("messages") and r["messages"][-1].get("role") == "tool"]
    assert retrieves


def test_background_compaction_keeps_the_turn_going_and_the_context_valid(server, store):
    import threading

    from memos.core.sections import find_orphans

    server.hold = threading.Event()  # the summariser answers only when the test says so
    settings = MemosSettings(budget_tokens=1500, background_compaction=True)
    mem = Memory("bg", store=store, settings=settings, llm=config(server, timeout_s=20, deadline_s=30))
    added = 0
    while not mem.compacting:
        added += fill(mem, added, 1)
    # a demotion is being prepared (the LLM is held); the units it takes are still hot
    assert mem.stats().demotions == 0
    added += fill(mem, 1000, 2)  # the user's turns go on meanwhile
    ctx = mem.context()
    assert mem.counter.count_messages(ctx) <= 1500 and find_orphans(ctx) == []
    assert len(mem.history()) == added
    server.hold.set()
    mem.wait()
    mem.add(user("and now?"))
    assert mem.stats().demotions >= 1
    assert any(e.summarizer == "llm" for e in mem.store.compactions(mem.namespace))
    assert len(mem.history()) == added + 1
    mem.close()


def test_llm_fact_operations_become_cold_tier_changes(server, tmp_path):
    from memos.adapters.llm import LLMFactExtractor
    from memos.storage.log import Store
    from memos.tiers.cold import ColdTier, FactCandidate, fact_key

    cold = ColdTier(Store(tmp_path / "f.db").engine, "u/a/s")
    (addr,) = cold.apply([FactCandidate("identifier", "address", "1 Elm Road", single=True, source_seq=1)])
    (tea,) = cold.apply([FactCandidate("preference", "tea", "I like green tea.", pinned=True, source_seq=1)])
    server.fact_ops = [
        {"op": "UPDATE", "kind": "identifier", "key": "shipping address", "value": "9 Oak Street", "fact_id": addr.fact.id, "source_seq": 5},
        {"op": "INVALIDATE", "kind": "preference", "key": "tea", "value": "", "fact_id": tea.fact.id, "source_seq": 5},
        {"op": "ADD", "kind": "constraint", "key": "no calls", "value": "Never call after 8pm.", "fact_id": None, "source_seq": 5},
        {"op": "NOOP", "kind": "fact", "key": "x", "value": "y", "fact_id": None, "source_seq": None},
    ]
    msgs = [Message(id="m5", seq=5, data={"role": "user", "content": "Use 9 Oak Street. No more tea. Never call after 8pm."}, tokens=9)]
    found = LLMFactExtractor(config(server)).extract(msgs, cold.facts())
    changes = cold.apply(found.candidates, found.invalidations)
    assert [c.op.value for c in changes] == ["INVALIDATE", "UPDATE", "ADD"]
    current = {f.key: f for f in cold.facts()}
    assert current["address"].value == "9 Oak Street" and "tea" not in current
    rule = current[fact_key("constraint", "Never call after 8pm.")]  # a rule's key is its text, whoever stored it
    assert rule.pinned and rule.kind == "constraint" and rule.origin == "llm"
    body = server.requests[-1]
    assert body["tool_choice"]["function"]["name"] == "record_facts" and body["temperature"] == 0
    assert f"[{addr.fact.id}] identifier address: 1 Elm Road" in body["messages"][1]["content"]
    server.fact_ops = [{"op": "ADD"}]  # malformed operations are an error the caller falls back from
    with pytest.raises(LLMError, match="malformed record_facts"):
        LLMFactExtractor(config(server)).extract(msgs, [])


def test_with_an_llm_the_items_of_a_list_are_judged_in_one_request(server, store):
    server.rule_kinds = {"My travel rules: aisle seats": "preference", "no hostels": "constraint"}
    with Memory("lists", store=store, llm=config(server, max_attempts=2), tools=[]) as mem:
        before = len(server.requests)
        mem.add(user("My travel rules:\n- aisle seats\n- no hostels"))
        asked = [r for r in server.requests[before:] if "[memos:rules]" in str(r["messages"][0]["content"])]
        assert len(asked) == 2  # the message's sentences, then every item with its heading and alone
        assert "My travel rules: aisle seats" in asked[1]["messages"][1]["content"]
        rules = {f.value: f.origin for f in mem.facts() if f.kind in ("constraint", "preference")}
        assert rules == {"My travel rules: aisle seats": "llm", "My travel rules: no hostels": "llm"}


def test_with_an_llm_its_rule_judgement_is_used_and_recorded(server, store):
    server.rule_kinds = {"Decaf only after three, every day.": "constraint"}
    llm = config(server, max_attempts=2)
    with Memory("rules", store=store, llm=llm, tools=[]) as mem:
        # a rule the LLM judges so, whatever the classifier thinks; chit-chat the LLM calls none
        mem.add(user("Decaf only after three, every day. Can't wait to share with my customers."))
        rules = [f for f in mem.facts() if f.kind in ("constraint", "preference")]
        assert [(f.value, f.origin) for f in rules] == [
            ("Decaf only after three, every day. Can't wait to share with my customers.", "llm")]
        assert any("[memos:rules]" in str(r["messages"][0]["content"]) for r in server.requests)
        server.faults.extend(["500", "500"])  # the endpoint fails: the classifier judges, and says so
        mem.add(user("Never book anything with Ryanair."))
        ryanair = next(f for f in mem.facts() if "Ryanair" in f.value)
        assert ryanair.pinned and ryanair.origin.startswith("classifier (fallback: LLMError")


def test_one_system_message_for_a_chat_template_that_takes_only_one(server, store):
    # some open models' chat templates (served behind an OpenAI-compatible API) refuse a
    # system message that is not first: memos' sections are system messages of their own
    server.system_first_only = True
    client = make_client(config(server, max_attempts=1))
    separate = Memory("template-separate", store=store, budget=1500)
    separate.add({"role": "system", "content": "You are a travel assistant."})
    separate.add(user("I never fly Ryanair. My booking reference is PNR-55120."))
    with pytest.raises(openai.BadRequestError, match="only as the first message"):
        separate.run_turn(client, "test-model", "Plan day one in Lisbon.")
    separate.close()

    mem = Memory("template-one", store=store, settings=MemosSettings(budget_tokens=1500, system_messages="one"))
    mem.add({"role": "system", "content": "You are a travel assistant."})
    mem.add(user("I never fly Ryanair. My booking reference is PNR-55120."))
    mem.add(assistant("Noted."))
    sent = len(server.requests)
    for day in range(1, 31):
        mem.run_turn(client, "test-model", f"Plan day {day} in Lisbon: the museums, a walk by the river and dinner.")
    result = mem.run_turn(client, "test-model", "Remind me: what was my booking reference?")
    assert result.memory_calls == ["retrieve"] and "PNR-55120" in result.reply
    assert mem.stats().demotions > 0 and all(t <= 1500 for t in result.prompt_tokens)
    requests = server.requests[sent:]
    assert len(requests) == 32 and set(server.statuses[sent:]) <= {200}
    for body in requests:
        first, rest = body["messages"][0], body["messages"][1:]
        assert first["role"] == "system" and first["content"].startswith("You are a travel assistant.\n\n[memory: ")
        assert "I never fly Ryanair." in first["content"] and all(m["role"] != "system" for m in rest)
    # handed back (a LangGraph state, an Agents SDK input), the joined message is memos' own, not logged again
    assert is_section(first) and not is_section({"role": "system", "content": "You are a travel assistant."})
    mem.close()
