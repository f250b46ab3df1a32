"""memos' public surface: every memos type in a public signature of Memory and of
MemoryStore's own methods (arguments and results) can be imported from ``memos``, and the
tiers are not attributes of a session."""

from __future__ import annotations

import inspect
import typing

import memos
from memos import Memory, MemoryStore


def _memos_types(hint: object) -> set[type]:
    found: set[type] = set()
    if isinstance(hint, type) and hint.__module__.startswith("memos."):
        found.add(hint)
    for arg in typing.get_args(hint):
        found |= _memos_types(arg)
    return found


def _public_signature_types(cls: type) -> dict[str, set[type]]:
    names = {**vars(memos)}
    out: dict[str, set[type]] = {}
    for name, fn in inspect.getmembers(cls, inspect.isfunction):
        if name.startswith("_") and name != "__init__":
            continue
        if name != "__init__" and name not in vars(cls):  # MemoryStore's own methods; those it
            continue  # inherits serve its sessions (the log, the tiers of each scope)
        hints = typing.get_type_hints(fn, globalns={**fn.__globals__, **names})
        out[f"{cls.__name__}.{name}"] = set().union(*map(_memos_types, hints.values()))
    return out


def test_every_type_in_a_public_signature_is_exported():
    missing = {where: sorted(t.__name__ for t in types if getattr(memos, t.__name__, None) is not t)
               for cls in (Memory, MemoryStore) for where, types in _public_signature_types(cls).items()}
    missing = {where: names for where, names in missing.items() if names}
    # MemoryStore.forget_fact takes the cold tier itself: Memory.forget is the public way in
    assert missing == {"MemoryStore.forget_fact": ["ColdTier"]}
    assert set(memos.__all__) <= set(vars(memos)) and len(memos.__all__) == len(set(memos.__all__))


def test_the_tiers_are_reached_through_methods_not_attributes(make_memory):
    mem = make_memory(budget=512)
    public = {name for name in dir(mem) if not name.startswith("_")}
    assert not public & {"cold", "archival", "hot_tier", "warm"}
    mem.add({"role": "user", "content": "Please archive order ORD-88123 for me."})
    mem.archive("order ORD-88123 ships to 9 Harbour Row")
    counts = mem.archive_counts()
    assert counts.items >= 2 and 0 <= counts.vectors_pending <= counts.items
    mem.flush()
    if mem.embedding_model() is not None:  # keyword-only (no model here), nothing is ever embedded
        assert mem.archive_counts() == (counts.items, 0)
    else:
        assert mem.archive_counts() == counts
