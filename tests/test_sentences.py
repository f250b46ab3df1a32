"""Sentence splitting: at sentence ends in English and Chinese, not after a title's dot."""

from __future__ import annotations

import pytest

from memos.core.messages import Message
from memos.text.sentences import split_sentences, without_code
from memos.tiers.extract import RuleExtractor


@pytest.mark.parametrize(("text", "sentences"), [
    ("My name is Tom. Nice to meet you.", ["My name is Tom.", "Nice to meet you."]),
    ("Book the first. Then rest!", ["Book the first.", "Then rest!"]),
    ("Only see Dr. Patel for checkups. Thanks.", ["Only see Dr. Patel for checkups.", "Thanks."]),
    ("Use metric units, e.g. km and kg.", ["Use metric units, e.g. km and kg."]),
    ("We land in St. Louis at 9; Mr. Ortiz meets us.", ["We land in St. Louis at 9;", "Mr. Ortiz meets us."]),
    ("我的医生是Dr. Li。周五见", ["我的医生是Dr. Li。", "周五见"]),
    ("Mr.\nSmith", ["Mr.", "Smith"]),  # a line break ends a sentence whatever precedes it
])
def test_sentences_end_at_their_punctuation_and_not_after_a_title(text, sentences):
    assert split_sentences(text) == sentences


def test_a_rule_naming_a_doctor_is_kept_whole():
    text = "Hi again. Quick note before the weekend. Only book appointments with Dr. Patel. Thanks a lot!"
    found = RuleExtractor().extract([Message("m", 0, {"role": "user", "content": text}, 0)])
    assert [c.value for c in found.candidates if c.kind == "constraint"] == ["Only book appointments with Dr. Patel."]


def test_clauses_split_at_commas_not_inside_numbers():
    from memos.text.sentences import split_clauses

    assert split_clauses("The budget cap of 1,000 is gone, spend up to 1,500.") == [
        "The budget cap of 1,000 is gone", "spend up to 1,500."]
    assert split_clauses("报告不用表格了，直接写段落、列要点就行。") == ["报告不用表格了", "直接写段落", "列要点就行。"]
    assert split_clauses("No commas here.") == ["No commas here."]


@pytest.mark.parametrize(("text", "prose"), [
    ("Here:\n```python\nif not n in memo:\n    return\n```\nAlways add type hints.", "Here:\n\nAlways add type hints."),
    ("a\n~~~~\nb\n~~~\nstill code\n~~~~\nc", "a\n\nc"),  # a shorter fence closes nothing
    ("a\n   ```\ncode\n   ```  \nb", "a\n\nb"),  # indented by up to three spaces, spaces after
    ("a\n```js\nnever closed; ends at the end", "a\n\n"),
    ("```x``` is inline code\nAlways add type hints.", "```x``` is inline code\nAlways add type hints."),
    ("No fence here: only ``` in a line.", "No fence here: only ``` in a line."),
])
def test_without_code_leaves_out_fenced_code_blocks(text, prose):
    assert without_code(text) == prose
