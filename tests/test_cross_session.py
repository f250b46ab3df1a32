"""Long-term memory: what a user set and told in one session is known in the next, never by
another user; a corrected value supersedes the old one everywhere; forgetting erases."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from pathlib import Path

import pytest
from sqlalchemy import inspect
from sqlmodel import Field, Session, SQLModel, create_engine, select

from memos import Memory, MemoryStore, MemosSettings
from memos.session.transfer import export_messages

from .conftest import POSTGRES, assistant, needs_model, user

pytestmark = [pytest.mark.postgres, pytest.mark.chroma_server]  # rerun by .ci/run on a PostgreSQL / Chroma server

PASSPORT = "X4471-2290"


def _first_session(mem: Memory) -> None:
    mem.add(user("Never book anything with Ryanair."))
    mem.add(assistant("Understood, no Ryanair."))
    mem.add(user("我不吃辣，请记住。"))
    mem.add(assistant("好的，记住了。"))
    mem.add(user(f"My passport number is {PASSPORT}, it expires in 2031."))
    mem.add(assistant("Saved your passport details."))
    mem.add(user("The dog sitter is called Marguerite and she charges 40 euros a day."))
    mem.add(assistant("Noted."))


def _text(prompt: list[dict]) -> str:
    return "\n".join(str(m.get("content") or "") for m in prompt)


def test_a_new_session_starts_knowing_the_users_rules_facts_and_ids(store):
    first = Memory("chat-1", user="ana", store=store, budget=2048, tools=[])
    _first_session(first)
    first.close()

    second = Memory("chat-2", user="ana", store=store, budget=2048, tools=[])
    opening = _text(second.context())
    assert "Ryanair" in opening and "不吃辣" in opening  # the rules, in the very first prompt
    assert "this conversation" not in opening and "earlier in the conversation" not in opening  # set in another chat
    assert PASSPORT in _text(second.context("what is my passport number?"))
    assert "Marguerite" in _text(second.context("who looks after the dog, and what does she charge?"))
    hits = second.retrieve("passport number", 5)
    assert any(PASSPORT in h.text for h in hits)
    assert any(h.session.endswith("/chat-1") for h in hits if h.source == "archive")

    other = Memory("chat-1", user="bob", store=store, budget=2048, tools=[])  # same store, another user
    seen = _text(other.context("what is my passport number? who is the dog sitter? any airline rules?"))
    assert PASSPORT not in seen and "Ryanair" not in seen and "Marguerite" not in seen and "不吃辣" not in seen
    assert not other.retrieve("passport Ryanair Marguerite", 10) and not other.facts()
    for m in (second, other):
        m.close()


def test_share_session_keeps_each_session_to_itself(store):
    settings = MemosSettings(share="session", budget_tokens=2048)
    first = Memory("chat-1", user="ana", store=store, settings=settings, tools=[])
    _first_session(first)
    second = Memory("chat-2", user="ana", store=store, settings=settings, tools=[])
    assert "Ryanair" not in _text(second.context()) and not second.facts()
    assert PASSPORT not in _text(second.context("what is my passport number?"))
    shared = Memory("chat-3", user="ana", store=store, budget=2048, tools=[])  # the default: the user's
    assert "Ryanair" not in _text(shared.context())  # what was kept per session stays there
    for m in (first, second, shared):
        m.close()
    with pytest.raises(ValueError, match="share"):
        MemosSettings(share="everyone")


def test_recalled_items_name_the_session_they_came_from(store):
    first = Memory("trip-planning", user="ana", store=store, budget=2048, tools=[])
    first.add(user("The hotel in Porto is Casa do Rio, booking reference HTL-5521."))
    first.add(assistant("Got it."))
    first.close()
    second = Memory("follow-up", user="ana", store=store, budget=2048, tools=[])
    prompt = _text(second.context("which hotel did we pick in Porto?"))
    assert "HTL-5521" in prompt and "session trip-planning" in prompt
    second.close()


def test_a_recalled_message_brings_the_one_before_it(store):
    # "it" in the message found is named by the message before it, which shares no word with the query
    first = Memory("phones", user="li", store=store, budget=2048, tools=[])
    for text in ["周末去爬了香山，人特别多。", "我换了新手机，是华为Mate60。", "它夜景拍得特别清楚。", "晚饭吃的是饺子。",
                 "下周要交季度报告。"]:
        first.add(user(text))
    first.close()
    second = Memory("later", user="li", store=store, budget=2048, tools=[])
    prompt = _text(second.context("哪个东西夜景拍得清楚？"))
    assert "它夜景拍得特别清楚" in prompt and "华为Mate60" in prompt
    second.close()


def test_a_correction_in_a_later_session_supersedes_the_old_value(store):
    first = Memory("s1", user="ana", store=store, budget=2048, tools=[])
    first.add(user("My address is 12 Rua Augusta, Lisbon."))
    first.close()
    second = Memory("s2", user="ana", store=store, budget=2048, tools=[])
    second.add(user("The address was wrong, my address is 42 Rua do Ouro, Lisbon."))
    second.close()
    third = Memory("s3", user="ana", store=store, budget=2048, tools=[])
    current = [f.value for f in third.facts() if "Rua" in f.value]
    assert any("42 Rua do Ouro" in v for v in current) and not any("12 Rua Augusta" in v for v in current)
    assert any("12 Rua Augusta" in f.value and f.status == "superseded" for f in third.facts(include_history=True))
    prompt = _text(third.context("where do I live? what was my address?"))
    assert "42 Rua do Ouro" in prompt
    # the old value may be quoted as history, never as current
    old_lines = [ln for ln in prompt.splitlines() if "12 Rua Augusta" in ln]
    assert all("outdated" in ln for ln in old_lines), old_lines
    third.close()


def test_a_recalled_rule_the_user_lifted_later_says_so(store):
    rule = "Put the numbers in every report into tables."
    first = Memory("s1", user="ana", store=store, budget=2048, tools=[])
    first.add([user(rule), assistant("Will do.")])
    first.add([user("Tables in reports aren't needed anymore, plain paragraphs are fine."), assistant("Okay.")])
    assert rule not in [f.value for f in first.facts() if f.pinned]
    first.close()
    second = Memory("s2", user="ana", store=store, budget=2048, tools=[])
    prompt = _text(second.context("How should the numbers in my report look? Tables?"))
    quoting = [ln for ln in prompt.splitlines() if "Put the numbers in every report into tables" in ln]
    assert quoting and all("no longer in force" in ln for ln in quoting), prompt
    second.add([user(rule), assistant("Back to tables, then.")])  # set again: in force, not marked
    prompt = _text(second.context("How should the numbers in my report look? Tables?"))
    assert rule in [f.value for f in second.facts() if f.pinned]
    assert "no longer in force" not in prompt, prompt
    second.close()


def test_a_later_session_corrects_and_lifts_what_a_longer_earlier_one_set(store):
    # seq numbers start over in each session: the second session's messages have lower ones
    # than the first's, and its correction and its lifted rule must still be the newer
    first = Memory("s1", user="ana", store=store, budget=2048, tools=[])
    for i in range(20):
        first.add([user(f"Small talk number {i}."), assistant("Nice.")])
    first.add([user("My address is 12 Rua Augusta, Lisbon."), assistant("Saved.")])
    first.add([user("I avoid spicy food."), assistant("Noted.")])
    first.close()
    second = Memory("s2", user="ana", store=store, budget=2048, tools=[])
    second.add(user("My address is 42 Rua do Ouro, Lisbon."))
    second.add(user("Spicy food is fine for me now."))
    second.close()
    third = Memory("s3", user="ana", store=store, budget=2048, tools=[])
    current = {f.value for f in third.facts()}
    assert any("42 Rua do Ouro" in v for v in current) and "12 Rua Augusta, Lisbon" not in current
    assert "I avoid spicy food." not in current
    assert "I avoid spicy food." not in _text(third.context())
    third.close()


def test_a_keyless_correction_looks_back_in_its_own_session_only(store):
    # "Sorry, wrong number, it's …" replaces a number given shortly before it in the same chat.
    # Another session's messages are numbered from 0 too; a number from the start of the
    # last chat must not count as said just now.
    first = Memory("s1", user="ana", store=store, budget=2048, tools=[])
    first.add([user("My phone number is +351 912 345 678."), assistant("Saved.")])
    first.close()
    second = Memory("s2", user="ana", store=store, budget=2048, tools=[])
    second.add([user("Hi again, a quick one today."), assistant("Hello! What do you need?")])
    second.add(user("Sorry, wrong number, it's +351 913 000 111."))
    assert {f.key: f.value for f in second.facts()}["phone number"] == "+351 912 345 678"
    second.add([assistant("Which number should I use?"), user("My work phone number is +351 966 000 222."),
                assistant("Noted."), user("Sorry, wrong number, it's +351 966 000 333.")])
    facts = {f.key: f.value for f in second.facts()}
    assert facts["work phone number"] == "+351 966 000 333" and facts["phone number"] == "+351 912 345 678"
    second.close()


def test_one_store_object_per_url_and_one_indexing_thread(store):
    before = threading.active_count()
    sessions = [Memory(f"s{i}", user=f"u{i % 7}", store=store, budget=1024, tools=[]) for i in range(60)]
    for i, mem in enumerate(sessions):
        mem.add(user(f"Note {i}: the locker code is {1000 + i}."))
    assert len({id(m.store) for m in sessions}) == 1
    assert threading.active_count() - before <= 3  # the indexer and at most two demotion workers
    for mem in sessions:
        mem.close()
    assert sessions[0].store.closed  # the last session closed the store it opened


def test_a_memory_store_serves_sessions_and_stays_open(tmp_path):
    ms = MemoryStore(tmp_path / "m.db")
    a = ms.session("one", user="ana", budget=2048, tools=[])
    a.add(user("Always answer in British English."))
    a.close()
    assert not ms.closed
    b = ms.session("two", user="ana", budget=2048, tools=[])
    assert "British English" in _text(b.context())
    b.close()
    ms.close()


class AppNote(SQLModel, table=True):
    """An application's own table, declared on SQLModel's global metadata."""

    __tablename__ = "app_note"
    id: int | None = Field(default=None, primary_key=True)
    body: str


@pytest.mark.skipif(bool(POSTGRES), reason="compares two SQLite files")
def test_app_tables_and_memos_tables_never_cross_databases(tmp_path):
    mem = Memory("s", store=str(tmp_path / "memos.db"), tools=[])
    mem.add(user("hello"))
    mem.close()
    app = create_engine(f"sqlite:///{tmp_path / 'app.db'}")
    SQLModel.metadata.create_all(app)
    with Session(app) as s:
        s.add(AppNote(body="mine"))
        s.commit()
        assert s.exec(select(AppNote)).one().body == "mine"
    app_tables = set(inspect(app).get_table_names())
    memos_tables = set(inspect(create_engine(f"sqlite:///{tmp_path / 'memos.db'}")).get_table_names())
    assert "app_note" in app_tables and not any(t.startswith("memos_") for t in app_tables)
    assert "app_note" not in memos_tables and "memos_message" in memos_tables


def _store_files(store: str) -> list[Path]:
    """The store's files whose bytes memos answers for. The index files of Chroma
    collections still in use are left out: hnswlib writes its buffers at full capacity
    without zeroing them, so unused slots hold whatever the process's heap held before
    (chroma-core/chroma#7688), whichever user it belonged to."""
    base = Path(store)
    files = [p for p in base.parent.glob(base.name + "*") if p.is_file()]
    chroma = Path(store + ".chroma")
    if chroma.is_dir():
        files += [p for p in chroma.rglob("*") if p.is_file() and p.suffix != ".bin"]
    return files


def _segment_folders(store: str) -> tuple[set[str], set[str]]:
    """Chroma's segment folders on disk, and the segments its catalogue still knows."""
    chroma = Path(store + ".chroma")
    with contextlib.closing(sqlite3.connect(chroma / "chroma.sqlite3")) as db:
        known = {r[0] for r in db.execute("SELECT id FROM segments")}
    return {p.name for p in chroma.iterdir() if p.is_dir()}, known


def test_erasing_one_value_given_as_a_string_redacts_it(store):
    mem = Memory("s1", user="ana", store=store, budget=1024, tools=[])
    mem.add(user("My passport number is P-4471902."))
    changed = mem.store.erase(mem.scope, "P-4471902")  # not its letters, each too short to erase
    assert changed["messages"] == 1
    assert "P-4471902" not in mem.history()[0].text and "[forgotten]" in mem.history()[0].text
    mem.close()


@needs_model
@pytest.mark.skipif(bool(POSTGRES), reason="reads the bytes of the SQLite and Chroma files")
def test_forget_erases_the_value_from_prompts_search_export_and_every_byte(store):
    number = "HIC-88410-2207"
    mem = Memory("s1", user="ana", store=store, budget=1024, tools=[])
    mem.add(user(f"My health insurance number is {number}."))
    mem.add(assistant(f"Saved: health insurance {number}."))
    for i in range(40):  # enough to demote it: it is in the summary, the archive and the facts
        mem.add(user(f"Tell me about museum number {i} in Lisbon, its opening hours and the nearest metro."))
        mem.add(assistant(f"Museum {i} opens at 10:00; the nearest metro is station {i}. Tickets cost {i + 5} euros."))
    mem.flush()
    later = Memory("s2", user="ana", store=store, budget=1024, tools=[])
    assert number in _text(later.context("what is my health insurance number?"))
    facts = [f for f in mem.facts() if number in f.value]
    assert facts
    record = mem.forget(int(facts[0].id))  # type: ignore[arg-type]
    assert json.loads(record.erased)["messages"] >= 2
    mem.flush()
    for m in (mem, later):
        assert number not in _text(m.context("what is my health insurance number?"))
        assert not any(number in h.text for h in m.retrieve(f"health insurance number {number}", 20))
        assert not any(number in json.dumps(d) for d in export_messages(m))
        assert not any(number in f.value for f in m.facts(include_history=True))
    mem.close()
    later.close()
    needle = number.encode()
    leaks = [p.name for p in _store_files(store) if needle in p.read_bytes()]
    assert not leaks, f"{number} still on disk in {leaks}"


def test_forget_drops_a_demotion_planned_before_it(store):
    """A demotion another session prepares in the background, from the summary that held the
    value, is not applied after the forget: it would write the value back (summary, archived
    summary, facts)."""
    from memos.adapters.llm import LLMConfig

    from .llm_server import FakeOpenAI

    number = "HIC-55102-7731"
    with FakeOpenAI(seed=3) as server:
        llm = LLMConfig(base_url=server.url, model="m", api_key="k", timeout_s=20, deadline_s=30, max_backoff_s=0.02)
        mem = Memory("s1", user="ana", store=store, settings=MemosSettings(budget_tokens=1500, background_compaction=True),
                     llm=llm, tools=[])
        mem.add(user(f"My health insurance number is {number}."))
        i = 0
        while number not in mem.summary():
            mem.add(user(f"Tell me about museum number {i} in Lisbon, its opening hours and the nearest metro."))
            mem.add(assistant(f"Museum {i} opens at 10:00; the nearest metro is station {i}."))
            mem.wait()
            i += 1
        server.hold = threading.Event()  # the next summary (from the one holding the number) waits
        while not mem.compacting:
            mem.add(user(f"And museum {i}? Opening hours, metro, ticket price please."))
            mem.add(assistant(f"Museum {i} opens at 9:30; tickets cost {i} euros."))
            i += 1
        release = threading.Timer(0.3, server.hold.set)
        release.start()
        fact = next(f for f in mem.facts() if number in f.value)
        other = Memory("s2", user="ana", store=store, tools=[])
        other.forget(int(fact.id))  # type: ignore[arg-type]
        release.join()
        mem.wait()
        mem.flush()
        assert number not in mem.summary()
        assert number not in _text(mem.context("what is my health insurance number?"))
        assert not any(number in h.text for h in mem.retrieve(f"health insurance number {number}", 50))
        assert not any(number in f.value for f in mem.facts(include_history=True))
        n = len(mem.history())
        mem.close()
        other.close()
    reopened = MemoryStore(store)
    with Session(reopened.engine) as s:  # nor in any summary version or archived item
        from memos.storage.log import SummaryRow
        from memos.tiers.archival import WITHOUT_TOKENS, ArchiveItem

        assert not [r.version for r in s.exec(select(SummaryRow)).all() if number in r.text]
        assert not [r.id for r in s.exec(select(ArchiveItem).options(*WITHOUT_TOKENS)).all() if number in r.text]
    reopened.close()
    assert n == 2 * i + 1  # nothing lost: the dropped demotion's messages are demoted again later


@pytest.mark.skipif(bool(POSTGRES), reason="reads the bytes of the SQLite files")
def test_erased_values_leave_no_copy_in_the_unused_space_of_live_pages(store):
    """secure_delete zeroes the cells it deletes, but a page SQLite rebalanced can keep an
    old copy of a cell in its unused gap, and that copy outlives the row: facts arriving in
    any order leave such copies in the fact indexes. Scrubbing rebuilds the file."""
    import random
    from collections import Counter

    from memos.storage.facts import FactCandidate

    ms = MemoryStore(store)
    ids = {u: [f"{u.upper()}-{n:05d}-{(n * 7919) % 10000:04d}" for n in range(1000)] for u in ("ana", "bob")}
    sessions = {u: ms.session("s1", user=u, tools=[]) for u in ids}
    for u, mine in ids.items():
        shuffled = random.Random(u).sample(mine, len(mine))
        sessions[u]._cold.apply([FactCandidate("identifier", i, f"{i} is a locker code", (f"m-{i}",), 1, once=True)
                                for i in shuffled])
    with ms.engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    data = Path(store).read_bytes()
    copies = {i: data.count(i.encode()) for mine in ids.values() for i in mine}
    usual = Counter(copies.values()).most_common(1)[0][0]
    stray = [i for i in ids["ana"] if copies[i] > usual]
    assert stray  # the layout this test is about: copies beyond the live ones
    for i in stray:
        fact = next(f for f in sessions["ana"].facts() if f.key == i)
        sessions["ana"].forget(int(fact.id))  # type: ignore[arg-type]
    bob_stray = [i for i in ids["bob"] if copies[i] > usual]
    ms.delete_user("bob")
    for mem in sessions.values():
        mem.close()
    ms.close()
    data = b"".join(p.read_bytes() for p in _store_files(store))
    assert [i for i in stray if i.encode() in data] == []
    assert [i for i in ids["bob"] if i.encode() in data] == [], f"{len(bob_stray)} of bob's had stray copies"
    assert all(i.encode() in data for i in ids["ana"] if i not in stray)  # the check sees what is there


@pytest.mark.skipif(bool(POSTGRES), reason="reads the bytes of the SQLite files")
def test_delete_user_removes_everything_of_that_user_only(store):
    ms = MemoryStore(store)
    ana = ms.session("s1", user="ana", budget=2048, tools=[])
    bob = ms.session("s1", user="bob", budget=2048, tools=[])
    ana.add(user("My locker code is LCK-90817, never share it."))
    bob.add(user("My bike lock code is BLK-55120."))
    ana.flush()
    bob.flush()
    before = _segment_folders(store)[0] if Path(store + ".chroma").is_dir() else set()
    gone = ms.delete_user("ana")
    assert gone.messages == 1 and gone.facts >= 1
    assert ana.history() == [] and not ana.facts() and "LCK-90817" not in _text(ana.context())
    assert "BLK-55120" in _text(bob.context("what is my bike lock code?"))
    ana.close()
    bob.close()
    ms.close()
    assert not any(b"LCK-90817" in p.read_bytes() for p in _store_files(store))
    if before:  # the deleted collection's folder went with it; bob's is still there
        on_disk, known = _segment_folders(store)
        assert len(before) == 2 and on_disk <= known and len(on_disk) == 1
