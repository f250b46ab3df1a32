"""Progress of a long job, with an estimate of the time left.

A runner reports ``progress(done, total, note)`` after each unit of work (a
:data:`ProgressFn`); :class:`Progress` shows it: a bar with the time left on a terminal,
otherwise one line on stderr every ``every`` seconds and when the job ends, so a run in CI
or under ``nohup`` says how far it is.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["Progress", "ProgressFn", "eta"]

ProgressFn = Callable[[int, int, str], None]


def eta(elapsed: float, done: int, total: int) -> float | None:
    """Seconds left at the rate so far (``None`` before the first unit is done)."""
    if done <= 0 or total <= 0:
        return None
    return max(0.0, elapsed / done * (total - done))


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60:02d}:{rest % 60:02d}"


class Progress:
    """Shows a job's progress (see the module); use as a context manager and pass
    :meth:`update` as the runner's ``progress``."""

    def __init__(self, label: str, *, stream: TextIO | None = None, every: float = 10.0,
                 terminal: bool | None = None) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.every = every
        self.terminal = self.stream.isatty() if terminal is None else terminal
        self.start = time.monotonic()
        self._last_line = 0.0
        self._state = (0, 0, "")
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> Progress:
        if self.terminal:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
            from rich.progress import Progress as Bar

            self._bar = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            TextColumn("left"), TimeRemainingColumn(), console=Console(file=self.stream),
                            transient=True)
            self._bar.__enter__()
            self._task = self._bar.add_task(self.label, total=None)
        return self

    def update(self, done: int, total: int, note: str = "") -> None:
        """The runner's report: ``done`` units of ``total``, and what it is on."""
        self._state = (done, total, note)
        if self._bar is not None:
            self._bar.update(self._task, completed=done, total=total, description=f"{self.label}: {note}"[:80])
            return
        now = time.monotonic()
        if now - self._last_line >= self.every or done >= total:
            self._last_line = now
            print(self.line(), file=self.stream, flush=True)

    def line(self) -> str:
        """The progress as one line: label, units, share, elapsed and time left."""
        done, total, note = self._state
        elapsed = time.monotonic() - self.start
        share = f" ({done / total:.0%})" if total else ""
        return (f"{self.label}: {done}/{total}{share}, {_clock(elapsed)} elapsed, {_clock(eta(elapsed, done, total))} "
                f"left{': ' + note if note else ''}")

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
