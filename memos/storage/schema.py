"""The database: memos' own SQLAlchemy ``MetaData``, engines, and the schema kept current.

memos' tables (the message log, summaries and compaction events in :mod:`memos.storage.log`, the
facts, the archive) are declared on :data:`METADATA`, not on SQLModel's global metadata.
:func:`make_engine` opens any SQLAlchemy URL (a plain path is a SQLite file, in WAL mode
with a busy timeout and ``secure_delete``); :func:`ensure_schema` creates what is missing,
and adds the columns and indexes of newer versions to an older store, under a lock.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from sqlalchemy import MetaData, event, make_url, text
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.exc import ArgumentError, NoSuchModuleError
from sqlalchemy.orm import registry
from sqlalchemy.pool import StaticPool
from sqlmodel import SQLModel, create_engine
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_random_exponential

from ..core.errors import StoreNotFound

__all__ = ["METADATA", "MemosModel", "ensure_schema", "make_engine"]


class MemosModel(SQLModel, registry=registry()):
    """The base of memos' tables. They live on their own :data:`METADATA`, not on SQLModel's
    global one: an application's ``SQLModel.metadata.create_all()`` does not create memos'
    tables in its database, and memos never creates the application's tables in its store."""


METADATA: MetaData = MemosModel.metadata


_SCHEMA_LOCK_KEY = 0x6D656D6F73  # "memos": the PostgreSQL advisory lock that serialises schema changes


def _lock_schema(conn: Connection) -> None:
    """Hold the database's write lock for the rest of ``conn``'s transaction, so processes
    opening a new store at once create its tables one after another (each then sees the
    tables the first created) instead of racing between "does it exist" and "create"."""
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("BEGIN IMMEDIATE")
    elif conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _SCHEMA_LOCK_KEY})


def ensure_schema(engine: Engine) -> None:
    """Create memos' tables where missing and add columns and indexes newer than the store, in one
    transaction under the schema lock (safe when several processes open a store at once)."""
    with engine.connect() as conn:
        _lock_schema(conn)
        METADATA.create_all(conn)
        _add_missing_columns(conn)
        for table in METADATA.sorted_tables:  # indexes added since an older store was created
            for index in table.indexes:
                index.create(conn, checkfirst=True)
        conn.commit()


def _add_missing_columns(conn: Connection) -> None:
    """Columns added to memos' tables since a store was created get added to it (with
    their default), so an older store opens without a migration tool."""
    from sqlalchemy import inspect

    insp = inspect(conn)
    tables = set(insp.get_table_names())
    for table in METADATA.sorted_tables:
        if table.name not in tables:
            continue
        have = {c["name"] for c in insp.get_columns(table.name)}
        for column in table.columns:
            if column.name in have:
                continue
            arg = getattr(column.default, "arg", None)
            default = None if callable(arg) else arg
            ddl = f"ALTER TABLE {table.name} ADD COLUMN {column.name} {column.type.compile(conn.dialect)}"
            if default is not None:
                ddl += f" DEFAULT {json.dumps(default) if isinstance(default, str) else default}".replace('"', "'")
            conn.execute(text(ddl))


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA busy_timeout=10000")
    if str(cur.execute("PRAGMA journal_mode").fetchone()[0]).lower() not in ("wal", "memory"):
        # WAL is a property of the file: only a new store switches, and SQLite answers "locked"
        # at once (without waiting) when other connections are opening it at that moment
        for attempt in Retrying(retry=retry_if_exception(sqlite_busy), stop=stop_after_delay(30),
                                wait=wait_random_exponential(0.01, 0.5), reraise=True):
            with attempt:
                cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    # deleted and overwritten content is zeroed on disk, so forgetting leaves no bytes behind
    cur.execute("PRAGMA secure_delete=ON")
    cur.close()


def sqlite_busy(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite saying another connection holds the lock ("database is
    locked" / "busy"), raised by sqlite3 or wrapped by SQLAlchemy: worth waiting and retrying."""
    orig = getattr(exc, "orig", exc)
    return isinstance(orig, sqlite3.OperationalError) and ("locked" in str(orig) or "busy" in str(orig))


def in_memory(database: str | URL | Engine) -> bool:
    """Whether a database URL (or an engine's) names an SQLite database held in memory
    (``sqlite://``, ``sqlite:///:memory:``)."""
    try:
        url = make_url(database.url if isinstance(database, Engine) else database)
    except ArgumentError:
        return False
    return url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")


def make_engine(store: str | Path, *, create_folder: bool = False) -> Engine:
    """An engine for an SQLAlchemy URL, or for a SQLite file when given a path (the file is
    made on first use; its folder must exist, or is made with ``create_folder``). Raises
    :class:`~memos.core.errors.StoreNotFound` for a path whose folder does not exist, and
    ``ValueError`` for anything else (another type, an empty path, a folder, a URL SQLAlchemy
    cannot open)."""
    if not isinstance(store, (str, os.PathLike)) or not str(store).strip():
        raise ValueError(f"store must be a SQLite file path or a database URL, got {store!r}")
    url = str(store)
    if "://" not in url:
        path = Path(url).expanduser()
        if url != ":memory:":
            if path.is_dir():
                raise ValueError(f"store {url!r} is a folder; give a SQLite file path, such as {str(path / 'memos.db')!r}")
            if create_folder:
                path.parent.mkdir(parents=True, exist_ok=True)
            elif not path.parent.is_dir():
                raise StoreNotFound(f"no folder {str(path.parent)!r} for the store {path.name!r} (a typo?): create the "
                                    "folder first, or pass MemoryStore(path, create_folder=True) to have it made")
            url = f"sqlite:///{path}"
        else:
            url = "sqlite://"
    try:
        if in_memory(url):
            # one database, whichever thread asks: SQLAlchemy's default pool for it gives
            # each thread a connection, and so an empty database of its own
            engine = create_engine(url, poolclass=StaticPool, connect_args={"check_same_thread": False})
        else:
            engine = create_engine(url)
    except (ArgumentError, NoSuchModuleError) as exc:
        raise ValueError(f"store {url!r} cannot be opened: {exc}") from exc
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine
