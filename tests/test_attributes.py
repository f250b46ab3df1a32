"""The attribute classifier: "my X is Y" kept as a fact when it states an attribute, not talk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.attributes import evaluate, load_corpus
from memos.core.messages import Message
from memos.text.classifiers.attributes import AttributeClassifier, find_attributes
from memos.tiers.extract import RuleExtractor

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "attributes.json"


def facts(text: str, **kwargs: bool) -> list[tuple[str, str]]:
    found = RuleExtractor(**kwargs).extract([Message("m", 0, {"role": "user", "content": text}, 0)])
    return [(c.key, c.value) for c in found.candidates if c.kind == "fact"]


@pytest.mark.parametrize(("sentence", "pairs"), [
    ("My name is Li Wei and my birthday is May 29.", [("name", "Li Wei"), ("birthday", "May 29")]),
    ("My height is 1.78 m.", [("height", "1.78 m")]),
    ("My doctor is Dr. Alvarez.", [("doctor", "Dr. Alvarez")]),
    ("My work email is j.ortiz@acme.io.", [("work email", "j.ortiz@acme.io")]),
    ("My favourite bands are Muse and Blur.", [("favourite bands", "Muse and Blur")]),
    ("我婶婶的生日是5月29号。", [("婶婶的生日", "5月29号")]),
    ("我最喜欢的作家是余华。", [("最喜欢的作家", "余华")]),
    ("我觉得还行。", []),
    # an adverb between the copula and the value is part of neither
    ("Oh wait, my number is actually +351 912 345 679.", [("number", "+351 912 345 679")]),
    ("My address is now 42 Rua do Ouro.", [("address", "42 Rua do Ouro")]),
    ("My email is still ana@example.org.", [("email", "ana@example.org")]),
    ("My name is Emily Watson.", [("name", "Emily Watson")]),
    ("我的手机号其实是13812345678。", [("手机号", "13812345678")]),
    ("我的邮箱现在是li@example.cn。", [("邮箱", "li@example.cn")]),
    ("我的表妹就是高中毕业的。", [("表妹", "高中毕业的")]),
])
def test_the_frame_finds_each_key_and_value(sentence, pairs):
    assert find_attributes(sentence) == pairs


def test_the_corpus_splits_share_no_sentence_and_every_sentence_is_in_the_frame():
    rows = load_corpus()  # raises for a sentence out of the frame
    assert len({r["id"] for r in rows}) == len(rows)
    train = {r["text"] for r in rows if r["split"] == "train"}
    assert not train & {r["text"] for r in rows if r["split"] == "test"}
    for lang in ("en", "zh"):
        labels = [r["label"] for r in rows if r["lang"] == lang and r["split"] == "test"]
        assert labels.count("attribute") >= 20 and labels.count("talk") >= 19


def test_on_the_held_back_split_it_keeps_attributes_and_drops_most_talk(tmp_path):
    now = evaluate(data=tmp_path / "absent")["results"]
    every = evaluate(lambda key, value: True, data=tmp_path / "absent")["results"]
    for lang in ("en", "zh"):
        assert now[f"test/{lang}"]["recall"] >= 0.9
        assert now[f"test/{lang}"]["precision"] >= every[f"test/{lang}"]["precision"] + 0.25


def test_the_recorded_results_are_those_of_the_code(tmp_path):
    recorded = json.loads(RESULTS.read_text())
    now = evaluate(data=tmp_path / "absent")["results"]
    assert {k: v for k, v in recorded["results"].items() if not k.startswith("benchmark/")} == now
    assert recorded["params"]["thresholds"] == AttributeClassifier().thresholds


def test_the_extractor_keeps_attributes_and_not_talk():
    assert facts("My seat is 14C and my gate is B22.") == [("seat", "14C"), ("gate", "B22")]
    assert facts("My head is spinning after that meeting.") == []
    assert facts("我的生日是5月29号。") == []  # Chinese: only when asked for, but for a phone number or email
    assert facts("我的手机号是138 1234 5678，有事打我。") == [("手机号", "138 1234 5678")]
    assert facts("我的生日是5月29号。", chinese_attributes=True) == [("生日", "5月29号")]
