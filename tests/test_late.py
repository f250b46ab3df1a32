"""Late interaction: token states stored with each archived item, and ranking by them."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sqlmodel import Session, select

from memos import Memory
from memos.session.store import MemoryStore
from memos.text.embeddings import ChromaEmbedder, TokenStates, load_embedder
from memos.tiers import late
from memos.tiers.archival import ArchiveItem
from tests.conftest import EMBEDDING_DIR, needs_model, user

# A day's news with one detail buried among others, and a question about that detail in
# other words; then short messages that share the question's topic words.
DAYS = [
    ("Busy Saturday: fixed the fence, called the plumber about the dripping kitchen tap, walked the dog twice, "
     "baked sourdough and sent my sister the wedding photos.", "Did I get in touch with anyone about the leaky faucet?"),
    ("Work was a blur today, three meetings back to back, a long lunch with the new intern, and on the way home I "
     "renewed my passport at the post office before it closed.", "When did I sort out my travel document renewal?"),
    ("Caught up with Dana over coffee; we talked about her move to Denver, my cousin's new baby girl named Ivy, and "
     "the book club picking a thriller next month.", "What is the name of my cousin's daughter?"),
    ("The weekend trip was lovely: long drive, a small inn by the lake, and the kids finally learned to paddle a "
     "canoe on the last morning before we headed back.", "Did the children pick up any new water sport?"),
    ("Long day at the clinic for my mum: bloodwork, a chat with the cardiologist who lowered her statin dose, then "
     "groceries and a quick dinner at the noodle place.", "What changed about my mother's cholesterol medicine?"),
    ("Spent the evening on chores: laundry, paid the electricity bill, swapped the smoke alarm battery in the "
     "hallway, and watered every plant on the balcony.", "Did I replace anything in the fire detector?"),
    ("Team offsite recap: icebreakers, roadmap review, a surprisingly good taco truck, and my manager agreed I can "
     "move to the data platform group in March.", "Am I switching teams at some point?"),
    ("Garden update: tomatoes are finally red, the zucchini went wild, a rabbit ate half the lettuce, and I put up "
     "chicken wire around the beds this afternoon.", "What did I do to keep animals away from the vegetables?"),
    ("Quick note on the car: oil change done, the mechanic said the front brake pads are nearly worn out, and the "
     "tyres are fine until winter.", "Is anything on my vehicle close to needing replacement?"),
    ("Sunday plans shifted: brunch with Theo, skipped the gym, started a jigsaw puzzle of Venice, and booked a "
     "pottery class for the fourteenth.", "Did I sign up for any kind of ceramics workshop?"),
    ("Moving prep: packed the books, donated two bags of clothes, cancelled the internet contract effective the "
     "30th, and labelled the kitchen boxes.", "When does my broadband service end?"),
    ("Birthday party went great: eighteen guests, lemon cake, a karaoke machine, and my neighbour brought her golden "
     "retriever, Biscuit, who stole a sausage.", "What is the name of the dog that came to the party?"),
]
DISTRACTORS = [
    "The plumber's invoice came to 140 and I paid it online.", "My passport photo looked terrible, as usual.",
    "Dana recommended a thriller for book club.", "The lake was cold but clear.",
    "Mum's appointment was moved twice this month.", "The hallway light flickers again.",
    "The roadmap review ran an hour over.", "Rabbits are everywhere in the park this year.",
    "The mechanic's shop is on Elm Street.", "Theo is thinking about getting a puppy.",
    "The internet has been slow all week.", "Karaoke songs from the nineties are the best.",
]


def _rows(engine, namespace: str) -> list[ArchiveItem]:
    with Session(engine) as s:
        return list(s.exec(select(ArchiveItem).where(ArchiveItem.namespace == namespace)).all())


# -- storage and scoring, no model ---------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(arrays(np.float32, st.tuples(st.integers(0, 12), st.just(16)),
              elements=st.floats(-1, 1, width=32, allow_nan=False)))
def test_packed_states_keep_every_token_and_its_direction(raw):
    norms = np.linalg.norm(raw, axis=1, keepdims=True)
    vectors = np.where(norms > 1e-3, raw / np.clip(norms, 1e-12, None), 0).astype(np.float32)
    ids = np.arange(len(vectors), dtype=np.int64) + 30000
    token_ids, back = late.unpack(*late.pack(TokenStates(ids, vectors)))
    assert token_ids.tolist() == ids.tolist()
    assert back.shape == (len(vectors), 16) if len(vectors) else len(back) == 0
    for v, b in zip(vectors, back, strict=True):
        if np.linalg.norm(v) > 0:  # int8 per dimension with a float16 scale: the direction survives
            assert float(v @ b) / float(np.linalg.norm(b)) > 0.995


def test_maxsim_is_each_query_token_best_match_weighted():
    e = np.eye(4, dtype=np.float32)
    query = e[[0, 1]]
    items = [e[[0, 1, 2]], e[[0, 3]], np.zeros((0, 4), dtype=np.float32)]
    assert late.maxsim(query, np.array([1.0, 1.0], dtype=np.float32), items).tolist() == [1.0, 0.5, 0.0]
    # a token found everywhere weighs nothing: only the rarer one decides
    weights = late.idf_weights([7, 8], {7: 3, 8: 0}, 3)
    assert weights[1] > weights[0] > 0
    scores = late.maxsim(query, weights, items)
    assert scores[0] > scores[1] > scores[2]


# -- with the model --------------------------------------------------------------------


@needs_model
def test_token_states_come_from_the_same_pass_as_the_vector():
    model = load_embedder(EMBEDDING_DIR)
    texts = ["The order ORD-12345 shipped.", "", "Hello"]
    vectors, states = model.with_tokens(texts)  # type: ignore[union-attr]
    assert np.allclose(vectors, model(texts), atol=1e-6)
    tokenizer = model._tokenizer  # type: ignore[union-attr]
    assert [len(s.ids) for s in states] == [len(tokenizer.encode(t).ids) - 2 for t in texts]  # [CLS] and [SEP] left out
    assert np.allclose(np.linalg.norm(states[0].vectors, axis=1), 1.0, atol=1e-5)


@needs_model
def test_the_flush_stores_each_items_token_states(store):
    mem = Memory("s", store=store)
    for text, _ in DAYS[:3]:
        mem.archive(text)
    mem.flush()
    rows = _rows(mem._archival.engine, mem.scope)
    assert len(rows) == 3 and all(r.indexed and r.token_ids and r.token_states for r in rows)
    tokenizer = mem._archival.embedder._tokenizer  # type: ignore[union-attr]
    for r in rows:
        ids, states = late.unpack(r.token_ids, r.token_states)  # type: ignore[arg-type]
        assert ids.tolist() == tokenizer.encode(r.text).ids[1:-1] and states.shape == (len(ids), 384)
    mem.close()


@needs_model
def test_token_ranking_finds_the_buried_detail_more_often_than_the_sentence_vector(store):
    """Twelve day-summaries each bury the answer to a question (asked in other words) among
    other news, beside twelve short messages on the question's topic. Measured hit@1: the
    sentence vector 9 of 12, late interaction 11 of 12."""
    mem = Memory("s", store=store)
    wanted = {q: mem.archive(text) for text, q in DAYS}
    for text in DISTRACTORS:
        mem.archive(text)
    mem.flush()
    every = [r.id for r in _rows(mem._archival.engine, mem.scope)]
    dense_first = tokens_first = 0
    for _, q in DAYS:
        dense_first += next(iter(mem._archival.dense_similarities(q, 24))) == wanted[q]
        tokens_first += mem._archival.token_ranking(q, every)[0] == wanted[q]
    assert tokens_first >= dense_first + 2 and tokens_first >= 10, (dense_first, tokens_first)
    # and retrieve, which fuses it with the dense and keyword rankings, still finds each one
    assert sum(wanted[q] in [h.id for h in mem.retrieve(q, 3)] for _, q in DAYS) >= 11
    mem.close()


@needs_model
def test_token_index_off_stores_none_and_search_still_works(tmp_path):
    store = MemoryStore(tmp_path / "m.db", token_index=False)
    mem = store.session("s", user="u")
    ids = {q: mem.archive(text) for text, q in DAYS[:4]}
    mem.flush()
    assert all(r.indexed and r.token_ids is None and r.token_states is None for r in _rows(store.engine, mem.scope))
    assert mem._archival.token_ranking(DAYS[0][1], ids.values()) == []
    assert mem.retrieve(DAYS[2][1], 1)[0].id == ids[DAYS[2][1]]
    mem.close()
    store.close()


def test_token_index_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMOS_TOKEN_INDEX", "off")
    assert MemoryStore(tmp_path / "a.db").token_index is False
    monkeypatch.setenv("MEMOS_TOKEN_INDEX", "1")
    assert MemoryStore(tmp_path / "b.db").token_index is True
    monkeypatch.delenv("MEMOS_TOKEN_INDEX")
    assert MemoryStore(tmp_path / "c.db").token_index is True


@needs_model
def test_forget_rewrites_the_token_states_without_the_value(store):
    mem = Memory("s", store=store, budget=900)
    mem.add(user("My health insurance number is HX-99317-Q, please keep it on file."))
    for i in range(40):
        mem.add(user(f"Tell me about topic {i}, a long question about gardens and weather and trains number {i}."))
    mem.flush()
    tokenizer = mem._archival.embedder._tokenizer  # type: ignore[union-attr]
    value_ids = tokenizer.encode("HX-99317-Q").ids[1:-1]

    def holds_value() -> bool:
        for r in _rows(mem._archival.engine, mem.scope):
            if r.token_ids:
                ids = late.unpack(r.token_ids, r.token_states)[0].tolist()  # type: ignore[arg-type]
                if any(ids[i : i + len(value_ids)] == value_ids for i in range(len(ids))):
                    return True
        return False

    assert holds_value()
    fact = next(f for f in mem.facts() if "HX-99317-Q" in f.value)
    mem.forget(fact.id)
    mem.flush()
    assert not holds_value()
    rows = _rows(mem._archival.engine, mem.scope)
    assert all(r.indexed and r.token_ids for r in rows)  # written again from the redacted text
    mem.close()


@needs_model
def test_another_model_drops_the_old_token_states(store):
    if "://" in store or os.environ.get("MEMOS_CHROMA_URL"):
        pytest.skip("the embedded Chroma folder is what this test reopens")
    first = Memory("m", store=store)
    first.archive("note about the garden shed and the bicycle pump")
    first.flush()
    assert all(r.token_ids for r in _rows(first._archival.engine, first.scope))
    first.close()

    def hashed(texts: list[str]) -> list[list[float]]:
        return [[float((hash(w) % 7) - 3) for w in (t + " x" * 8).split()[:8]] for t in texts]

    second = Memory("m", store=store, embedder=ChromaEmbedder(hashed, name="hash-8"))
    second.retrieve("bicycle pump", 3)
    second.flush()
    rows = _rows(second._archival.engine, second.scope)
    assert rows and all(r.indexed and r.token_ids is None and r.token_states is None for r in rows)
    second.close()
