"""The benchmark scorers on hand-made cases, and a smoke run of LoCoMo on a small slice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memos.bench.scoring import answer_contained, context_text, evidence_recall, preference_in_context
from memos.bench.strategies import STRATEGIES
from memos.cli.app import main
from tests.conftest import EMBEDDING_DIR, SHARED, needs_model

LOCOMO = SHARED / "data" / "locomo" / "locomo7.json"
PREFEVAL = SHARED / "data" / "prefeval"


def _rates_in_unit_interval(result: dict, keys: tuple[str, ...]) -> None:
    for r in result["results"]:
        for k in keys:
            assert 0.0 <= r["metrics"][k] <= 1.0, (r["strategy"], k, r["metrics"][k])


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
    assert result["code"]["commit"] or result["code"]["version"]
    for r in result["results"]:  # the per-question scores the metrics are the means of
        items = [q for qs in r["per_question"].values() for q in qs]
        assert len(items) == 6
        assert round(sum(q["answer_contained"] for q in items) / 6, 4) == round(r["metrics"]["answer_containment"], 4)


@pytest.mark.skipif(not LOCOMO.is_file(), reason="LoCoMo data is not beside the repository")
def test_locomo_cross_session_asks_in_a_new_chat(tmp_path):
    out = tmp_path / "cross.json"
    assert main(["bench", "locomo", "--data", str(LOCOMO), "--budget", "2048", "--conversations", "1",
                 "--questions", "12", "--cross-session", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["params"]["cross_session"] is True
    by = {r["strategy"]: r["metrics"] for r in result["results"]}
    # a chat window and a summary buffer only see the new chat: the question and nothing else
    assert by["sliding_window"]["evidence_recall"] == 0.0 and by["summary_buffer"]["evidence_recall"] == 0.0
    assert by["memos"]["evidence_recall"] > 0.3 and by["search"]["evidence_recall"] > 0.3
    assert all(m["over_budget"] == 0 for name, m in by.items() if name != "full_history")


def test_bench_rejects_bad_budgets(capsys):
    assert main(["bench", "locomo", "--data", str(LOCOMO), "--budget", "abc"]) == 2
    assert main(["bench", "locomo", "--data", str(LOCOMO), "--budget", "100"]) == 2
    assert main(["bench", "locomo", "--data", "/nonexistent.json"]) == 2


def test_preference_scorer_needs_the_whole_preference():
    pref = "I refuse to use any beauty products that have been tested on animals."
    ctx = context_text([{"role": "system", "content": "Pinned:\n- i REFUSE to use any beauty products that\nhave been tested on animals."}])
    assert preference_in_context(ctx, pref)
    assert not preference_in_context("I refuse to use any beauty products.", pref)
    assert not preference_in_context(ctx, "")


@pytest.mark.skipif(not PREFEVAL.is_dir(), reason="PrefEval data is not beside the repository")
def test_prefeval_smoke_run_writes_the_documented_shape(tmp_path):
    out = tmp_path / "prefeval.json"
    assert main(["bench", "prefeval", "--data", str(PREFEVAL), "--filler", "4,40", "--budget", "1024",
                 "--per-topic", "1", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["benchmark"] == "prefeval" and result["params"]["fillers"] == [4, 40]
    assert {r["strategy"] for r in result["results"]} == set(STRATEGIES)
    _rates_in_unit_interval(result, ("preference_in_context", "preference_in_context@4", "preference_in_context@40"))
    by = {r["strategy"]: r for r in result["results"]}
    assert by["full_history"]["metrics"]["preference_in_context"] == 1.0
    assert by["memos"]["by_filler"] == {"4": 1.0, "40": 1.0}  # ten preferences, each pinned when stated
    for r in result["results"]:
        assert r["metrics"]["sessions"] == 20 and (r["strategy"] == "full_history" or r["metrics"]["over_budget"] == 0)
        for n in ("4", "40"):
            hits = r["per_preference"][n]
            assert len(hits) == 10 and round(sum(hits) / 10, 4) == round(r["by_filler"][n], 4)


def test_prefeval_rejects_more_filler_than_exists(capsys):
    if not PREFEVAL.is_dir():
        pytest.skip("PrefEval data is not beside the repository")
    assert main(["bench", "prefeval", "--data", str(PREFEVAL), "--filler", "100000", "--per-topic", "1"]) == 2
    assert "filler" in capsys.readouterr().out
    assert main(["bench", "prefeval", "--data", "/nonexistent"]) == 2


@pytest.mark.slow
def test_tokens_smoke_run(tmp_path):
    out = tmp_path / "tokens.json"
    assert main(["bench", "tokens", "--turns", "40", "--budget", "1024", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["benchmark"] == "tokens" and out.with_suffix(".png").stat().st_size > 10_000
    _rates_in_unit_interval(result, ("ratio_to_full_history", "constraints_in_last_prompt"))
    by = {r["strategy"]: r["metrics"] for r in result["results"]}
    assert by["full_history"]["ratio_to_full_history"] == 1.0
    assert by["memos"]["orphan_prompts"] == 0 and by["memos"]["over_budget"] == 0
    assert by["memos"]["max_prompt_tokens"] <= 1024 < by["full_history"]["max_prompt_tokens"]
    assert by["memos"]["cumulative_tokens"] < by["full_history"]["cumulative_tokens"]


@pytest.mark.slow
def test_overhead_smoke_run(tmp_path):
    out = tmp_path / "overhead.json"
    assert main(["bench", "overhead", "--sizes", "60,120", "--turns", "10", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["benchmark"] == "overhead" and [r["strategy"] for r in result["results"]] == ["memos", "memos_no_recall"]
    for r in result["results"]:
        assert set(r["by_size"]) == {"60", "120"}
        for m in r["by_size"].values():
            assert 0 < m["p50_ms"] <= m["p95_ms"] <= m["max_ms"] and m["peak_mb"] > 0 and m["turns"] == 10
    assert main(["bench", "overhead", "--sizes", "x"]) == 2


@pytest.mark.skipif(not LOCOMO.is_file(), reason="LoCoMo data is not beside the repository")
def test_locomo_with_llm_answers_and_judges_through_the_openai_api(tmp_path, monkeypatch):
    from tests.llm_server import FakeOpenAI

    out = tmp_path / "locomo-llm.json"
    with FakeOpenAI() as server:
        monkeypatch.setenv("MEMOS_LLM_BASE_URL", server.url)
        monkeypatch.setenv("MEMOS_LLM_MODEL", "judge-model")
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        assert main(["bench", "locomo", "--data", str(LOCOMO), "--budget", "1024", "--conversations", "1",
                     "--questions", "5", "--llm", "--out", str(out)]) == 0
        answers = [r for r in server.requests if r["messages"][0]["content"].startswith("[memos:answer]")]
        judged = [r for r in server.requests if r["messages"][0]["content"].startswith("[memos:judge]")]
    result = json.loads(out.read_text())
    assert result["params"]["llm"]["model"] == "judge-model" and result["params"]["llm"]["calls"] == len(server.requests)
    assert len(server.requests) == len(answers) + len(judged)  # memory itself stays offline in the benchmark
    assert len(answers) == len(judged) == 5 * len(result["results"])
    assert answers[0]["messages"][-1]["role"] == "user"  # the question comes last, after the strategy's prompt
    for r in result["results"]:
        assert 0.0 <= r["metrics"]["llm_accuracy"] <= 1.0
    full = next(r for r in result["results"] if r["strategy"] == "full_history")["metrics"]["llm_accuracy"]
    window = next(r for r in result["results"] if r["strategy"] == "sliding_window")["metrics"]["llm_accuracy"]
    assert full >= window


def test_locomo_llm_needs_an_endpoint(monkeypatch, capsys):
    for var in ("MEMOS_LLM_BASE_URL", "MEMOS_LLM_MODEL", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    if not LOCOMO.is_file():
        pytest.skip("LoCoMo data is not beside the repository")
    assert main(["bench", "locomo", "--data", str(LOCOMO), "--llm", "--questions", "1", "--conversations", "1"]) == 2
    assert "--llm needs" in capsys.readouterr().out


def test_benchmark_stores_are_removed_when_a_run_ends(tmp_path, monkeypatch):
    import tempfile

    from memos.bench.strategies import make_strategy
    from memos.core.tokens import TokenCounter

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where mkdtemp puts the stores,
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # in the overhead benchmark's worker processes too
    strat = make_strategy("memos", TokenCounter(), 512)
    strat.add({"role": "user", "content": "I keep my passport in the blue drawer."})
    assert strat.context("where is my passport?") and list(tmp_path.iterdir())
    strat.close()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("memos-")]
    assert main(["bench", "overhead", "--sizes", "60", "--turns", "10", "--out", str(tmp_path / "o.json")]) == 0
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("memos-")] == []


def test_the_paired_bootstrap_bounds_the_lead_and_refuses_unpaired_scores():
    from benchmarks.paired import paired_bootstrap

    even = paired_bootstrap([0.5, 1.0, 0.0], [0.5, 1.0, 0.0])
    assert even["difference"] == 0.0 and even["interval_95"] == [0.0, 0.0] and even["a_ahead"] == even["b_ahead"] == 0
    mixed = paired_bootstrap([1.0] * 30 + [0.0] * 10, [0.0] * 20 + [1.0] * 20)
    low, high = mixed["interval_95"]
    assert low < mixed["difference"] == 0.25 < high and (mixed["a_ahead"], mixed["b_ahead"]) == (20, 10)
    with pytest.raises(ValueError):
        paired_bootstrap([1.0], [1.0, 0.0])


@needs_model
def test_results_name_the_embedding_model_the_strategies_used(tmp_path, monkeypatch):
    from memos.bench import strategies

    (tmp_path / "my-model").mkdir()
    (tmp_path / "my-model" / "onnx").symlink_to(EMBEDDING_DIR.resolve() if (EMBEDDING_DIR / "model.onnx").is_file()
                                                else (EMBEDDING_DIR / "onnx").resolve())
    monkeypatch.setattr(strategies, "_SHARED", {})
    monkeypatch.setenv("MEMOS_EMBEDDING_MODEL_DIR", str(tmp_path / "my-model" / "onnx"))
    assert strategies.embedding_model_name() == "my-model"
    monkeypatch.setattr(strategies, "_SHARED", {})
    monkeypatch.setenv("MEMOS_EMBEDDING_MODEL_DIR", str(tmp_path / "nothing-here"))
    assert strategies.embedding_model_name() is None  # keyword search alone


def _memdaily_file(path: Path) -> None:
    """A MemDaily-shaped file written here: two trajectories, each one target among filler."""
    trajectories = []
    for t, (fact, question) in enumerate([("我婶婶的生日是在5月29号。", "我婶婶的生日是啥时候来着？"),
                                          ("我家猫的名字叫年糕。", "我家猫叫什么名字？")]):
        messages = [{"mid": 0, "message": fact}]
        messages += [{"mid": i, "message": f"今天第{i}次提醒自己多喝水，顺便看了一会儿{['书', '电视', '新闻'][i % 3]}。"}
                     for i in range(1, 60)]
        trajectories.append({"tid": t, "message_list": messages,
                             "question_list": [{"qid": 0, "question": question, "target_step_id": [0]}]})
    path.write_text(json.dumps(trajectories, ensure_ascii=False), encoding="utf-8")


def test_memdaily_runs_on_files_of_its_shape_and_names_one_that_is_not(tmp_path, capsys):
    data = tmp_path / "memdaily"
    data.mkdir()
    _memdaily_file(data / "01_toy.json")
    out = tmp_path / "memdaily.json"
    assert main(["bench", "memdaily", "--data", str(data), "--strategies", "sliding_window,bm25,memos",
                 "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["benchmark"] == "memdaily" and result["params"]["files"] == ["01_toy"]
    by = {r["strategy"]: r["metrics"] for r in result["results"]}
    assert set(by) == {"sliding_window", "bm25", "memos"}
    assert all(m["questions"] == 2 and m["over_budget"] == 0 and m["mean_context_tokens"] <= 1024 for m in by.values())
    # both targets are 120 messages back, out of a 1,024-token window, and share words with their question
    assert by["sliding_window"]["target_recall"] == 0.0 and by["memos"]["target_recall"] == 1.0
    per = {r["strategy"]: r["per_question"] for r in result["results"]}
    assert per["memos"] == {"01_toy": [1.0, 1.0]} and per["sliding_window"] == {"01_toy": [0.0, 0.0]}
    (data / "02_other.json").write_text(json.dumps({"results": [0.5]}), encoding="utf-8")
    assert main(["bench", "memdaily", "--data", str(data), "--strategies", "bm25"]) == 1
    said = capsys.readouterr().err
    assert "02_other.json is not a MemDaily file" in said and "Traceback" not in said


@pytest.mark.parametrize("text", ["Creative Commons Attribution-NonCommercial 4.0", '[{"sample_id": "x"}]'])
def test_a_file_that_is_not_locomo_is_named_in_one_line(tmp_path, capsys, text):
    path = tmp_path / "notes.json"
    path.write_text(text, encoding="utf-8")
    assert main(["bench", "locomo", "--data", str(path), "--strategies", "sliding_window", "--budget", "1024"]) == 1
    said = capsys.readouterr().err
    assert "notes.json is not a LoCoMo file" in said and "Traceback" not in said


def _phone_file(path: Path) -> None:
    """Three people tell which phone they use and what they think of it, each asked about it
    the same way; a fourth tells of an appliance."""
    review = "这手机用起来真挺顺滑的，拍照效果我也很满意，电池能用挺久，挺适合我工作之余用用的，就是有些小地方还能再优化优化。"
    trajectories = []
    for t, phone in enumerate(["华为Mate60", "小米12", "OPPOReno7"]):
        trajectories.append({"tid": t, "message_list": [{"mid": 0, "message": f"我用的手机是{phone}。"},
                                                        {"mid": 1, "message": f"{phone}{review}"}],
                             "question_list": [{"qid": 0, "question": "我使用的手机怎么样？", "target_step_id": [0, 1]}]})
    trajectories.append({"tid": 3, "message_list": [{"mid": 0, "message": "我家里的冰箱是LG牌的双门冰箱。"}],
                         "question_list": [{"qid": 0, "question": "我用的家电是啥啊？", "target_step_id": [0]}]})
    path.write_text(json.dumps(trajectories, ensure_ascii=False), encoding="utf-8")


def test_memdaily_ceiling_holds_what_fits_of_the_questions_no_one_can_tell_apart(tmp_path):
    from benchmarks.memdaily_ceiling import ceiling, kind_of

    assert kind_of("哎，最近手机有点卡。不好意思，我真正想问的是：我使用的手机怎么样？") == "手机"
    assert kind_of("我用的美妆产品是啥呀？") == "美妆" and kind_of("我家里都有哪些电器呢？") == "家电"
    assert kind_of("那个生日是07月15日的人，其姓名的有几个字？") is None
    data = tmp_path / "memdaily"
    data.mkdir()
    _phone_file(data / "01_phones.json")
    roomy = ceiling(data, budget=4096)["results"]
    assert roomy["all"]["ceiling"] == 1.0
    tight = ceiling(data, budget=300)["results"]["files"][0]
    phones, appliances = tight["by_kind"]["手机"], tight["by_kind"]["家电"]
    assert phones["questions"] == 3 and phones["target_messages"] == 6
    # the three short statements fit, not the three reviews: more than half, less than all
    assert 0.5 <= phones["ceiling"] < 1.0
    assert appliances["ceiling"] == 1.0  # asked of another kind of thing: not among the phones


@pytest.mark.skipif(not (SHARED / "data" / "memdaily").is_dir(), reason="needs ../shared/data/memdaily")
def test_the_recorded_memdaily_ceiling_is_what_the_data_gives():
    from benchmarks.memdaily_ceiling import ceiling

    doc = json.loads((Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "memdaily_ceiling.json").read_text())
    for start, recorded in doc["results"].items():
        now = ceiling(SHARED / "data" / "memdaily", start=int(start), budget=doc["params"]["budget"])["results"]
        assert recorded["all"]["ceiling"] == now["all"]["ceiling"]
        assert [f["ceiling"] for f in recorded["files"]] == [f["ceiling"] for f in now["files"]]


def test_a_results_file_names_the_commit_it_measured(tmp_path):
    import json
    import subprocess
    from pathlib import Path

    from memos.cli.bench import write_results

    root = Path(__file__).resolve().parents[1]
    path = write_results({"benchmark": "x", "params": {"budget": 1024}, "results": []}, "x", str(tmp_path / "x.json"),
                         say=lambda _: None)
    code = json.loads(path.read_text())["code"]
    if not (root / ".git").exists():
        assert code == {"version": __import__("memos").__version__}
        return
    head = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    assert code["commit"] == head and isinstance(code["uncommitted_changes"], bool)
