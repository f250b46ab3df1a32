"""The cold tier on real SQLite files: supersession, NOOP, invalidation, forget, isolation, search."""

from __future__ import annotations

import json

import pytest

from memos import Memory
from memos.storage.log import Store
from memos.tiers.cold import ColdTier, Fact, FactCandidate, FactOp, decide
from tests.conftest import assistant, tool_chain, user

pytestmark = pytest.mark.postgres  # rerun by .ci/run on a PostgreSQL server

ADDRESSES = ["12 Baker Street, London NW1 6XE", "14 Rua Augusta, 1100-053 Lisbon", "42 Rua do Ouro, 1100-060 Lisbon"]


def cand(value: str, seq: int, **kw) -> FactCandidate:
    return FactCandidate(kw.pop("kind", "identifier"), kw.pop("key", "address"), value, (f"m{seq}",), seq,
                         single=kw.pop("single", True), **kw)


def test_three_successive_addresses_leave_one_current_and_two_historical(store):
    mem = Memory("s", store=store, budget=4000)
    mem.add(user(f"Please ship my order to {ADDRESSES[0]}."))
    mem.add(user(f"Change of plan, ship it to {ADDRESSES[1]} instead."))
    mem.add(user(f"Sorry, the address was wrong. Use {ADDRESSES[2]}."))
    current = [f for f in mem.facts("identifier") if f.key == "address"]
    assert [f.value for f in current] == [ADDRESSES[2]]
    chain = mem._cold.history(current[0].id)
    assert [f.value for f in chain] == ADDRESSES
    assert [f.status for f in chain] == ["superseded", "superseded", "current"]
    assert chain[0].superseded_by == chain[1].id and chain[1].superseded_by == chain[2].id
    assert chain[0].valid_to is not None and chain[1].valid_to is not None and chain[2].valid_to is None
    # the context presents only the current address
    text = json.dumps(mem.context(), ensure_ascii=False)
    assert ADDRESSES[2] in text and f"address: {ADDRESSES[0]}" not in text and f"address: {ADDRESSES[1]}" not in text
    mem.close()
    reopened = Memory("s", store=store, budget=4000)
    assert [f.value for f in reopened.facts("identifier") if f.key == "address"] == [ADDRESSES[2]]
    reopened.close()


def test_an_older_value_arriving_late_is_stored_as_history_not_as_current(engine):
    cold = ColdTier(engine, "u/a/s")
    cold.apply([cand(ADDRESSES[2], seq=30)])
    (late,) = cold.apply([cand(ADDRESSES[1], seq=10)])
    assert late.op is FactOp.ADD and late.fact.status == "superseded"
    assert [f.value for f in cold.facts()] == [ADDRESSES[2]]
    assert len(cold.facts(include_history=True)) == 2


def test_noop_for_a_known_value_adds_no_row(engine):
    cold = ColdTier(engine, "u/a/s")
    first = cold.apply([FactCandidate("preference", "tea", "I prefer green tea.", ("m1",), 1)])
    again = cold.apply([FactCandidate("preference", "tea", "i prefer green tea", ("m9",), 9)])
    assert first[0].op is FactOp.ADD and again[0].op is FactOp.NOOP
    assert again[0].fact.id == first[0].fact.id
    assert len(cold.facts(include_history=True)) == 1
    once = cold.apply([FactCandidate("identifier", "ORD-1", "ORD-1 first mention", once=True),
                       FactCandidate("identifier", "ORD-1", "ORD-1 mentioned again", once=True)])
    assert [c.op for c in once] == [FactOp.ADD, FactOp.NOOP]


def test_decide_is_a_pure_rule():
    row = Fact.model_validate({"namespace": "n", "kind": "identifier", "key": "address", "value": "A", "source_seq": 5, "id": 1})
    assert decide(cand("a.", 6), [row])[0] is FactOp.NOOP
    assert decide(cand("B", 6), [row]) == (FactOp.UPDATE, row)
    assert decide(cand("B", 4), [row]) == (FactOp.ADD, row)
    assert decide(cand("B", 6, single=False), [row]) == (FactOp.ADD, None)
    assert decide(cand("B", 6), []) == (FactOp.ADD, None)
    with pytest.raises(ValueError, match="unknown fact kind"):
        FactCandidate("opinion", "k", "v")


def test_user_revocation_invalidates_the_matching_preference(make_memory):
    mem = make_memory(budget=4000)
    mem.add(user("I don't eat spicy food."))
    mem.add(user("I prefer window seats on flights."))
    assert len(mem.facts("preference")) == 2
    mem.add(user("Good news: spicy food is fine for me now, the no spicy food rule no longer applies."))
    prefs = mem.facts("preference")
    assert [f.value for f in prefs] == ["I prefer window seats on flights."]
    revoked = [f for f in mem.facts(include_history=True) if f.status == "invalidated"]
    assert [f.value for f in revoked] == ["I don't eat spicy food."]
    pinned = [m for m in mem.context() if "[memory: pinned]" in str(m.get("content"))][0]["content"]
    # the revocation itself may stay pinned: it says what holds now ("spicy food is fine for me now")
    assert "I don't eat spicy food." not in pinned and "window seats" in pinned


def test_a_revocation_lifts_the_rule_it_names_and_no_other(make_memory):
    mem = make_memory(budget=4000)
    for rule in ("我不吃辣。", "机票一律订经济舱。", "Always get me a window seat.", "Never book me on red-eye flights."):
        mem.add(user(rule))
    assert len([f for f in mem.facts() if f.pinned]) == 4
    mem.add(user("我现在可以吃辣了。"))  # one character pair of "我不吃辣" is shared, none of the other rules'
    mem.add(user("Forget my window-seat rule."))  # "window" and "seat", as parts of the hyphenated word
    pinned = {f.value for f in mem.facts() if f.pinned}
    assert pinned == {"机票一律订经济舱。", "Never book me on red-eye flights."}
    closed = {f.value for f in mem.facts(include_history=True) if f.status == "invalidated"}
    assert closed == {"我不吃辣。", "Always get me a window seat."}


def test_a_rule_worded_like_a_revocation_is_kept_when_it_names_no_rule(make_memory, store):
    # "取消" (cancel) and "no longer" read as revocations; with no rule of theirs to lift,
    # the sentences set rules, and the next session knows them
    mem = make_memory(budget=4000)
    mem.add(user("Prefer aisle seats."))
    mem.add(user("酒店一律要能免费取消的。"))
    mem.add(user("I no longer take flights before 9 am, book later ones."))
    rules = {f.value for f in mem.facts() if f.kind in ("constraint", "preference") and f.pinned}
    assert {"酒店一律要能免费取消的。", "I no longer take flights before 9 am, book later ones."} <= rules
    mem.add(user("酒店一律要能免费取消的。"))  # said again, it does not lift itself
    assert "酒店一律要能免费取消的。" in {f.value for f in mem.facts() if f.pinned}
    # one that names a rule lifts it; saying what holds instead, it is kept in the rule's place
    mem.add(user("The aisle seat preference no longer applies, any seat is fine."))
    values = {f.value for f in mem.facts()}
    assert "Prefer aisle seats." not in values
    assert "The aisle seat preference no longer applies, any seat is fine." in values
    assert "Prefer aisle seats." in {f.value for f in mem.facts(include_history=True) if f.status == "invalidated"}
    mem.close()
    nxt = make_memory(budget=4000, session="next")
    pinned = next(m["content"] for m in nxt.context() if "[memory: pinned]" in str(m.get("content")))
    assert "免费取消" in pinned and "before 9 am" in pinned and "Prefer aisle seats." not in pinned


def test_a_rule_taken_for_a_revocation_is_kept_when_it_reads_more_surely_as_a_rule(make_memory):
    mem = make_memory(budget=4000)
    mem.add(user("No pets in the rental."))
    # PrefEval's wording: 0.69 as a revocation, 0.90 as a rule; it names "No pets in the rental."
    mem.add(user("I'm not comfortable with pets that can jump on furniture."))
    assert "I'm not comfortable with pets that can jump on furniture." in {f.value for f in mem.facts() if f.pinned}


def test_invalidate_and_forget_by_id(make_memory):
    mem = make_memory(budget=4000)
    mem.add(user("My hotel is Chiado Suites."))
    mem.add(user("My passport number is P-99887766."))
    found = mem.facts(query="P-99887766")
    assert {f.key for f in found} == {"P-99887766", "passport number"}
    records = [mem.forget(f.id, reason="GDPR request") for f in found]  # the second went with the first
    assert {(r.kind, r.reason) for r in records} == {("identifier", "GDPR request"), ("fact", "GDPR request")}
    assert not any("P-99887766" in r.key for r in mem._cold.forgotten())  # an identifier's key is the identifier
    assert "P-99887766" not in json.dumps([f.model_dump() for f in mem.facts(include_history=True)])
    assert {r.fact_id for r in mem._cold.forgotten()} == {f.id for f in found}
    # the forgotten fact does not come back when its message is read again at demotion
    mem._cold.apply(mem.extractor.extract(mem.history()).candidates)
    assert not [f for f in mem.facts(include_history=True) if f.key == "P-99887766"]
    hotel = mem.facts("fact")[0]
    assert mem.invalidate(hotel.id).status == "invalidated"
    assert hotel.id not in [f.id for f in mem.facts()]
    with pytest.raises(ValueError, match="no fact with id"):
        mem.forget(10_000)


def test_facts_are_isolated_by_namespace(store):
    ana = Memory("trip", user="ana", store=store, budget=4000)
    bob = Memory("trip", user="bob", store=store, budget=4000)
    ana.add(user("My booking reference is BK-1111. I never fly at night."))
    bob.add(user("My booking reference is BK-2222."))
    assert {f.key for f in bob.facts()} >= {"BK-2222"}
    assert "BK-1111" not in json.dumps([f.model_dump() for f in bob.facts(include_history=True)])
    assert bob.facts(query="BK-1111") == []
    assert [f.key for f in ana.facts(query="booking BK-1111")][:1] in (["BK-1111"], ["booking reference"])
    with pytest.raises(ValueError):
        bob.forget(ana.facts()[0].id)
    ana.close()
    bob.close()


def test_search_finds_identifiers_and_chinese_text(engine):
    cold = ColdTier(engine, "u/a/s")
    cold.apply([
        FactCandidate("identifier", "ORD-12345", "order ORD-12345 ships to Lisbon", once=True),
        FactCandidate("preference", "辣", "我不吃辣，所有带辣椒的推荐都不要。", pinned=True),
        FactCandidate("fact", "seat", "window seat"),
    ])
    assert cold.search("where is ORD-12345 now")[0].key == "ORD-12345"
    assert cold.search("推荐辣椒的菜")[0].key == "辣"
    assert cold.search("the") == []


def test_pin_and_unpin_facts_and_text(make_memory):
    mem = make_memory(budget=4000)
    fact = mem.pin(text="Reply in British English.")
    assert fact is not None and fact.pinned and fact.kind == "constraint"
    pinned = lambda: [m for m in mem.context() if "[memory: pinned]" in str(m.get("content"))]  # noqa: E731
    assert "Reply in British English." in pinned()[0]["content"]
    mem.unpin(fact_id=fact.id)
    assert not pinned()
    mem.pin(fact_id=fact.id)
    assert pinned()
    with pytest.raises(ValueError, match="exactly one of"):
        mem.pin()
    with pytest.raises(ValueError, match="exactly one of"):
        mem.pin("abc", fact_id=1)


@pytest.mark.parametrize(
    "constraint", ["我不吃辣，所有带辣椒的推荐都不要。", "Never schedule meetings on Fridays."]
)
def test_constraints_are_pinned_facts_present_after_20_forced_demotions(make_memory, constraint):
    mem = make_memory(budget=600)
    mem.add(user(constraint))
    turn = 0
    while mem.stats().demotions < 20:
        mem.add(user(f"Look up record REC-{turn:04d} please, with all the details you have."))
        mem.add(tool_chain(f"t{turn}", result=json.dumps({"record": f"REC-{turn:04d}", "text": "details " * 40})))
        mem.add(assistant(f"Record REC-{turn:04d} is ready."))
        turn += 1
    fact = next(f for f in mem.facts() if f.value == constraint)
    assert fact.pinned and fact.kind in ("constraint", "preference")
    ctx = mem.context()
    assert mem.counter.count_messages(ctx) <= 600
    pinned = [m for m in ctx if "[memory: pinned]" in str(m.get("content"))]
    assert len(pinned) == 1 and constraint in pinned[0]["content"]
    assert not any(m.get("content") == constraint for m in ctx if m["role"] == "user")  # demoted, held by the fact


def _fact_selects(engine, run) -> list[tuple[str, object]]:
    """The SELECTs on memos_fact that ``run()`` sends, with their parameters."""
    from sqlalchemy import event

    seen: list[tuple[str, object]] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("SELECT") and "FROM memos_fact " in statement + " ":
            seen.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", record)
    try:
        run()
    finally:
        event.remove(engine, "before_cursor_execute", record)
    return seen


def test_fact_lookups_run_on_an_index_of_their_own_at_thousands_of_facts(tmp_path):
    from sqlalchemy import text

    store = Store(tmp_path / "many.db")
    cold = ColdTier(store.engine, "u/a/s")
    cold.apply([FactCandidate("identifier", f"REF-{i:05d}", f"reference REF-{i:05d}", (f"m{i}",), i) for i in range(3000)])
    cold.apply([cand(ADDRESSES[0], 3001), FactCandidate("constraint", "c1", "never call after 9pm", ("m3002",), 3002,
                                                        pinned=True)])
    slots = _fact_selects(store.engine, cold.slots)
    pinned = _fact_selects(store.engine, lambda: cold.facts(pinned=True))
    known = _fact_selects(store.engine, lambda: cold.apply([FactCandidate("identifier", "REF-00042", "reference REF-00042",
                                                                          ("m9",), 9)]))
    assert (len(slots), len(pinned)) == (2, 1) and known, (slots, pinned, known)
    queries = slots + pinned + known
    with store.engine.connect() as conn:
        for statement, params in queries:
            plan = " | ".join(str(r[3]) for r in conn.execute(text("EXPLAIN QUERY PLAN " + statement), params or {}).all()
                              ) if isinstance(params, dict) else " | ".join(
                str(r[3]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, tuple(params)).all())
            assert "SCAN memos_fact" not in plan and "ix_memos_fact_status" not in plan and "ix_memos_fact_kind" not in plan, (
                statement, plan)
    assert [f.key for f in cold.slots()] == ["address"]  # of 3,000 identifiers, only the address is a slot
    store.close()


def test_an_older_store_gets_the_new_indexes_when_opened(tmp_path):
    from sqlalchemy import inspect, text

    store = Store(tmp_path / "old.db")
    with store.engine.begin() as conn:
        for name in ("ix_memos_fact_lookup", "ix_memos_fact_slot", "ix_memos_fact_pinned"):
            conn.execute(text(f"DROP INDEX {name}"))
    store.close()
    reopened = Store(tmp_path / "old.db")
    names = {i["name"] for i in inspect(reopened.engine).get_indexes("memos_fact")}
    assert {"ix_memos_fact_lookup", "ix_memos_fact_slot", "ix_memos_fact_pinned"} <= names
    reopened.close()
