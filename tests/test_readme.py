"""The README's integration snippets, run as they are written, in a fresh folder, against the
OpenAI-speaking test server on 127.0.0.1 (``OPENAI_BASE_URL``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from memos.core.config import DEFAULT_SETTINGS, MemosSettings
from tests.llm_server import FakeOpenAI

ROOT = Path(__file__).resolve().parents[1]


def snippet(name: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(rf"<!-- readme-test: {name} -->\n```python\n(.*?)```", text, re.S)
    assert m, f"no snippet {name!r} in the README"
    return m.group(1)


@pytest.mark.parametrize(("name", "expected"), [
    ("agents", ["OK: I never fly Ryanair.", "From memory:", "Ryanair"]),
    ("mcp", ["Never book anything with Ryanair.", '"status": "ok"']),
    ("langgraph", ["OK: I'm vegetarian.", "From memory:", "vegetarian"]),
    ("responses", ["OK: I never fly Ryanair.", "From memory:", "PNR-55120"]),
])
def test_readme_snippet_runs(tmp_path, name, expected):
    (tmp_path / "snippet.py").write_text(snippet(name), encoding="utf-8")
    with FakeOpenAI() as srv:
        env = {**os.environ, "OPENAI_BASE_URL": srv.url, "OPENAI_API_BASE": srv.url, "OPENAI_API_KEY": "test",
               "OPENAI_AGENTS_DISABLE_TRACING": "1", "PYTHONPATH": str(ROOT),
               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        proc = subprocess.run([sys.executable, "snippet.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for fragment in expected:
        assert fragment in proc.stdout, (fragment, proc.stdout)


def test_the_quick_start_run_twice_keeps_one_system_message_and_the_budget(tmp_path):
    from memos import TokenCounter

    (tmp_path / "quickstart.py").write_text(snippet("quickstart"), encoding="utf-8")
    said = ["I never fly Ryanair; book me trains where you can.", "My booking reference is PNR-55120.",
            *(f"Question {i}: what can I see near the station in Porto on day {i}?" + " Details please." * 20
              for i in range(25))]
    with FakeOpenAI() as srv:
        env = {**os.environ, "OPENAI_BASE_URL": srv.url, "OPENAI_API_KEY": "test", "PYTHONPATH": str(ROOT)}
        for lines in (said, ["Remind me: what was my booking reference?"]):  # a first run, then the user comes back
            proc = subprocess.run([sys.executable, "quickstart.py"], cwd=tmp_path, env=env, input="\n".join(lines) + "\n",
                                  capture_output=True, text=True, timeout=600)
            assert proc.returncode == 0, proc.stderr[-3000:]
        requests = [r for r in srv.requests if r.get("messages")]
    counter = TokenCounter()
    assert len(requests) > len(said)
    for r in requests:
        assert counter.count_messages(r["messages"]) + counter.count_tools(r["tools"]) <= 8192
        assert [m.get("content") for m in r["messages"]].count("You are a travel assistant.") == 1
        assert r["messages"][0]["content"] == "You are a travel assistant."
    assert "PNR-55120" in proc.stdout  # the second run remembers the first


def test_the_configuration_table_lists_every_setting_with_its_default():
    """Every ``MemosSettings`` field is read from ``MEMOS_<FIELD>``; the table in
    docs/configuration.md (which the README links) names each one with the default the code has."""
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8").split("## Every variable", 1)[1].split("\n## ", 1)[0]
    documented = dict(re.findall(r"^\| `(MEMOS_[A-Z_]+)` \| ([^|]+?) \|", text, re.M))
    for f in fields(MemosSettings):
        name = f"MEMOS_{f.name.upper()}"
        assert name in documented, f"{name} is not in docs/configuration.md's table"
        shown, value = documented[name].strip(), getattr(DEFAULT_SETTINGS, f.name)
        if isinstance(value, bool):
            assert shown == str(value).lower(), (name, shown, value)
        elif isinstance(value, (int, float)):
            assert float(shown) == value, (name, shown, value)
        elif value is None:
            assert shown.startswith("unset"), (name, shown)
        elif value == "":
            assert shown == "empty", (name, shown)
        else:
            assert shown == f"`{value}`", (name, shown, value)
