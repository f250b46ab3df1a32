"""When the archive's background indexer runs: after a quiet moment, never later than its
longest delay, and through a backlog without pausing."""

from __future__ import annotations

import threading
import time

import pytest

from memos.storage.vectors import Indexer


class _Queue:
    """Stands in for an archival tier: ``left`` items to write, a batch per flush."""

    def __init__(self, left: int) -> None:
        self.left = left
        self.flushes: list[float] = []
        self.done = threading.Event()

    def flush(self, limit: int | None = None) -> int:
        self.flushes.append(time.monotonic())
        n = min(limit or self.left, self.left)
        self.left -= n
        if not self.left:
            self.done.set()
        return n


def test_a_batch_waits_for_a_quiet_moment():
    indexer = Indexer(batch=8, quiet=0.4, max_delay=5.0)
    queue = _Queue(3)
    start = time.monotonic()
    indexer.schedule(queue)  # type: ignore[arg-type]
    try:
        assert queue.done.wait(5)
        assert queue.flushes[0] - start >= 0.4
    finally:
        indexer.stop()


def test_a_busy_caller_delays_it_at_most_max_delay_and_a_backlog_drains_at_once():
    indexer = Indexer(batch=4, quiet=0.5, max_delay=1.0)
    queue = _Queue(10)
    start = time.monotonic()
    try:
        while time.monotonic() - start < 1.6:  # scheduling every 50 ms: never quiet for 0.5 s
            indexer.schedule(queue)  # type: ignore[arg-type]
            time.sleep(0.05)
        assert queue.done.wait(5)
        first = queue.flushes[0] - start
        assert 0.95 <= first < 1.5, first  # at max_delay, not at the end of the calls plus quiet (>= 2.1)
        assert len(queue.flushes) >= 3
        assert queue.flushes[2] - queue.flushes[0] < 0.4  # the three batches of the backlog back to back
    finally:
        indexer.stop()


def test_settings_that_cannot_work_are_refused():
    with pytest.raises(ValueError, match="quiet"):
        Indexer(quiet=2.0, max_delay=1.0)
    with pytest.raises(ValueError, match="quiet"):
        Indexer(quiet=-1)
