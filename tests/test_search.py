"""Keyword search: one tokeniser for English, identifiers and Chinese, one index for both tiers."""

from __future__ import annotations

import sqlite3

import pytest

from memos import Memory
from memos.text.search import index_text, query_terms, tokens

from .conftest import POSTGRES, assistant, user

pytestmark = pytest.mark.postgres  # rerun by .ci/run on a PostgreSQL server


def test_tokens_keep_ids_whole_and_split_chinese_into_characters_and_bigrams():
    assert tokens("Order ORD-12345 ships") == ["order", "ord-12345", "ships"]
    assert tokens("我的订单号是ORD-88123，") == ["我", "的", "订", "单", "号", "是", "我的", "的订", "订单", "单号", "号是",
                                              "ord-88123"]
    assert index_text("预算500元") == "预 算 预算 500 元"


def test_query_terms_drop_stop_words_and_keep_what_identifies():
    assert query_terms("What is the code for the storage unit?") == ["code", "storage", "unit"]
    assert query_terms("where is ORD-12345 now") == ["ord-12345"]
    assert query_terms("我婶婶的生日") == ["我婶", "婶婶", "婶的", "的生", "生日"]
    assert query_terms("辣") == ["辣"]
    assert query_terms("the of to") == []


def test_chinese_facts_and_archive_are_found_by_a_two_character_word(store):
    mem = Memory("s", user="li", store=store, budget=2048, tools=[])
    mem.add(user("我的预算不超过500元。"))
    mem.add(assistant("好的。"))
    mem.add(user("我的订单号是ORD-88123，明天到。"))
    assert any("预算" in f.value for f in mem.facts(query="预算"))
    other = Memory("s2", user="li", store=store, budget=2048, tools=[])  # the first session's messages are not hot here
    assert any("ORD-88123" in h.text for h in other.retrieve("ORD-88123", 5))
    assert any("预算" in h.text for h in other.retrieve("预算是多少", 5))
    mem.close()
    other.close()


def test_a_note_in_one_chinese_script_is_found_by_a_query_in_the_other(store):
    # a user in Taiwan writes Traditional characters; a model often calls retrieve in Simplified ones
    mem = Memory("s", user="mei", store=store, budget=2048, tools=[])
    for i in range(20):
        mem.archive(f"第{i}次散步的时候天气不错，公园里人很多。")
    mem.archive("我的護照放在書房的抽屜裡。")
    mem.archive("备用钥匙在门口的花盆下面。")
    mem.add(user("我的預算不超過五百元。"))
    for query, said in [("护照", "護照"), ("護照", "護照"), ("鑰匙", "备用钥匙"), ("抽屉", "護照")]:
        hits = mem._archival.search(query, 3, mode="keyword")
        assert hits and said in hits[0].text, (query, [h.text for h in hits])
    assert any("預算" in f.value for f in mem.facts(query="预算"))
    assert not mem._archival.search("签证", 3, mode="keyword")  # a word in neither script matches nothing
    mem.close()


def test_an_id_typed_full_width_or_with_another_hyphen_is_found_as_typed_in_ascii(store):
    # a Chinese or Japanese input method types "ＯＲＤ－８８１２３"; models write "BK‑55120" with
    # U+2011 (non-breaking hyphen): the identifier net, the facts and keyword search read both
    # as the ASCII id a user or a model types later, and the text is kept as written
    assert tokens("订单号是ＯＲＤ－８８１２３，") == ["订", "单", "号", "是", "订单", "单号", "号是", "ord-88123"]
    assert query_terms("BK\u201155120 or ＢＫ－５５１２１") == ["bk-55120", "bk-55121"]
    mem = Memory("s", user="li", store=store, budget=2048, tools=[])
    for i in range(30):  # other ids, so that a search that ignored the id would rank them alike
        mem.add(user(f"Order ORD-7{i:04d} and booking BK-6{i:04d} are for another trip."))
    mem.add(user("我的订单号是ＯＲＤ－８８１２３，明天到。"))
    mem.add(assistant("Your booking BK\u201155120 is confirmed."))
    assert "ＯＲＤ－８８１２３" in [f.key for f in mem.facts(query="ORD-88123")]
    for query, said in [("ORD-88123", "ＯＲＤ－８８１２３"), ("ｂｋ－５５１２０", "BK\u201155120")]:
        hits = mem._archival.search(query, 3, mode="keyword")
        assert hits and said in hits[0].text, (query, [h.text for h in hits])
    assert mem.history()[-2].text == "我的订单号是ＯＲＤ－８８１２３，明天到。"
    mem.close()


def test_a_long_message_is_searched_by_its_question_at_the_end(store):
    # chatter first, the question last: the question's terms are not cut off by the chatter's
    mem = Memory("s", user="li", store=store, budget=2048, tools=[])
    for who, day in [("婶婶", "5月29号"), ("舅舅", "3月2号"), ("表哥", "8月1号")]:
        mem.add(user(f"我{who}的生日是{day}。"))
        mem.add(assistant("记下了。"))
    later = Memory("s2", user="li", store=store, budget=2048, tools=[])
    chatter = ("哇，最近天气真好，周末去公园走了走，湖边的柳树都发芽了，空气也特别清新。晚上吃什么好呢？"
               "对了，上次买的那本小说还没看完。")
    query = chatter + "话说回来，我婶婶的生日是哪天？"
    assert "婶婶" not in query_terms(query, 32) and "婶婶" in query_terms(query)  # past the first 32 terms
    hits = later.retrieve(query, 1)
    assert hits and "婶婶" in hits[0].text
    mem.close()
    later.close()


def test_english_search_is_unchanged_by_stop_words(store):
    mem = Memory("s", user="ana", store=store, budget=2048, tools=[])
    mem.add(user("The gym locker code is 4471."))
    mem.add(assistant("Noted."))
    later = Memory("s2", user="ana", store=store, budget=2048, tools=[])
    hits = later.retrieve("what was the locker code at the gym", 3)
    assert hits and "4471" in hits[0].text
    mem.close()
    later.close()


@pytest.mark.skipif(bool(POSTGRES), reason="builds an older SQLite store by hand")
def test_an_older_store_gets_the_new_index_and_loses_the_old_one(tmp_path):
    db = tmp_path / "old.db"
    mem = Memory("s", user="ana", store=str(db), budget=2048, tools=[])
    mem.add(user("My passport number is X4471-2290."))
    mem.close()
    conn = sqlite3.connect(db)  # as a store written before this index: the old FTS tables, no new one
    conn.execute("DROP TABLE memos_archive_kw_vocab")
    conn.execute("DROP TABLE memos_archive_kw")
    conn.execute("CREATE VIRTUAL TABLE memos_archive_fts USING fts5(namespace UNINDEXED, item_id UNINDEXED, text)")
    conn.execute("INSERT INTO memos_archive_fts VALUES ('ana', 'x', 'My passport number is X4471-2290.')")
    conn.commit()
    conn.close()
    from memos.text import search

    search._CREATED.clear()  # a new process
    again = Memory("s2", user="ana", store=str(db), budget=2048, tools=[])
    assert any("X4471-2290" in h.text for h in again.retrieve("passport X4471-2290", 3))
    again.close()
    names = {r[0] for r in sqlite3.connect(db).execute("SELECT name FROM sqlite_master")}
    assert "memos_archive_kw" in names and "memos_archive_fts" not in names


def test_keyword_search_survives_its_term_counts_being_cleared_by_another_thread(store):
    class Cleared(dict):  # another thread empties the cache right after each write
        def __setitem__(self, key, value):
            super().__setitem__(key, value)
            self.clear()

    mem = Memory("s", store=store, budget=2048, tools=[])
    mem.archive("The spare key is under the blue flowerpot.")
    mem.archive("备用钥匙在门口的花盆下面。")
    mem._archival.keywords._df = Cleared()
    assert "flowerpot" in mem._archival.search("spare key flowerpot", 3, mode="keyword")[0].text
    assert "花盆" in mem._archival.search("钥匙花盆", 3, mode="keyword")[0].text
    mem.close()
