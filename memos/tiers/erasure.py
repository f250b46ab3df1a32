"""Forgetting that erases: redaction, deletion and scrubbing of a store.

:func:`forget_fact` (behind :meth:`memos.Memory.forget`) redacts a fact's value to
``[forgotten]`` wherever its scope holds it (:func:`erase`: messages, summaries, archived
items with their keyword entries and vectors), deletes the fact, its history and the other
facts holding the value, and scrubs the files (:func:`scrub`). :func:`delete_user` removes
everything of a user. The indexer is paused meanwhile, so no batch writes a vector or holds
a read transaction while the files are scrubbed.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import or_
from sqlalchemy.exc import OperationalError
from sqlmodel import Session, col, select
from tenacity import Retrying, retry_if_exception, retry_if_result, stop_after_delay, wait_fixed

from ..storage.log import CompactionRow, MessageRow, SessionRow, SummaryRow, namespace_key
from ..storage.schema import sqlite_busy
from ..text.patterns import find_identifiers
from ..text.search import KeywordIndex
from .archival import WITHOUT_TOKENS, ArchiveItem, archive_keywords
from .cold import ColdTier, Fact, ForgetRecord, fact_keywords

if TYPE_CHECKING:
    from .shared import TierStore

__all__ = ["REDACTED", "UserDeletion", "delete_user", "erase", "forget_fact", "scrub"]

log = logging.getLogger("memos.store")


@dataclass(frozen=True)
class UserDeletion:
    """What :meth:`memos.MemoryStore.delete_user` removed."""

    user: str
    messages: int
    facts: int
    archive_items: int
    summaries: int


def delete_user(store: TierStore, user: str) -> UserDeletion:
    """Delete everything of ``user``: every session's messages, summaries and compaction
    log, the facts and their history, the archive and its vectors. Nothing of it is left
    in the database files (see :meth:`scrub`). Open sessions of the user start empty."""
    prefix = namespace_key((user,))
    like = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "/%"
    with store.indexer.paused():
        return _delete_user(store, user, prefix, like)


def _delete_user(store: TierStore, user: str, prefix: str, like: str) -> UserDeletion:
    counts: dict[str, int] = {}
    with Session(store.engine) as s:
        item_rows = s.exec(select(ArchiveItem.id, ArchiveItem.namespace).where(
            (col(ArchiveItem.namespace) == prefix) | col(ArchiveItem.namespace).like(like, escape="\\"))).all()
        scopes = sorted({ns for _, ns in item_rows})
        for name, table in (("messages", MessageRow), ("summaries", SummaryRow), ("events", CompactionRow),
                            ("sessions", SessionRow), ("facts", Fact), ("forget", ForgetRecord),
                            ("archive_items", ArchiveItem)):
            ns_col = col(table.namespace)  # type: ignore[attr-defined]
            cond = (ns_col == prefix) | ns_col.like(like, escape="\\")
            rows = list(s.exec(select(table).where(cond)).all())
            counts[name] = len(rows)
            for r in rows:
                s.delete(r)
        for index in _keyword_indexes(store):
            index.remove_namespaces(s, prefix)
        s.commit()
    backend = store.backend() if scopes else None
    if backend is not None:
        for scope in scopes:
            backend.delete(scope)
    store.invalidate_facts(prefix)
    scrub(store)
    store.reload_sessions(lambda mem: mem.namespace[0] == user)
    return UserDeletion(user=user, messages=counts["messages"], facts=counts["facts"],
                        archive_items=counts["archive_items"], summaries=counts["summaries"])


def forget_fact(store: TierStore, cold: ColdTier, fact_id: int, reason: str = "user request") -> ForgetRecord:
    """Forget a fact of ``cold``'s scope everywhere (see :meth:`memos.Memory.forget`): the
    value, its earlier values and the identifiers in them are erased (:meth:`erase`), the
    fact, its history and the other facts holding the value are deleted, and the files
    are scrubbed (:meth:`scrub`). A fact already forgotten returns its record."""
    earlier = next((r for r in cold.forgotten() if r.fact_id == fact_id), None)
    if earlier is not None:  # forgotten already (with another fact that held the same value)
        return earlier
    chain = cold.history(fact_id)
    values = {r.value for r in chain} | {i for r in chain for i in find_identifiers(r.value)}
    with store.indexer.paused():  # no vector write or open read while the files are scrubbed
        erased = erase(store, cold.namespace, sorted(values))
        record = cold.forget(fact_id, reason, erased=erased)
        needles = [v.lower() for v in values if len(v.strip()) >= 3]
        for f in cold.facts(include_history=True):
            if f.id is not None and any(n in f.value.lower() or n in f.key.lower() for n in needles):
                try:
                    cold.forget(f.id, reason)
                except ValueError:  # already deleted with an earlier one's history
                    pass
        scrub(store)
    return record


def erase(store: TierStore, scope: str, values: str | Sequence[str]) -> dict[str, int]:
    """Replace every occurrence of ``values`` (case-insensitive) with ``[forgotten]`` in
    what ``scope`` holds, in one transaction: the messages of its sessions (the log keeps
    the message, with the value redacted), their summaries (every version) and the
    archive (its keyword index too; the vectors are deleted and written again from the
    redacted text). Open sessions of the scope read their state again. Returns how many
    messages, summaries and archive items were changed. Call :meth:`scrub` after. One value
    may be given as a string; a value shorter than three characters is left alone.
    """
    values = [values] if isinstance(values, str) else values
    patterns = [re.compile(re.escape(v), re.IGNORECASE) for v in sorted(set(values), key=len, reverse=True)
                if len(v.strip()) >= 3]
    if not patterns:
        return {"messages": 0, "summaries": 0, "archive_items": 0}

    def redact(text_: str) -> str:
        for p in patterns:
            text_ = p.sub(REDACTED, text_)
        return text_

    def holds(text_: str) -> bool:
        return any(p.search(text_) for p in patterns)

    like = scope.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "/%"
    counts = {"messages": 0, "summaries": 0, "archive_items": 0}
    changed_items: list[str] = []
    with Session(store.engine, expire_on_commit=False) as s:
        def in_scope(column: Any) -> Any:
            return (column == scope) | column.like(like, escape="\\")

        # each value is looked for by SQL first (a LIKE per value), then redacted in Python
        needles = [or_(*[col(MessageRow.data).contains(_json_fragment(v)) for v in values if len(v.strip()) >= 3])]
        for row in s.exec(select(MessageRow).where(in_scope(col(MessageRow.namespace)), *needles)).all():
            data = json.loads(row.data)
            redacted = _redact_json(data, redact)
            if redacted != data:
                row.data = json.dumps(redacted, ensure_ascii=False)
                s.add(row)
                counts["messages"] += 1
        for srow in s.exec(select(SummaryRow).where(in_scope(col(SummaryRow.namespace)))).all():
            if holds(srow.text):
                srow.text = redact(srow.text)
                s.add(srow)
                counts["summaries"] += 1
        for item in s.exec(select(ArchiveItem).options(*WITHOUT_TOKENS).where(ArchiveItem.namespace == scope)).all():
            if holds(item.text):
                item.text = redact(item.text)
                item.indexed = False  # the vector and the token states are written again from the redacted text
                item.token_ids = item.token_states = None
                s.add(item)
                changed_items.append(item.id)
        counts["archive_items"] = len(changed_items)
        keywords = archive_keywords(store.engine)
        keywords.remove(s, changed_items)
        keywords.add(s, [(i, scope, row.text) for i in changed_items if (row := s.get(ArchiveItem, i)) is not None])
        s.commit()
    if changed_items:
        backend = store.backend()
        if backend is not None:
            try:
                backend.delete_ids(scope, changed_items)
            except Exception as exc:  # the rows are redacted; the vectors are rewritten by the next flush
                log.warning("archived vectors could not be deleted (%s); they are rewritten from the redacted text",
                            exc)
        store.archive(scope).schedule()
    store.reload_sessions(lambda mem: mem.scope == scope)
    return counts


def _keyword_indexes(store: TierStore) -> list[KeywordIndex]:
    return [archive_keywords(store.engine), fact_keywords(store.engine)]


def scrub(store: TierStore) -> None:
    """Leave no deleted bytes in the database files. SQLite zeroes the cells it deletes
    (``secure_delete``, set on every connection), but a page it has rebalanced can keep old
    copies of cells in its unused space, and they outlive the row. So the full-text indexes
    are merged (their old segments still hold deleted terms), the file is rebuilt from its
    live rows (``VACUUM``: about 3 s for a 780 MB store of 100,000 archived items, and room
    for a copy of the file meanwhile) and the write-ahead log is checkpointed and truncated.
    On other databases this is the database's own business (``VACUUM`` on PostgreSQL)."""
    if store.engine.dialect.name != "sqlite":
        return
    with store.engine.connect() as conn:
        for index in _keyword_indexes(store):
            index.optimize(conn)
        conn.commit()
    with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        try:  # another connection writing (another process) is waited for, then given up on
            Retrying(stop=stop_after_delay(60), wait=wait_fixed(0.2), retry=retry_if_exception(sqlite_busy),
                     reraise=True)(conn.exec_driver_sql, "VACUUM")
        except OperationalError as exc:
            log.warning("the store could not be rebuilt (%s): deleted values may remain in the unused space of "
                        "its pages until MemoryStore.scrub() runs again", exc)
        # busy: a reader of another connection still holds an older snapshot; wait for it
        busy = Retrying(stop=stop_after_delay(30), wait=wait_fixed(0.05), retry=retry_if_result(bool),
                        retry_error_callback=lambda state: state.outcome.result())(  # type: ignore[union-attr]
            lambda: conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").one()[0])
    if busy:
        log.warning("the write-ahead log could not be checkpointed: a reader kept it busy for 30 s; "
                    "deleted bytes stay in %s-wal until the next checkpoint", store.engine.url.database)


# -- lifecycle -----------------------------------------------------------------


REDACTED = "[forgotten]"


def _json_fragment(value: str) -> str:
    """``value`` as it appears inside a JSON string (the log stores messages as JSON)."""
    return json.dumps(value, ensure_ascii=False)[1:-1]


def _redact_json(data: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(data, str):
        return redact(data)
    if isinstance(data, list):
        return [_redact_json(x, redact) for x in data]
    if isinstance(data, dict):
        return {k: _redact_json(v, redact) for k, v in data.items()}
    return data
