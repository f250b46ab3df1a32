"""The packaged demo session and its replay."""

from __future__ import annotations

import subprocess
import sys

from memos.cli import main
from memos.demo import CONSTRAINTS, IDENTIFIERS, demo_session, run_demo


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


def test_replay_stays_in_budget_with_no_orphans_and_every_constraint(tmp_path):
    result = run_demo(turns=220, budget=4096, store=tmp_path / "demo.db")
    assert result.orphan_prompts == 0
    assert result.over_budget_prompts == 0 and result.max_prompt_tokens <= 4096
    assert all(result.constraints_present.values()), result.constraints_present
    assert result.demotions > 5
    assert result.ratio < 0.15
    expected = 1 + sum(1 + sum(1 + len(s.tool_calls) for s in t.steps) for t in demo_session())
    assert result.messages_logged == expected
    final = " ".join(str(m.get("content")) for m in result.final_context)
    assert IDENTIFIERS[0] in final


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
