"""The packaged demo session and its replay."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from memos.cli.app import main
from memos.demo import CONSTRAINTS, IDENTIFIERS, demo_session, run_demo

pytestmark = pytest.mark.slow  # each runs the packaged demo (a minute or more)


def test_the_session_is_long_and_has_what_the_demo_needs():
    turns = demo_session()
    assert len(turns) >= 200
    assert demo_session() == turns  # deterministic
    calls = [s for t in turns for s in t.steps if s.tool_calls]
    assert len(calls) > 80
    assert [t.user for t in turns[1:1 + len(CONSTRAINTS)]] == list(CONSTRAINTS)
    tags = [t.tag for t in turns]
    assert tags.index("correction") > tags.index("address")
    assert tags.index("recall") > len(turns) - 20
    late = " ".join(t.user + " ".join(s.reply or "" for s in t.steps) for t in turns[-15:])
    assert "ORD-12345" in late


@pytest.fixture(scope="module")
def replay(tmp_path_factory):
    store = tmp_path_factory.mktemp("demo") / "demo.db"
    return store, run_demo(turns=220, budget=4096, store=store)


def test_replay_stays_in_budget_with_no_orphans_and_every_constraint(replay):
    _, result = replay
    assert result.orphan_prompts == 0
    assert result.over_budget_prompts == 0 and result.max_prompt_tokens <= 4096
    assert all(result.constraints_present.values()), result.constraints_present
    # The user asks for hotels "within my budget" in eight neighbourhoods: a request that invokes
    # a rule, not a rule. Each one taken for a rule is a constraint more: the weights before the
    # corpus had such requests left 14 current constraints (5 stated); now 11 with the embedding
    # model, 6 with the n-grams alone.
    assert result.facts_by_kind.get("constraint", 0) <= len(CONSTRAINTS) + 6, result.facts_by_kind
    assert result.demotions > 5
    assert result.ratio < 0.15
    expected = 1 + sum(1 + sum(1 + len(s.tool_calls) for s in t.steps) for t in demo_session())
    assert result.messages_logged == expected
    final = " ".join(str(m.get("content")) for m in result.final_context)
    assert IDENTIFIERS[0] in final
    # the scripted agent's retrieve brings the tracking number from turn 9 back into its context
    (r,) = result.retrieves
    assert r["turn"] > 180 and r["hits"]
    assert "1Z999AA10123456784" in r["recalled_identifiers"]


def test_cli_demo_prints_the_table_and_writes_a_png(tmp_path, capsys):
    assert main(["demo", "--turns", "60", "--budget", "2048", "--out", str(tmp_path), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "prompts with orphan tool messages" in out and "constraints present at the end" in out
    png = tmp_path / "prompt_tokens.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert str(png.resolve()) in out.replace("\n", "")


def test_cli_rejects_bad_arguments_with_a_message():
    proc = subprocess.run([sys.executable, "-m", "memos", "demo", "--turns", "5"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "--turns must be at least 40" in proc.stderr


def test_every_identifier_of_the_session_is_in_the_context_or_the_facts(replay):
    from memos import Memory
    from memos.text.patterns import find_identifiers

    store, result = replay
    texts = []
    for turn in demo_session():
        texts.append(turn.user)
        for step in turn.steps:
            texts.extend(c["function"]["arguments"] for c in step.tool_calls)
            texts.extend(step.results)
            texts.append(step.reply or "")
    idents = {i for t in texts for i in find_identifiers(t)}
    assert len(idents) > 100 and "ORD-12345" in idents and "1Z999AA10123456784" in idents
    mem = Memory("demo", user="maya", store=store, budget=4096)
    context = json.dumps(result.final_context, ensure_ascii=False)
    facts = mem.facts(include_history=True)
    findable = context + "\n".join(f.key + "\n" + f.value for f in facts)
    missing = sorted(i for i in idents if i not in findable and json.dumps(i)[1:-1] not in findable)
    assert missing == []
    # the corrected address is the current one; the two before it are history
    addresses = [f for f in facts if f.key == "address"]
    assert [f.value for f in addresses if f.status == "current"] == ["42 Rua do Ouro, 1100-060 Lisbon"]
    assert len([f for f in addresses if f.status == "superseded"]) == 2
    assert result.identifiers_missing == []
    mem.close()


def test_a_demo_run_without_a_store_leaves_nothing_behind(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    result = run_demo(turns=40, budget=2048)
    assert result.messages_logged > 40  # it ran, on a store of its own
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("memos-demo-")] == []
