"""A benchmark's data files, read with one error for a file that is not what it should be."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["read_json", "shaped_as"]


def read_json(path: str | Path) -> Any:
    """The JSON value of a UTF-8 file (whatever the locale's encoding)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


@contextmanager
def shaped_as(path: str | Path, shape: str) -> Iterator[None]:
    """Turn what reading or walking the file at ``path`` raises for a wrong shape (bad JSON, a
    missing key, a wrong type) into one ``ValueError``: "``path`` is not ``shape``: the error"."""
    try:
        yield
    except (ValueError, LookupError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path} is not {shape}: {type(exc).__name__}: {exc}") from exc
