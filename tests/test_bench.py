"""The benchmark scorers on hand-made cases, and a smoke run of LoCoMo on a small slice."""

from __future__ import annotations

import json

import pytest

from memos.bench.scoring import answer_contained, context_text, evidence_recall
from memos.cli import main
from tests.conftest import SHARED

LOCOMO = SHARED / "data" / "locomo" / "locomo7.json"


def test_a_context_holding_the_evidence_scores_1_and_one_without_scores_0():
    ctx = context_text([{"role": "system", "content": "Caroline:   I went to the LGBTQ support group\nyesterday."},
                        {"role": "user", "content": "When did Caroline go?"}])
    assert evidence_recall(ctx, ["I went to the LGBTQ support group yesterday."]) == 1.0
    assert evidence_recall(ctx, ["I painted a sunrise."]) == 0.0
    assert evidence_recall(ctx, ["I went to the LGBTQ support group yesterday.", "I painted a sunrise."]) == 0.5
    assert evidence_recall(ctx, []) is None
    assert answer_contained(ctx, "lgbtq SUPPORT group") and not answer_contained(ctx, "7 May 2023")
    assert answer_contained("He is 2022 years", 2022) and not answer_contained("anything", "")


def test_context_text_reads_parts_and_tool_arguments():
    text = context_text([{"role": "user", "content": [{"type": "text", "text": "part one"}]},
                         {"role": "assistant", "tool_calls": [{"function": {"arguments": '{"q": "ORD-1"}'}}]}])
    assert "part one" in text and "ORD-1" in text


@pytest.mark.skipif(not LOCOMO.is_file(), reason="LoCoMo data is not beside the repository")
def test_locomo_smoke_run_writes_the_documented_shape(tmp_path, capsys):
    out = tmp_path / "locomo.json"
    assert main(["bench", "locomo", "--data", str(LOCOMO), "--budget", "1024,2048", "--conversations", "1",
                 "--questions", "6", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["benchmark"] == "locomo" and result["params"]["budgets"] == [1024, 2048]
    names = [(r["strategy"], r["budget"]) for r in result["results"]]
    assert ("full_history", None) in names and ("memos", 1024) in names and ("memos", 2048) in names
    for r in result["results"]:
        m = r["metrics"]
        for rate in ("evidence_recall", "answer_containment"):
            assert 0.0 <= m[rate] <= 1.0
            for cat in r["by_category"].values():
                assert 0.0 <= cat[rate] <= 1.0
        assert m["questions"] == 6 and m["mean_context_tokens"] > 0 and m["ms_per_turn"] >= 0
        if r["strategy"] != "full_history":
            assert m["over_budget"] == 0 and m["mean_context_tokens"] <= r["budget"]
    full = next(r for r in result["results"] if r["strategy"] == "full_history")
    assert full["metrics"]["evidence_recall"] == 1.0
    assert "evidence recall" in capsys.readouterr().out


def test_bench_rejects_bad_budgets(capsys):
    assert main(["bench", "locomo", "--data", str(LOCOMO), "--budget", "abc"]) == 2
    assert main(["bench", "locomo", "--data", str(LOCOMO), "--budget", "100"]) == 2
    assert main(["bench", "locomo", "--data", "/nonexistent.json"]) == 2
