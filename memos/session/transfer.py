"""Looking into a session and moving it: the snapshot ``memos inspect`` prints, and the
JSONL that ``memos export`` writes and ``memos import`` reads.

The JSONL has one message per line, in order: the OpenAI message plus ``id``, ``seq`` and
``time`` (ISO 8601, UTC). Importing validates every message as :meth:`Memory.add` does
and adds them in order, so the pager runs as it would have live.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from typing import Any

from ..core.errors import InvalidMessage
from ..tiers.hot import render_text
from .memory import Memory

__all__ = ["EXPORT_KEYS", "HEADER_KEY", "export_header", "export_messages", "import_messages", "read_header", "snapshot"]

EXPORT_KEYS = ("id", "seq", "time")
# the key of an export's first line, which tells whose session it was and its budget
HEADER_KEY = "memos_export"
_IMPORT_BATCH = 200


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _preview(data: dict[str, Any], chars: int = 160) -> str:
    text = render_text(data)  # an image as [image], never the bytes of its data URL
    return text if len(text) <= chars else text[: chars - 1] + "…"


def snapshot(mem: Memory) -> dict[str, Any]:
    """The tiers of a session as JSON-able data: hot messages, the summary with its version,
    pinned messages, pinned and current facts, archival counts, the compaction log, stats."""
    hot = mem.hot()
    st, counts = mem.stats(), mem.archive_counts()
    summary = mem.summary_version()
    return {
        "namespace": {"user": mem.namespace[0], "agent": mem.namespace[1], "session": mem.namespace[2]}
        if len(mem.namespace) == 3 else list(mem.namespace),
        "stats": {k: getattr(st, k) for k in st.__dataclass_fields__},
        "hot": [{"id": m.id, "seq": m.seq, "role": m.role, "tokens": m.tokens, "compacted": mem.is_compacted(m.id),
                 "pinned": m.pinned, "preview": _preview(m.data)} for m in hot],
        "pinned_messages": [{"id": m.id, "seq": m.seq, "role": m.role, "preview": _preview(m.data)}
                            for m in mem.pinned_messages()],
        "summary": {"version": summary.version, "kind": summary.kind, "tokens": summary.tokens,
                    "through_seq": summary.through_seq, "text": summary.text} if summary else None,
        "facts": [{"id": f.id, "kind": f.kind, "key": f.key, "value": f.value, "pinned": f.pinned,
                   "source_seq": f.source_seq, "confidence": f.confidence} for f in mem.facts()],
        "archival": {"items": counts.items, "waiting_for_vectors": counts.vectors_pending},
        "compactions": [{
            "id": e.id, "kind": e.kind, "time": _iso(e.created_at), "tokens_before": e.tokens_before,
            "tokens_after": e.tokens_after, "message_ids": json.loads(e.message_ids), "summary_version": e.summary_version,
            "facts": json.loads(e.facts or "{}"), "summarizer": e.summarizer, "extractor": e.extractor,
            "duration_ms": round(e.duration_ms, 2), "rolled_back_by": e.rolled_back_by,
        } for e in mem.compactions()],
    }


def export_header(mem: Memory) -> dict[str, Any]:
    """The first line of an export: whose session it is and the budget it was used with
    (``memos import`` pages to that budget unless told another)."""
    user, agent, session = mem.namespace
    return {HEADER_KEY: 1, "user": user, "agent": agent, "session": session,
            "budget_tokens": mem.settings.budget_tokens}


def read_header(line: str) -> dict[str, Any] | None:
    """The header of an export if ``line`` is one (see :func:`export_header`), else ``None``."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) and HEADER_KEY in data else None


def export_messages(mem: Memory) -> Iterator[dict[str, Any]]:
    """Every logged message of the session, in order: the OpenAI message plus id, seq, time."""
    for m in mem.history():
        yield {**m.data, "id": m.id, "seq": m.seq, "time": _iso(m.created_at)}


def import_messages(mem: Memory, lines: Iterable[str]) -> int:
    """Add the messages of an export (JSONL lines) to ``mem`` in order; returns how many.

    Every line is parsed and validated before anything is added, so a bad file adds
    nothing; :class:`~memos.core.errors.InvalidMessage` names the line and the problem. An
    export's header line (:func:`export_header`) is not a message and is skipped.
    """
    batch: list[dict[str, Any]] = []
    for n, line in enumerate(lines, 1):
        if not line.strip() or (not batch and read_header(line) is not None):
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidMessage(f"line {n}: not JSON ({exc.msg}); nothing was added") from None
        if not isinstance(data, dict):
            raise InvalidMessage(f"line {n}: expected a JSON object, got {type(data).__name__}; nothing was added")
        batch.append({k: v for k, v in data.items() if k not in EXPORT_KEYS})
    if not batch:
        return 0
    try:
        mem.validate(batch)
    except InvalidMessage as exc:
        raise InvalidMessage(f"{exc} (in the imported file; nothing was added)") from None
    for i in range(0, len(batch), _IMPORT_BATCH):
        mem.add(batch[i : i + _IMPORT_BATCH])
    return len(batch)
