"""The archival tier against a real Chroma store on disk and the real ONNX model from ../shared."""

from __future__ import annotations

import json
import logging
import os
import shutil
import warnings
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from chromadb.api.client import SharedSystemClient
from sqlalchemy import update
from sqlmodel import col

from memos import Memory, MemosSettings
from memos.core.sections import PRESSURE_HEADER, RECALL_HEADER
from memos.storage.items import ArchiveItem
from memos.text.embeddings import MiniLMEmbedder, load_embedder
from memos.text.terms import content_terms
from memos.tiers.archival import rrf
from memos.tiers.warm import EARLIER, OLDEST
from tests.conftest import EMBEDDING_DIR, assistant, needs_model, tool_chain, user

pytestmark = [pytest.mark.postgres, pytest.mark.chroma_server]  # rerun by .ci/run on a PostgreSQL / Chroma server


@needs_model
def test_embeddings_reproduce_the_reference_vectors():
    found = [p for p in (EMBEDDING_DIR.parent / "reference_embeddings.json", EMBEDDING_DIR / "reference_embeddings.json")
             if p.is_file()]
    if not found:
        pytest.skip(f"no reference_embeddings.json beside the model in {EMBEDDING_DIR} (MEMOS_EMBEDDING_MODEL_DIR)")
    ref = json.loads(found[0].read_text())
    emb = MiniLMEmbedder(EMBEDDING_DIR)
    got = emb(ref["texts"])
    want = np.asarray(ref["embeddings"], dtype=np.float32)
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    cos = (got * want).sum(axis=1)
    assert got.shape == (6, 384)
    assert all(c > 0.999 for c in cos), cos
    # one text at a time gives the same vectors as a padded batch
    alone = np.vstack([emb([t]) for t in ref["texts"]])
    assert np.allclose(alone, got, atol=1e-4)


@needs_model
def test_batches_are_padded_to_their_longest_text_not_to_256():
    emb = MiniLMEmbedder(EMBEDDING_DIR)
    enc = emb._tokenizer.encode_batch(["short", "a slightly longer text here"])
    assert len(enc[0].ids) == len(enc[1].ids) < 20


@needs_model
def test_a_forward_pass_holds_at_most_batch_tokens_and_batching_does_not_change_a_vector():
    emb = MiniLMEmbedder(EMBEDDING_DIR)
    texts = [f"short note {i}" for i in range(40)] + [f"word{i} " * 200 for i in range(20)]
    batches = list(emb._batches(texts))
    assert sorted(i for b in batches for i in b) == list(range(60))
    lengths = [sum(e.attention_mask) for e in emb._tokenizer.encode_batch(texts)]
    assert all(len(b) * max(lengths[i] for i in b) <= emb.batch_tokens for b in batches)
    assert len(batches[0]) == 40 and max(lengths[40:]) == 256  # short texts go together, long ones in eights
    got = emb(texts)
    alone = np.vstack([emb([texts[i]]) for i in (0, 39, 40, 59)])
    assert np.allclose(alone, got[[0, 39, 40, 59]], atol=1e-4)


def test_one_id_or_one_tag_may_be_a_string(store):
    mem = Memory("s", store=store, settings=MemosSettings(background_indexing=False))
    [said] = mem.add(user("The boiler was serviced on 3 March by Heatwise."))
    excerpt = mem.archive(message_ids=said.id, tags="home")
    with mem.store.db() as s:
        row = s.get(ArchiveItem, excerpt)
        assert row is not None and json.loads(row.tags) == ["home"] and "Heatwise" in row.text
    with pytest.raises(ValueError, match="unknown message id"):
        mem.archive(message_ids="nope")
    mem.close()


def test_archive_reopen_retrieve(store):
    mem = Memory("s", store=store)
    item = mem.archive("The spare key is under the blue flower pot by the back door.", tags=["home"])
    mem.close()
    again = Memory("s", store=store)
    again.flush()
    hits = again.retrieve("where did I hide the extra house key?", 3)
    assert hits and hits[0].id == item and hits[0].kind == "note"
    if "://" not in store and not os.environ.get("MEMOS_CHROMA_URL"):  # the default: a Chroma folder beside the SQLite file
        assert Path(store + ".chroma").is_dir()
    again.close()


def _session_with_archive(mem: Memory) -> None:
    mem.add(user("My locker code at the gym is 4471 and the locker number is L-220."))
    mem.add(assistant("Noted the locker details."))
    for i in range(30):
        mem.add(user(f"Question {i}: what is the capital of country number {i}? Explain the history at length please."))
        mem.add(tool_chain(f"q{i}", result=json.dumps({"answer": f"City-{i}", "history": "long story " * 30})))
        mem.add(assistant(f"The capital is City-{i}."))
    mem.flush()


@needs_model
def test_demoted_units_are_archived_and_reindex_gives_the_same_hits(store, tmp_path):
    mem = Memory("s", store=store, budget=1200)
    _session_with_archive(mem)
    assert mem.stats().demotions > 0 and mem._archival.count() > 20
    before = [h.id for h in mem.retrieve("gym locker code", 5)]
    assert any("locker" in h.text for h in mem.retrieve("gym locker code", 5))
    assert mem.reindex() == mem._archival.count()
    assert [h.id for h in mem.retrieve("gym locker code", 5)] == before
    # lost vectors (the Chroma folder, or the collection on a server) are rebuilt from the store
    if Path(store + ".chroma").is_dir():
        mem.close()
        shutil.rmtree(store + ".chroma")
    else:
        mem._archival.backend.delete(mem._archival.namespace)  # type: ignore[union-attr]
        mem.close()
    SharedSystemClient.clear_system_cache()  # as in a new process: Chroma caches clients by path
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = Memory("s", store=store, budget=1200)
        assert again.reindex() == again._archival.count()
        assert again._archival.backend.count(again._archival.namespace) == again._archival.count()
        assert [h.id for h in again.retrieve("gym locker code", 5)] == before
    again.close()


def test_no_model_warns_once_and_runs_keyword_only(store, caplog):
    missing = Path(store).parent / "no-model-here"
    with caplog.at_level(logging.WARNING, logger="memos"):
        mem = Memory("s", store=store, embedding_model_dir=missing)
        mem.archive("Invoice INV-7781 is due on 2026-07-01.")
        mem.flush()
        hits = mem.retrieve("INV-7781", 3)
        mem.retrieve("invoice due", 3)
    assert hits and "INV-7781" in hits[0].text
    model_warnings = [r for r in caplog.records if "embedding model could not be loaded" in r.getMessage()]
    assert len(model_warnings) == 1 and str(missing) in model_warnings[0].getMessage()
    assert "MEMOS_EMBEDDING_MODEL_DIR" in model_warnings[0].getMessage()
    assert load_embedder(missing) is None
    mem.close()


ITEMS = ["rain jacket", "travel adapter", "hiking boots", "phone charger", "sun hat", "yoga mat", "coffee grinder",
         "desk lamp", "backpack", "water bottle"]
ORDERS = [(f"ORD-{88231 + i * 7}", f"Order ORD-{88231 + i * 7} contains a {it} and ships on 2026-06-{10 + i:02d}.")
          for i, it in enumerate(ITEMS)]
PARAPHRASES = [
    ("My doctor told me to rest for a week after the surgery.", "what did the physician recommend for recovery"),
    ("The cat sleeps on the sofa all afternoon.", "where does the feline nap during the day"),
    ("We bought a new car last month and it drives beautifully.", "recent automobile purchase"),
    ("Our flight to Tokyo was delayed by six hours because of a storm.", "plane trip to Japan held up by bad weather"),
    ("I am learning to play the violin with a private teacher.", "taking lessons on a string instrument"),
    ("The kitchen sink is leaking and needs a plumber.", "water dripping under the basin, need repair person"),
    ("She ran her first marathon in under four hours.", "completed a 42 km race quickly"),
    ("The bank approved our mortgage for the new house.", "home loan got accepted by the lender"),
    ("He adopted a puppy from the animal shelter.", "got a young dog from a rescue center"),
    ("The museum exhibit on ancient Egypt opens next Friday.", "pharaoh artifacts show starting soon"),
]


@needs_model
def test_hybrid_beats_dense_0_55_and_keyword_0_60_with_0_90_hit_at_1(store):
    """20 labelled queries: exact order ids (keyword's strength) and paraphrases with no
    shared words (dense's strength). Measured hit@1: dense 0.55, keyword 0.60, hybrid 0.90."""
    mem = Memory("lab", store=store)
    ids = {text: mem.archive(text) for _, text in ORDERS}
    ids.update({text: mem.archive(text) for text, _ in PARAPHRASES})
    mem.flush()
    queries = [(f"status of {oid}", text) for oid, text in ORDERS] + [(q, text) for text, q in PARAPHRASES]

    def hit_at_1(mode: str) -> float:
        good = 0
        for q, text in queries:
            hits = mem._archival.search(q, 1, mode=mode)
            good += bool(hits) and hits[0].id == ids[text]
        return good / len(queries)

    dense, keyword, hybrid = hit_at_1("dense"), hit_at_1("keyword"), hit_at_1("hybrid")
    assert hybrid >= 0.85
    assert hybrid >= dense + 0.25 and hybrid >= keyword + 0.2, (dense, keyword, hybrid)
    mem.close()


def test_rrf_sums_reciprocal_ranks():
    scores = rrf([["a", "b", "c"], ["c", "a"]], k=60)
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert max(scores, key=scores.get) == "a"


def test_rrf_weights_a_ranking_and_normalises_by_the_best_possible():
    plain = rrf([["a", "b"], ["b", "a"]], k=20)
    assert plain["a"] == pytest.approx(plain["b"])
    weighted = rrf([["a", "b"], ["b", "a"]], k=20, weights=[1.0, 2.0], normalise=True)
    assert weighted["b"] > weighted["a"]
    assert rrf([["a"], ["a"]], k=20, weights=[1.0, 2.0], normalise=True)["a"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="1 weights for 2 rankings"):
        rrf([["a"], ["b"]], weights=[1.0])


def test_filters_by_kind_time_and_role_and_never_crosses_users(store):
    ana = Memory("s", user="ana", store=store, budget=900)
    bob = Memory("s", user="bob", store=store, budget=900)
    ana.archive("Ana's safe combination is 12-34-56.")
    bob.archive("Bob keeps his bike at the north station.")
    _session_with_archive(ana)
    ana.flush()
    bob.flush()
    assert not [h for h in bob.retrieve("safe combination 12-34-56", 10) if "12-34-56" in h.text]
    notes = ana.retrieve("combination", 10, kind="note")
    assert notes and all(h.kind == "note" for h in notes)
    assert ana.retrieve("combination", 10, since=4_000_000_000) == []
    users = ana.retrieve("capital city history", 10, roles=["user"])
    assert users and all("user" in h.roles for h in users)
    facts = ana.retrieve("locker L-220", 5, kind="fact")
    assert facts and all(h.source == "fact" for h in facts) and any("L-220" in h.text for h in facts)
    if ana._archival.dense:  # a fact shows its similarity to the query, as an archived item does
        model = ana._archival.model
        assert model is not None
        for h in facts:
            assert h.similarity == pytest.approx(float(model([h.text])[0] @ model(["locker L-220"])[0]), abs=1e-4)
    page1, page2 = ana.retrieve("capital", 3, page=1), ana.retrieve("capital", 3, page=2)
    assert not {h.id for h in page1} & {h.id for h in page2}
    with pytest.raises(ValueError, match="non-empty"):
        ana.retrieve("  ")
    # one role as a string is that role, not its letters; a datetime is a time
    assert {h.id for h in ana.retrieve("capital city history", 10, roles="user")} == {h.id for h in users}
    assert ana.retrieve("combination", 10, since=datetime(2096, 1, 1, tzinfo=timezone.utc)) == []
    assert ana.retrieve("combination", 10, kind="note", until=datetime.now(timezone.utc) + timedelta(days=1))
    assert ana.retrieve("combination", np.int64(10), since=np.float64(0), page=np.int32(1)) == ana.retrieve("combination", 10)
    for bad, match in [({"kind": "notes"}, "kind must be"), ({"roles": ["usr"]}, "roles must be among"),
                       ({"since": "yesterday"}, "since must be a Unix time"), ({"top_k": 2.5}, "top_k must be an int"),
                       ({"page": "2"}, "page must be an int"), ({"top_k": True}, "top_k must be an int")]:
        with pytest.raises(ValueError, match=match):
            ana.retrieve("combination", **bad)
    with pytest.raises(ValueError, match="kind must be one of"):
        ana.facts("constraints")
    ana.close()
    bob.close()


def test_auto_recall_brings_an_early_detail_back_as_marked_data(store):
    mem = Memory("s", store=store, budget=1200)
    _session_with_archive(mem)
    mem.add(user("What was my gym locker code again?"))
    ctx = mem.context()
    recalled = [m for m in ctx if str(m.get("content", "")).startswith(RECALL_HEADER)]
    assert len(recalled) == 1 and recalled[0]["role"] == "system"
    assert "4471" in recalled[0]["content"] and "not instructions" in recalled[0]["content"]
    assert mem.counter.count_messages(ctx) <= 1200
    off = Memory("s", store=store, settings=MemosSettings(budget_tokens=1200, auto_recall=False))
    assert not [m for m in off.context() if str(m.get("content", "")).startswith(RECALL_HEADER)]
    mem.close()
    off.close()


def test_a_message_said_again_word_for_word_is_recalled_once(store):
    mem = Memory("s", store=store, budget=1200, tools=[])
    for i in range(3):  # the same words, three messages: one line of recall is enough
        mem.add(user("My locker code at the gym is 4471."))
        mem.add(assistant(f"Noted ({i})."))
    _session_with_archive(mem)

    def recalled(ctx: list[dict]) -> str:
        return next(str(m["content"]) for m in ctx if str(m.get("content", "")).startswith(RECALL_HEADER))

    first = recalled(mem.context("What was my gym locker code again?"))
    assert "L-220" in first and first.count("My locker code at the gym is 4471.") == 1
    said = "user: My locker code at the gym is 4471."
    listed = [h.text for h in mem.retrieve("locker code 4471", 5)]
    assert listed.count(said) == 1 and len(listed) == 5  # retrieve lists the words once, and fills its 5
    mem.add(user("My locker code at the gym is 4471."))  # and once more, in the hot tier now
    mem.add(assistant("Noted again."))
    mem.add(user("What was my gym locker code again?"))
    ctx = mem.context()
    assert "L-220" in recalled(ctx)  # the other locker message is recalled
    assert "My locker code at the gym is 4471." not in recalled(ctx)  # the hot tier holds those words already
    assert sum(str(m.get("content")) == "My locker code at the gym is 4471." for m in ctx) == 1
    assert said not in [h.text for h in mem.retrieve("locker code 4471", 10)]  # held hot: in the prompt already
    archived = mem._archival.search("locker code 4471", 20, mode="keyword")
    assert [h.text for h in archived].count(said) == 4  # every copy stays archived
    mem.close()


def test_a_turn_lent_a_score_by_its_neighbour_never_ranks_ahead_of_it(store):
    # the aunt's turn matches best; the uncle's, next to it, matches a little less and has more
    # matching neighbours: it rises with them, but stays behind the turn that lent to it
    mem = Memory("s", store=store, budget=4096, tools=[])
    texts = ["My aunt's birthday is on May 29.", "My uncle's birthday is on March 1.", "Passport X1234567.",
             "Small talk one.", "Small talk two."]
    ids = {t: f"unit:{m.id}" for t in texts for m in mem.add(user(t))}
    scores = {ids[texts[0]]: 1.0, ids[texts[1]]: 0.913, ids[texts[3]]: 0.63, ids[texts[4]]: 0.6}
    rank = mem._archival.in_context(scores)
    assert rank[ids[texts[1]]] > scores[ids[texts[1]]]  # the uncle's turn still gains from its neighbours
    assert rank[ids[texts[0]]] > rank[ids[texts[1]]]
    assert rank[ids[texts[2]]] < rank[ids[texts[0]]]  # a turn no search found comes in behind its lender
    mem.close()


@needs_model
def test_a_code_in_the_query_ranks_the_items_holding_it_before_near_misses(store):
    # forty orders whose ids differ by a digit or two; the dense and token models read them as
    # nearly the same text. One order's vector is not written yet (as when the indexer is behind,
    # or a process was killed before it caught up): keyword search alone finds it
    mem = Memory("orders", store=store, budget=1024, tools=[], settings=MemosSettings(background_indexing=False))
    for i in range(40):
        mem.add(user(f"Please check the shipping status of order ORD-{20000 + 10 * i}."))
        mem.add(assistant(f"Order ORD-{20000 + 10 * i} ships on day {i % 28 + 1}; the courier will email you."))
    pending = [h.id for h in mem.retrieve("ORD-20140", 10) if "ORD-20140" in h.text and h.source == "archive"]
    assert pending
    archival = mem._archival
    archival.backend.delete_ids(archival.namespace, pending)
    with archival.engine.begin() as c:
        c.execute(update(ArchiveItem).where(col(ArchiveItem.id).in_(pending)).values(indexed=False, token_ids=None, token_states=None))
    for query in ("ORD-20140", "When does ORD-20140 ship?"):
        hits = [h for h in mem.retrieve(query, 5) if h.source == "archive"]
        holding = [h for h in hits if "ORD-20140" in h.text]
        assert holding and hits[: len(holding)] == holding, [h.text[:40] for h in hits]
    for oid in ("ORD-20050", "ORD-20300"):  # indexed: the items holding the code come first too
        hits = [h for h in mem.retrieve(f"Where is {oid} now?", 5) if h.source == "archive"]
        assert oid in hits[0].text and oid in hits[1].text, [h.text[:40] for h in hits]
    mem.close()


def test_retrieve_lists_one_summary_version_a_session_and_only_one_that_adds_to_the_hits(store):
    # each demotion archives the summary it replaces, so many versions hold the early order's
    # line; retrieve lists the message and one version, and kind='summary' lists them all
    mem = Memory("s", store=store, budget=1024, tools=[])
    mem.add(user("My order number is ORD-77123, please track it."))
    mem.add(assistant("Tracking ORD-77123 now: it left the warehouse this morning."))
    for i in range(40):
        mem.add(user(f"Suggest a history book, number {i}, about the Roman empire."))
        mem.add(assistant(f"Book {i}: a rich account of the Roman empire, full of stories and maps."))
    mem.flush()
    versions = mem.retrieve("ORD-77123", 20, kind="summary")
    assert len(versions) >= 3
    hits = mem.retrieve("ORD-77123", 20)
    summaries = [h for h in hits if h.kind == "summary"]
    assert len(summaries) <= 1 and any(h.kind == "message" and "ORD-77123" in h.text for h in hits)
    for i, h in enumerate(hits):
        if h.kind == "summary":
            above = set().union(*(content_terms(x.text) for x in hits[:i] if x.source == "archive"))
            assert not content_terms(h.text) - content_terms(OLDEST + EARLIER) <= above, h.text
    mem.close()


def test_pages_of_retrieve_list_every_hit_once_when_many_candidates_are_dropped(store):
    # one message said again and again (listed once a session and day) and overlapping summary
    # versions are dropped from retrieve's list: a page must still be full when more hits exist,
    # and page 2 must go on where page 1 stopped
    mem = Memory("s", store=store, budget=1024, tools=[])
    for i in range(30):
        mem.add(user("Remind me about the dentist appointment."))
        mem.add(assistant(f"Noted, reminder {i} about the dentist appointment is set."))
    for i in range(20):
        mem.add(user(f"What is a good stretch for my back, number {i}?"))
        mem.add(assistant(f"Stretch {i}: lie on your back and pull one knee to your chest."))
    mem.flush()  # the pages read one archive: every vector written
    everything = [h.id for h in mem.retrieve("dentist appointment reminder", 60) if h.source == "archive"]
    assert len(everything) >= 12
    pages = [[h.id for h in mem.retrieve("dentist appointment reminder", 4, page=p) if h.source == "archive"]
             for p in (1, 2, 3)]
    listed = [i for page in pages for i in page]
    assert len(listed) == len(set(listed))
    assert all(len(page) == 4 for page in pages) or set(listed) >= set(everything)
    mem.close()


def test_memory_pressure_notice_appears_above_the_warning_threshold(make_memory):
    settings = MemosSettings(budget_tokens=2000, soft_threshold=0.9, hard_threshold=0.95, hot_target=0.9,
                             warning_threshold=0.5)
    mem = make_memory(settings=settings, tools=None)  # memos' own tools, archive among them
    mem.add(user("hello"))
    assert not [m for m in mem.context() if PRESSURE_HEADER in str(m.get("content"))]
    for i in range(12):
        mem.add([user(f"tell me story number {i} " + "and more " * 20), assistant("ok " * 40)])
    notices = [m for m in mem.context() if PRESSURE_HEADER in str(m.get("content"))]
    assert len(notices) == 1 and notices[0]["role"] == "system" and "`archive`" in notices[0]["content"]


def test_pressure_notice_only_when_the_request_offers_the_archive_tool(make_memory):
    settings = MemosSettings(budget_tokens=2000, soft_threshold=0.9, hard_threshold=0.95, hot_target=0.9,
                             warning_threshold=0.5)
    mem = make_memory(settings=settings, tools=None)
    for i in range(12):
        mem.add([user(f"tell me story number {i} " + "and more " * 20), assistant("ok " * 40)])

    def notices(**kw):
        return [m for m in mem.context(**kw) if PRESSURE_HEADER in str(m.get("content"))]

    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    assert len(notices()) == 1  # memos' own tools are counted by default
    assert len(notices(tools=[weather, *mem.tools()])) == 1
    assert len(notices(tools=mem.tools(prefix="memory_"))) == 1
    assert notices(tools=[]) == [] and notices(tools=[weather]) == []
    assert notices(tools=mem.tools(names=["retrieve", "pin"])) == []


def test_threads_opening_one_chroma_path_at_once_all_get_a_working_client(tmp_path):
    import threading

    from memos.tiers.archival import ChromaBackend

    barrier, errors, backends = threading.Barrier(4), [], []

    def open_and_read() -> None:
        barrier.wait()
        try:
            backend = ChromaBackend.persistent(tmp_path / "shared.chroma")
            backend.upsert("ns", [f"id-{threading.get_ident()}"], [[0.1] * 8], ["text"], [{"k": "v"}])
            backends.append(backend)
        except Exception as exc:  # collected so the assertion names it
            errors.append(repr(exc))

    threads = [threading.Thread(target=open_and_read) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(backends[0].ids("ns")) == 4


def test_closing_a_store_releases_the_chroma_client_it_opened_and_not_one_passed_in(tmp_path):
    import chromadb
    from chromadb.config import Settings

    from memos import MemoryStore
    from memos.tiers.archival import ChromaBackend

    opened = MemoryStore(tmp_path / "a.db", archive=tmp_path / "a.chroma")
    opened.backend().upsert("ns", ["one"], [[0.1] * 8], ["text"], [{"k": "v"}])
    opened.close()
    # Chroma refuses a second client on a path whose first one is still alive with other settings
    again = chromadb.PersistentClient(path=str(tmp_path / "a.chroma"), settings=Settings(anonymized_telemetry=False,
                                                                                         allow_reset=True))
    assert again.list_collections()  # what was written before the close is on disk
    again.close()

    mine = ChromaBackend.persistent(tmp_path / "b.chroma")
    lent = MemoryStore(tmp_path / "b.db", archive=mine)
    lent.backend().upsert("ns", ["two"], [[0.1] * 8], ["text"], [{"k": "v"}])
    lent.close()
    assert mine.ids("ns") == {"two"}  # the caller's backend still works


def test_a_session_with_its_own_archive_path_releases_its_chroma_client_when_closed(tmp_path):
    import chromadb
    from chromadb.config import Settings

    from memos import MemoryStore

    store = MemoryStore(tmp_path / "m.db")
    mem = store.session("s1", user="u", archive=str(tmp_path / "own.chroma"))
    mem.add([user("The spare key is under the blue pot."), assistant("Noted.")])
    mem.flush()  # the session's own Chroma client is opened
    assert (tmp_path / "own.chroma").exists()
    mem.close()
    again = chromadb.PersistentClient(path=str(tmp_path / "own.chroma"),
                                      settings=Settings(anonymized_telemetry=False, allow_reset=True))
    again.close()
    store.close()


def test_empty_is_true_until_something_of_this_namespace_is_archived(store):
    ana = Memory("s", user="ana", store=store, settings=MemosSettings(background_indexing=False))
    bob = Memory("s", user="bob", store=store, settings=MemosSettings(background_indexing=False))
    assert ana._archival.empty() and bob._archival.empty()
    ana.archive("Ana's locker is L-220.")
    assert not ana._archival.empty() and bob._archival.empty()
    assert ana._archival.count() == 1
    ana.close()
    bob.close()


@needs_model
def test_the_english_model_leaves_chinese_queries_to_keyword_search(store, monkeypatch):
    from memos.text.embeddings import OnnxEmbedder, covers

    emb = OnnxEmbedder(EMBEDDING_DIR)
    assert emb.name == "all-MiniLM-L6-v2" and emb.dim == 384 and emb.languages == frozenset({"en"})
    assert covers(emb, "Where is the spare key?") and not covers(emb, "我婶婶的生日是啥时候来着？")
    assert covers(emb, "我的订单 ORD-88123 到哪了? where is my parcel, the one I ordered last week") is True
    mem = Memory("zh", store=store)
    for note in ("我婶婶的生日是在5月29号。", "我舅舅的生日是在8月3号。", "The spare key is under the blue flower pot."):
        mem.archive(note)  # archived notes: what the hot tier holds is never retrieved
    mem.flush()
    zh = mem.retrieve("我婶婶的生日是啥时候来着？", 3)
    assert zh and "婶婶" in zh[0].text and zh[0].found_by == ("keyword",) and zh[0].similarity is None
    en = mem.retrieve("where did I hide the extra house key?", 1)
    assert en and "dense" in en[0].found_by
    mem.close()
    monkeypatch.setenv("MEMOS_EMBEDDING_LANGUAGES", "any")
    assert OnnxEmbedder(EMBEDDING_DIR).languages is None


def _hash_embedder(dim: int):
    def embed(texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), dim), dtype=np.float32)
        for row, t in enumerate(texts):
            for w in t.lower().split():
                out[row, hash(w) % dim] += 1.0
        return out + 1e-3

    return embed


def test_vectors_of_another_model_are_written_again_never_mixed(store, caplog):
    if "://" in store or os.environ.get("MEMOS_CHROMA_URL"):
        pytest.skip("the embedded Chroma folder is what this test reopens")
    from memos.text.embeddings import ChromaEmbedder

    first = Memory("m", store=store, embedder=ChromaEmbedder(_hash_embedder(32), name="hash-32"))
    for i in range(5):
        first.archive(f"note {i} about the garden shed and the bicycle pump")
    first.flush()
    assert first._archival.pending() == 0 and first._archival.backend.count(first.scope) == 5
    first.close()
    with caplog.at_level(logging.WARNING, logger="memos"):
        second = Memory("m", store=store, embedder=ChromaEmbedder(_hash_embedder(48), name="hash-48"))
        second.retrieve("bicycle pump", 3)  # opens the archive: the old model's vectors go
        second.flush()
    assert any("written by hash-32" in r.getMessage() and "hash-48" in r.getMessage() for r in caplog.records)
    assert second._archival.backend.count(second.scope) == 5 and second._archival.pending() == 0
    hits = second.retrieve("garden shed", 3)
    assert hits and "dense" in hits[0].found_by  # 48-dimensional queries against 48-dimensional vectors
    second.close()


@needs_model
def test_vectors_an_earlier_process_left_queued_are_written_by_the_next_indexing_session(tmp_path):
    import time

    store = tmp_path / "q.db"
    with Memory("first", user="ana", store=store, embedding_model_dir=tmp_path / "no-model") as mem:
        mem.archive("The spare key is under the blue flowerpot.")
        scope = mem.scope
    with Memory("other", user="bo", store=store, settings=MemosSettings(background_indexing=False)) as reader:
        reader.retrieve("key", 1)
        assert reader.store.archive(scope, background=False).pending() == 1  # a read-only session indexes nothing
    with Memory("other", user="bo", store=store) as mem:
        mem.retrieve("key", 1)  # bo's archive opens: ana's queued vector is written in the background
        ana = mem.store.archive(scope)
        deadline = time.monotonic() + 60
        while ana.pending() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ana.pending() == 0


def test_a_reply_that_says_nothing_alone_is_recalled_only_beside_its_turn(tmp_path):
    # the rule is pinned, so its turn is not recalled; the reply next to it would be, for its place
    mem = Memory("ack", user="zoe", store=tmp_path / "a.db", budget=1024, tools=[])
    mem.add([user("Never book me on red-eye flights."), assistant("Understood.")])
    for i in range(40):
        mem.add([user(f"What's a good museum to visit on day {i} of the trip in Lisbon?"),
                 assistant(f"For day {i}, try the tile museum; it opens at ten and is quiet in the morning.")])
    mem.flush()
    (recalled,) = [m["content"] for m in mem.context("Which flights should I avoid on the way back?")
                   if m["content"].startswith(RECALL_HEADER)]
    assert "Understood." not in recalled and "museum" in recalled
    mem.add([user("The meeting with Carla is at 3pm on Friday."), assistant("Got it.")])
    for i in range(40):
        mem.add([user(f"Any bakery tips for morning {i}?"), assistant(f"Bakery {i}: the one by the river, before nine.")])
    mem.flush()  # every vector written: the ranking does not depend on how far the indexer got
    (recalled,) = [m["content"] for m in mem.context("When is the meeting with Carla?")
                   if m["content"].startswith(RECALL_HEADER)]
    assert "meeting with Carla is at 3pm" in recalled  # shown with its turn, a reply may follow it
    mem.close()


def test_a_turn_is_ranked_with_the_turns_around_it(tmp_path):
    from sqlalchemy import event

    # keyword search alone: the answer shares no word with the question, so only its place finds it
    mem = Memory("ctx", user="ana", store=tmp_path / "c.db", embedding_model_dir=tmp_path / "no-model")
    for i in range(30):
        mem.add([user(f"Weather check {i}: light rain and wind today."), assistant(f"Noted, umbrella day {i}.")])
    mem.add([user("I spent the whole week researching for my thesis project."), assistant("What did you find out?"),
             user("Adoption agencies that accept single parents."), assistant("That sounds like a good lead.")])
    for i in range(30):
        mem.add([user(f"Grocery list {i}: apples and bread."), assistant(f"Added item {i}.")])
    other = Memory("other", user="ana", store=tmp_path / "c.db", embedding_model_dir=tmp_path / "no-model")
    other.add([user(f"A different chat, about tiles {i}.") for i in range(70)])  # turns at the same places
    hits = mem._archival.search("what was I researching for the thesis project", 5)
    texts = [h.text for h in hits]
    assert "researching for my thesis" in texts[0]
    answer = next(h for h in hits if "Adoption agencies" in h.text)
    assert answer.found_by == ("context",) and answer.score == 0.0
    # the weights by distance, the best lender per distance, nothing across sessions or past three turns
    match = hits[0]
    seen: list[tuple[str, tuple]] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("SELECT") and "FROM memos_archive" in statement:
            seen.append((statement, tuple(parameters)))

    event.listen(mem._archival.engine, "before_cursor_execute", record)
    try:
        ranked = mem._archival.in_context({match.id: 1.0})
    finally:
        event.remove(mem._archival.engine, "before_cursor_execute", record)
    by_text = {mem._archival.get(i).text: v for i, v in ranked.items()}  # type: ignore[union-attr]
    assert by_text == {
        match.text: 1.0, "assistant: What did you find out?": 0.5, "user: Adoption agencies that accept single parents.": 0.25,
        "assistant: That sounds like a good lead.": 0.125, "assistant: Noted, umbrella day 29.": 0.5,
        "user: Weather check 29: light rain and wind today.": 0.25, "assistant: Noted, umbrella day 28.": 0.125}
    with mem._archival.engine.connect() as conn:
        for statement, params in seen[1:]:  # the turns around: on the turn indexes, not the whole session
            plan = " | ".join(str(r[3]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, params).all())
            assert "first_seq=?" in plan or "last_seq=?" in plan, (statement, plan)
    two = mem._archival.in_context({match.id: 1.0, hits[0].id: 1.0, answer.id: 0.4})
    assert two[answer.id] == pytest.approx(0.4 + 0.25)  # a turn does not lend to itself
    other.close()
    mem.close()


def test_a_second_hop_takes_the_message_that_names_both_the_person_and_what_is_asked(tmp_path, monkeypatch):
    # "the person whose birthday is 7/15: where do they work?" The birthday names the cousin; of
    # the cousin's messages, the e-mail one matches more of the birthday's words ("我表", "表弟",
    # "弟的") than the one that answers, which alone names work (工作) as well. Keyword search
    # alone, no model; thirty other people's workplaces match the question's "工作地" better still.
    import memos.tiers.archival as archival_tier

    mem = Memory("people", user="ana", store=tmp_path / "p.db", embedding_model_dir=tmp_path / "no-model")
    others = [a + b for a in "张王刘赵孙李陈吴周郑" for b in ("志鹏", "晨曦", "雅琳")]
    cities = ["江苏南京", "广东深圳", "山东青岛", "北京", "上海", "四川成都"]
    answer = "我表弟在浙江杭州工作呢。"
    for text in (answer, "我表弟就喜欢玩电子游戏。", "我表弟的生日是7月15日。",
                 "我表弟的邮箱地址是zhangwei0715@example.com。", "我表弟的电话号码是13225162475。"):
        mem.add(user(text))
    for n, name in enumerate(others):
        mem.add(user(f"{name}的工作地是{cities[n % len(cities)]}。"))
        for i in range(3):  # a long chat: what a person does is not told next to what another does
            mem.add(user(f"购物清单{n}-{i}：燕麦奶和大米。"))
    query = "那个生日是07月15日的人，以下哪一项符合其工作地的描述？"
    (found,) = [h for h in mem._archival.search(query, 8) if answer in h.text]
    assert "bridge" in found.found_by
    # the best match alone, as the hop took it before: the e-mail, and the answer is not among the eight
    monkeypatch.setattr(archival_tier, "_names_both", lambda *_: False)
    assert not [h for h in mem._archival.search(query, 8) if answer in h.text]
    mem.close()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_second_hop_finds_the_message_that_names_what_the_first_hit_is_about(tmp_path, monkeypatch, lang):
    # "how long is the event whose programme is X?": the message that holds X names the event,
    # and the answer names the event and its duration, sharing only "duration" with the
    # question, as twenty other events' durations do. Keyword search alone, no model.
    import memos.tiers.archival as archival_tier

    en = lang == "en"
    names = ["job fair", "finance forum", "art show", "hiking trip", "film night", "chess open", "book club", "wine tasting",
             "coding camp", "choir concert", "pottery class", "startup pitch", "charity run", "jazz evening",
             "photo walk", "tea ceremony", "robot contest", "poetry slam", "food market", "yoga retreat", "kite festival"]
    zh_names = ["秋季招聘会", "金融科技论坛", "模型艺术展", "户外徒步之旅", "电影音乐之夜", "象棋公开赛", "读书分享会", "品酒沙龙",
                "编程训练营", "合唱音乐会", "陶艺体验课", "创业路演", "慈善长跑", "爵士之夜", "城市摄影行", "茶艺表演",
                "机器人大赛", "诗歌朗诵会", "美食市集", "瑜伽静修营", "风筝节"]
    events = names if en else zh_names
    programme = ("bank tellers share their career experience and meet recruiters" if en
                 else "深圳地区银行柜员主管分享职业经验，招纳贤才")
    mem = Memory("events", user="ana", store=tmp_path / "e.db", embedding_model_dir=tmp_path / "no-model")
    mem.add(user(f"I'm going to the {events[0]}." if en else f"我将要参加{events[0]}。"))
    mem.add(user(f"The {events[0]}'s programme: {programme}." if en else f"{events[0]}的主要内容是{programme}。"))
    for n, name in enumerate(events[1:] + events[:1]):
        mem.add(user(f"The {name}'s duration is {n + 2} weeks." if en else f"{name}的持续时间是{n + 2}周。"))
        for i in range(3):  # a long chat: "duration" is in a fifth of the messages, not in most
            mem.add(user(f"Shopping note {n}-{i}: oat milk and rice." if en else f"购物清单{n}-{i}：燕麦奶和大米。"))
    answer = f"The {events[0]}'s duration is 22 weeks." if en else f"{events[0]}的持续时间是22周。"
    query = (f"What is the duration of the event whose programme is {programme}?" if en
             else f"那个主要内容是“{programme}”的活动，持续时间是什么？")
    hits = mem._archival.search(query, 10)
    assert [h for h in hits if programme in h.text], [h.text for h in hits]
    (found,) = [h for h in hits if answer in h.text]
    assert "bridge" in found.found_by
    monkeypatch.setattr(archival_tier, "BRIDGE_FROM", 0)  # without the second hop it is one of twenty
    assert not [h for h in mem._archival.search(query, 10) if answer in h.text]
    mem.close()
