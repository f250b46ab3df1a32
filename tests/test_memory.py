"""Memory end to end on real SQLite files: logging, paging, assembly, resume."""

from __future__ import annotations

import json

import pytest

from memos import BudgetExceeded, InvalidNamespace, Memory, MemosSettings, PagingEvent
from memos.core.sections import PINNED_HEADER, SUMMARY_HEADER, find_orphans
from tests.conftest import assistant, tool_chain, user

pytestmark = [pytest.mark.postgres, pytest.mark.chroma_server]  # rerun by .ci/run on a PostgreSQL / Chroma server


def fill(mem: Memory, turns: int, *, result_words: int = 60, start: int = 0) -> None:
    for i in range(start, start + turns):
        mem.add(user(f"Turn {i}: please look up item ITEM-{i:04d} for me."))
        mem.add(tool_chain(f"t{i}", result=json.dumps({"item": f"ITEM-{i:04d}", "notes": "word " * result_words})))
        mem.add(assistant(f"Item ITEM-{i:04d} is available."))


def tokens(mem: Memory, ctx) -> int:
    return mem.counter.count_messages(ctx)


def test_resume_after_100_messages_gives_the_same_context(store):
    mem = Memory("resume", store=store, budget=1024)
    mem.add({"role": "system", "content": "You are terse."})
    mem.add(user("I never want emails before 8am."))
    fill(mem, 24)  # 1 + 1 + 24 * 4 = 98 messages
    mem.add([user("last question"), assistant("last answer")])
    assert len(mem.history()) == 100
    mem.flush()  # every archival vector written, so dense recall sees the same items after reopening
    before, stats = mem.context(), mem.stats()
    assert stats.demotions > 0
    mem.close()
    again = Memory("resume", store=store, budget=1024)
    assert again.context() == before
    assert again.stats() == stats
    again.add(user("one more"))
    assert [m.seq for m in again.history()] == list(range(101))
    again.close()


def test_two_writers_on_one_session_each_see_the_whole_conversation(store):
    # two worker processes serving one chat, each holding its own Memory: each paged its own
    # view, and a tool result logged by one was refused by the other ("answers no pending call")
    a, b = (Memory("shared-chat", user="ana", store=store, budget=1024, tools=[]) for _ in range(2))
    a.add({"role": "system", "content": "You are terse."})
    a.add(user("I never fly Ryanair. My booking reference is PNR-55120."))
    b.add(assistant("Noted."))
    a.add({"role": "assistant", "content": None, "tool_calls": [
        {"id": "w1", "type": "function", "function": {"name": "search_flights", "arguments": "{}"}}]})
    b.add({"role": "tool", "tool_call_id": "w1", "content": "LX-22 at 09:40"})
    for i in range(30):
        writer, other = (a, b) if i % 2 else (b, a)
        writer.add(user(f"Question {i} about the Douro valley, its wine terraces and river boats."))
        other.add(assistant(f"Answer {i}: the terraces were built by hand, the boats carried port."))
        ctx = writer.context(query=f"what about question {i}?")
        assert tokens(writer, ctx) <= 1024 and find_orphans(ctx) == []
        assert ctx[-2]["content"].startswith(f"Answer {i}:") and "I never fly Ryanair." in json.dumps(ctx)
    assert a.stats().demotions > 0
    a.flush()  # every archival vector written: recall finds the same items for each
    assert a.context() == b.context()
    assert a.stats() == b.stats()
    fresh = Memory("shared-chat", user="ana", store=store, budget=1024, tools=[])
    assert fresh.context() == a.context()
    assert [m.seq for m in fresh.history()] == list(range(65))
    for m in (a, b, fresh):
        m.close()


def test_context_never_exceeds_the_budget_and_keeps_chains_whole(make_memory):
    mem = make_memory(budget=800)
    fill(mem, 40)
    ctx = mem.context()
    assert tokens(mem, ctx) <= 800
    assert find_orphans(ctx) == []
    assert mem.stats().demotions > 0 and mem.stats().soft_compactions > 0
    assert len(mem.history()) == 160


def test_summary_enters_as_a_system_message(make_memory):
    mem = make_memory(budget=600)
    fill(mem, 20)
    ctx = mem.context()
    summaries = [m for m in ctx if SUMMARY_HEADER in str(m.get("content"))]
    assert len(summaries) == 1 and summaries[0]["role"] == "system"
    assert not any(SUMMARY_HEADER in str(m.get("content")) for m in ctx if m["role"] != "system")


def test_query_is_appended_but_not_stored(make_memory):
    mem = make_memory(budget=2000)
    mem.add([user("hi"), assistant("hello")])
    ctx = mem.context(query="what did I say?")
    assert ctx[-1] == {"role": "user", "content": "what did I say?"}
    assert [m.text for m in mem.history()] == ["hi", "hello"]
    with pytest.raises(ValueError, match="query must be a string"):
        mem.context(query=5)  # type: ignore[arg-type]
    for empty in ("", "  \n"):  # it appended an empty user message, which the prompt then ended with
        with pytest.raises(ValueError, match="query must hold text"):
            mem.context(query=empty)
    with pytest.raises(ValueError, match="query must be a non-empty string"):
        mem.facts(query=5)  # type: ignore[arg-type]  # AttributeError: 'int' object has no attribute 'lower'


def test_constraints_stay_visible_after_many_demotions(make_memory):
    mem = make_memory(budget=700)
    mem.add(user("I don't eat spicy food."))
    mem.add(user("我不吃辣，所有带辣椒的推荐都不要。"))
    fill(mem, 60)
    ctx = mem.context()
    text = "\n".join(str(m.get("content")) for m in ctx)
    assert mem.stats().demotions >= 20
    assert "I don't eat spicy food." in text
    assert "我不吃辣，所有带辣椒的推荐都不要。" in text
    pinned = [m for m in ctx if PINNED_HEADER in str(m.get("content"))]
    assert len(pinned) == 1 and pinned[0]["role"] == "system"


def test_pin_keeps_a_message_and_unpin_releases_it(make_memory):
    mem = make_memory(budget=700)
    (note,) = mem.add(user("The gate code is 4512."))  # no constraint words: only the pin keeps it
    mem.pin(note.id)
    fill(mem, 30)
    assert "The gate code is 4512." in json.dumps(mem.context(), ensure_ascii=False)
    mem.unpin(note.id)
    assert "(user, #0) The gate code is 4512." not in json.dumps(mem.context(), ensure_ascii=False)
    mem.pin(note.id)  # pinning a demoted message brings it back
    assert "The gate code is 4512." in json.dumps(mem.context(), ensure_ascii=False)
    with pytest.raises(ValueError, match="no message with id 'nope'"):
        mem.pin("nope")


def test_a_tool_result_larger_than_the_budget_is_clipped_not_split(make_memory):
    mem = make_memory(budget=1000)
    mem.add(user("fetch the log"))
    huge = "line of log output with ERR-7781 in it\n" * 2000
    chain = tool_chain("big", result=huge)
    mem.add(chain)
    ctx = mem.context()
    assert tokens(mem, ctx) <= 1000
    assert find_orphans(ctx) == []
    tool_msgs = [m for m in ctx if m["role"] == "tool"]
    assert len(tool_msgs) == 1 and "full text in the memory log as message" in tool_msgs[0]["content"]
    assert mem.history()[-1].text == huge


@pytest.mark.parametrize("answered", [True, False])
def test_tool_calls_with_arguments_larger_than_the_budget_are_clipped_as_json(make_memory, answered):
    # an agent that writes a whole file through a tool call: the guards keep the call and its
    # results together, and context() raised BudgetExceeded (50,000 tokens to keep under 2,048)
    mem = make_memory(budget=2048)
    mem.add(user("Save the report, and mail it to ana@example.org."))
    report = "Revenue for ORD-44120 rose in every region. " * 2000
    calls = [{"id": "w1", "type": "function", "function": {"name": "write_file", "arguments": json.dumps(
                 {"path": "/srv/report.md", "content": report})}},
             {"id": "m1", "type": "function", "function": {"name": "send_mail", "arguments": json.dumps(
                 {"to": "ana@example.org"})}}]
    mem.add({"role": "assistant", "content": "Saving it now.", "tool_calls": calls})
    if answered:
        mem.add([{"role": "tool", "tool_call_id": "w1", "content": "ok"}, {"role": "tool", "tool_call_id": "m1", "content": "sent"}])
    ctx = mem.context()
    assert tokens(mem, ctx) <= 2048
    assert find_orphans(ctx) == []
    sent = next(m for m in ctx if m.get("tool_calls"))
    assert sent["content"] == "Saving it now."
    written, mailed = (json.loads(c["function"]["arguments"]) for c in sent["tool_calls"])
    assert written["path"] == "/srv/report.md" and "full call in the memory log as message" in written["_memos"]
    assert report.startswith(written["content"].rstrip("…").split("…")[0])
    assert mailed == {"to": "ana@example.org"}  # a short call beside it is sent whole
    stored = next(m for m in mem.history() if m.data.get("tool_calls"))
    assert json.loads(stored.data["tool_calls"][0]["function"]["arguments"])["content"] == report


@pytest.mark.parametrize("budget", [768, 1024])
def test_a_long_pasted_message_is_clipped_to_the_room_the_tool_schemas_leave(make_memory, budget):
    # memos' own tool schemas (~570 tokens) are counted: half the budget for the newest
    # message would not fit beside them, so it is clipped to what they leave
    mem = make_memory(budget=budget, tools=None)
    mem.add({"role": "system", "content": "You are helpful."})
    doc = " ".join(f"Paragraph {i}: revenue of {i * 1000} EUR in region R{i}." for i in range(300))
    mem.add(user("Summarise this: " + doc))
    ctx = mem.context()
    schemas = mem.counter.count_tools(mem.tools())
    assert schemas > budget // 2
    assert tokens(mem, ctx) + schemas <= budget
    assert ctx[-1]["role"] == "user" and "full text in the memory log as message" in ctx[-1]["content"]
    assert mem.history()[-1].text == "Summarise this: " + doc


def test_an_in_flight_chain_is_never_evicted(make_memory):
    mem = make_memory(budget=900)
    fill(mem, 10)
    calls = tool_chain("live", n=3, result="x " * 300)
    mem.add(calls[:2])  # one of three results so far
    fill_ctx = mem.context()
    assert any(m.get("tool_calls") and m["tool_calls"][0]["id"] == "live-0" for m in fill_ctx)
    assert tokens(mem, fill_ctx) <= 900
    mem.add(calls[2:])
    assert find_orphans(mem.context()) == []


def test_budget_exceeded_says_how_much_is_needed(make_memory):
    mem = make_memory(budget=100)
    mem.add({"role": "system", "content": "rule " * 200})
    with pytest.raises(BudgetExceeded) as info:
        mem.context()
    assert info.value.needed > 100 and info.value.budget == 100
    assert f"needs at least {info.value.needed} tokens" in str(info.value)
    # the pinned section may hold the line about rules kept as facts, not only pin()'s pins
    assert "pinned section 0" in str(info.value) and "explicit pins" not in str(info.value)


def test_soft_compaction_leaves_a_placeholder_naming_the_log_id(make_memory):
    settings = MemosSettings(budget_tokens=2000, soft_threshold=0.3, hard_threshold=0.95, hot_target=0.9, recall_reserve=0.3)
    mem = make_memory(settings=settings)
    fill(mem, 8, result_words=80)
    ctx = mem.context()
    placeholders = [m for m in ctx if m["role"] == "tool" and m["content"].startswith("[memos: result of lookup compacted")]
    assert placeholders
    logged = {m.id: m for m in mem.history()}
    for p in placeholders:
        mid = p["content"].split("as message ")[1].split("]")[0]
        assert logged[mid].data["tool_call_id"] == p["tool_call_id"]
        assert len(logged[mid].text) > len(p["content"]) - 200


def test_paging_events_are_reported_and_logged(make_memory):
    seen: list[PagingEvent] = []
    mem = make_memory(budget=700, on_event=seen.append)
    # whether a given turn compacts softly or demotes depends on a few tokens (placeholders
    # name random log ids), so the session runs until both kinds have happened
    for start in range(0, 60, 10):
        fill(mem, 10, start=start)
        if {e.kind for e in seen} == {"soft", "hard"}:
            break
    kinds = {e.kind for e in seen}
    assert kinds == {"soft", "hard"}
    hard = [e for e in seen if e.kind == "hard"]
    assert all(e.tokens_after < e.tokens_before for e in hard)
    assert len(mem.store.compactions(mem.namespace)) == len(seen)


def test_sessions_and_users_do_not_see_each_other(store):
    a = Memory("s", user="ana", store=store, budget=2000)
    b = Memory("s", user="bob", store=store, budget=2000)
    a.add(user("ana's secret is 1234"))
    b.add(user("bob's note"))
    assert "1234" not in json.dumps(b.context())
    assert [m.text for m in b.history()] == ["bob's note"]
    a.close()
    b.close()
    with pytest.raises(InvalidNamespace):
        Memory("s", user="a/b", store=store)
    with pytest.raises(InvalidNamespace):
        Memory("", store=store)


@pytest.mark.slow
def test_logged_rows_are_looked_up_by_id_not_by_reading_the_session(tmp_path):
    from sqlalchemy import event

    mem = Memory("s", store=tmp_path / "m.db", budget=900, settings=MemosSettings(budget_tokens=900, background_indexing=False))
    for i in range(300):  # a session long enough that reading it whole would show
        mem.add(user(f"Message {i}: the parcel PKG-{i:04d} is at locker {i}. " + "More detail. " * 5))
    seen: list[tuple[str, tuple]] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        if "FROM memos_message" in statement and "memos_message.id IN" in statement:
            seen.append((statement, tuple(parameters)))

    event.listen(mem.store.engine, "before_cursor_execute", record)
    before = mem.stats().demotions
    for i in range(30):
        mem.add(user(f"Later message {i} about order ORD-{i:05d}. " + "Even more detail here. " * 6))
    event.remove(mem.store.engine, "before_cursor_execute", record)
    assert mem.stats().demotions > before and seen
    with mem.store.engine.connect() as conn:
        for statement, params in seen:
            plan = " | ".join(str(r[3]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, params).all())
            assert "ix_memos_message_namespace" not in plan and "SCAN memos_message" not in plan, plan
    mem.close()


def test_later_system_messages_are_events_that_age_and_the_system_prompt_stays(make_memory):
    mem = make_memory(budget=1024)
    mem.add({"role": "system", "content": "You are a travel assistant."})
    for n in range(1, 31):
        mem.add({"role": "system", "content": f"[session {n}: {n} May 2023]"})
        mem.add(user(f"Session {n}: we talked about the trip to town number {n} and the hotel there, at length."))
        mem.add(assistant(f"Noted for session {n}: the hotel in town {n} is booked for two nights."))
        ctx = mem.context()
        assert mem.counter.count_messages(ctx) <= 1024
        assert ctx[0] == {"role": "system", "content": "You are a travel assistant."}
    notes = [m for m in mem.context() if str(m.get("content", "")).startswith("[session ")]
    assert notes and len(notes) < 5  # the latest notes, not thirty of them for ever
    assert "[session 30: 30 May 2023]" in json.dumps(mem.context())
    assert any("[session 3: 3 May 2023]" in h.text for h in mem.retrieve("session 3 May 2023", 5))
    reopened = make_memory(budget=1024)
    assert reopened.context()[0]["content"] == "You are a travel assistant."
    assert len([m for m in reopened.context() if str(m.get("content", "")).startswith("[session ")]) == len(notes)


def _focus_session(make_memory, **settings):
    earlier = make_memory(session="s0", budget=4096)
    earlier.add([user("We talked about the weather in Porto last week."), assistant("Yes, it rained.")])
    # the newest units up to half the hot target (here 410 tokens) always stay; the older compete
    mem = make_memory(session="s1", settings=MemosSettings(budget_tokens=4096, hot_target=0.2, **settings))
    for i in range(8):
        if i == 4:
            mem.add([user("The code of my gym locker is LCK-55821."), assistant("Noted: locker LCK-55821.")])
        mem.add(user(f"Give me a pasta recipe number {i} with tomatoes and basil."))
        mem.add(tool_chain(f"r{i}", result=json.dumps({"recipe": i, "steps": "boil, stir, serve " * 8})))
        mem.add(assistant(f"Recipe {i}: spaghetti with tomato sauce and fresh basil."))
    mem.add([user("Thanks, that is enough recipes."), assistant("Enjoy your meal!")])
    mem.flush()  # every vector written, as soon after add() (what dense search sees is then fixed)
    return mem


def _shown(ctx, texts):
    contents = [m.get("content") for m in ctx]
    return [t for t in texts if t in contents]


def test_a_question_gives_the_room_of_unrelated_hot_turns_to_what_answers_it(make_memory):
    mem = _focus_session(make_memory)
    hot = [m.text for m in mem.hot() if m.text]
    assert "The code of my gym locker is LCK-55821." in hot and len(hot) > 12
    asked = mem.context(query="What is the code of my gym locker?")
    shown = _shown(asked, hot)
    assert "The code of my gym locker is LCK-55821." in shown  # the turn that answers stays
    newest = hot[-8:]  # the last two recipes and the closing exchange
    assert shown[-len(newest):] == newest  # so does the conversation just before the question
    # older unrelated turns gave way, among them the recipe results that dense search rates
    # barely above recall_min_similarity (0.20 against the locker turn's 0.85)
    assert len(shown) < len(hot) - 4
    assert find_orphans(asked) == [] and tokens(mem, asked) <= 4096
    assert [m.text for m in mem.hot() if m.text] == hot  # left out of this prompt only
    assert _shown(mem.context(), hot) == hot  # without a question, the hot tier is all there


def test_query_focus_off_keeps_every_hot_turn(make_memory):
    mem = _focus_session(make_memory, query_focus=False)
    hot = [m.text for m in mem.hot() if m.text]
    assert _shown(mem.context(query="What is the code of my gym locker?"), hot) == hot


@pytest.mark.parametrize("store, match", [(5, "must be a SQLite file path or a database URL"), ("  ", "must be a SQLite"),
                                          ("postgress://db/memos", "cannot be opened")])
def test_a_store_that_is_neither_a_path_nor_a_url_is_a_clear_error(store, match, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=match):
        Memory("s", store=store)
    assert list(tmp_path.iterdir()) == []  # no file named after it


def test_a_store_that_is_a_folder_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="is a folder; give a SQLite file path"):
        Memory("s", store=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_an_in_memory_store_is_one_database_whatever_the_thread(caplog):
    import logging
    import threading

    from tests.conftest import HAVE_MODEL

    mem = Memory("s", user="ana", store=":memory:", tools=[])
    mem.archive("The spare key is under the blue flowerpot.")
    mem.add([user("I moved to Porto last spring."), assistant("Nice city!")])
    seen: list[object] = []

    def other_thread() -> None:  # e.g. a web server's worker
        try:
            seen.append(len(mem.history()))
        except Exception as exc:  # noqa: BLE001
            seen.append(exc)

    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    assert seen == [2]
    if HAVE_MODEL:  # written at once: memos' own threads do not use an in-memory database
        assert mem._archival.pending() == 0
        (hit,) = mem.retrieve("where did I hide the extra house key?", 1)
        assert "dense" in hit.found_by
    with caplog.at_level(logging.ERROR):
        mem.close()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.records


def test_a_query_while_tool_calls_await_results_is_refused_clearly(make_memory):
    # the prompt would end with a user message after unanswered calls, which the API refuses
    mem = make_memory()
    mem.add([user("Find flights to Lisbon."), tool_chain("f", 2)[0]])
    with pytest.raises(ValueError, match=r"unanswered tool calls \['f-0', 'f-1'\].*add their tool results first"):
        mem.context(query="And hotels?")
    ctx = mem.context()  # without a query the prompt ends with the calls, for their results to follow
    assert ctx[-1]["tool_calls"] and len(mem.history()) == 2
    mem.add(tool_chain("f", 2)[1:])
    assert mem.context(query="And hotels?")[-1] == {"role": "user", "content": "And hotels?"}
