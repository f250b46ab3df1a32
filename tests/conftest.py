from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memos import Memory

SHARED = Path(__file__).resolve().parents[2] / "shared"
MODEL_DIR = SHARED / "models" / "all-MiniLM-L6-v2" / "onnx"
DATA_DIR = SHARED / "data"
# The real ONNX model from ../shared (no network here); tests never download anything.
os.environ.setdefault("MEMOS_EMBEDDING_MODEL_DIR", str(MODEL_DIR))
EMBEDDING_DIR = Path(os.environ["MEMOS_EMBEDDING_MODEL_DIR"])  # what the tests and memos use
HAVE_MODEL = (EMBEDDING_DIR / "model.onnx").is_file() or (EMBEDDING_DIR / "onnx" / "model.onnx").is_file()
needs_model = pytest.mark.skipif(
    not HAVE_MODEL,
    reason=f"needs the all-MiniLM-L6-v2 ONNX model: set MEMOS_EMBEDDING_MODEL_DIR to its folder "
           f"(looked in {os.environ['MEMOS_EMBEDDING_MODEL_DIR']})",
)
needs_data = pytest.mark.skipif(
    not DATA_DIR.is_dir(), reason=f"needs the benchmark data in {DATA_DIR} (the shared folder beside the checkout)"
)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def call(call_id: str, name: str = "lookup", **args: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def tool_chain(prefix: str, n: int = 1, result: str = "result", name: str = "lookup") -> list[dict[str, Any]]:
    """An assistant message with ``n`` tool calls followed by all their results."""
    calls = [call(f"{prefix}-{i}", name, i=i) for i in range(n)]
    msgs: list[dict[str, Any]] = [{"role": "assistant", "content": None, "tool_calls": calls}]
    msgs += [{"role": "tool", "tool_call_id": c["id"], "content": result if n == 1 else f"{result} {i}"}
             for i, c in enumerate(calls)]
    return msgs


# .ci/run runs the storage and end-to-end tests again against a PostgreSQL server
# (MEMOS_TEST_POSTGRES_URL: a URL of its maintenance database) and the archival tests
# against a Chroma server (MEMOS_TEST_CHROMA_URL); each test gets a database and a
# collection prefix of its own there.
POSTGRES = os.environ.get("MEMOS_TEST_POSTGRES_URL")
CHROMA = os.environ.get("MEMOS_TEST_CHROMA_URL")


@pytest.fixture(autouse=True)
def _chroma_server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if CHROMA:
        monkeypatch.setenv("MEMOS_CHROMA_URL", CHROMA)
        monkeypatch.setenv("MEMOS_CHROMA_PREFIX", f"t{uuid.uuid4().hex[:12]}")
    elif POSTGRES:
        monkeypatch.setenv("MEMOS_CHROMA_PATH", str(tmp_path / "chroma"))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[str]:
    if not POSTGRES:
        yield str(tmp_path / "memos.db")
        return
    from sqlalchemy import create_engine, text

    admin = create_engine(POSTGRES, isolation_level="AUTOCOMMIT")
    name = f"memos_test_{uuid.uuid4().hex[:12]}"
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    yield str(admin.url.set(database=name).render_as_string(hide_password=False))
    with admin.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    admin.dispose()


@pytest.fixture
def engine(store: str) -> Iterator[Any]:
    """The engine of a :class:`memos.storage.log.Store` on ``store``, its connections released after
    the test (a PostgreSQL test database is dropped then)."""
    from memos.storage.log import Store

    opened = Store(store)
    yield opened.engine
    opened.close()


@pytest.fixture
def make_memory(store: str) -> Iterator[Callable[..., Memory]]:
    opened: list[Memory] = []

    def make(**kwargs: Any) -> Memory:
        kwargs.setdefault("store", store)
        kwargs.setdefault("tools", [])  # these sessions' requests carry no tool schemas unless a test says so
        mem = Memory(kwargs.pop("session", "s1"), **kwargs)
        opened.append(mem)
        return mem

    yield make
    for m in opened:
        m.close()
