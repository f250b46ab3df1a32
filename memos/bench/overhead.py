"""Overhead: what memos costs per turn, without an LLM, as the session grows.

For each session length N, a fresh store is filled with N messages of a synthetic chat
(added in batches of 50, so paging, summaries, facts and the archive all run), then
``turns`` more turns are timed: add the user message, build the context, add the reply.
Each size runs in its own process, so the peak memory (max RSS) is that size's alone.
memos runs twice: with its defaults (auto-recall embeds each new user message and asks
the archive; every archived item's vector is written before the timed turns) and with
``auto_recall=False`` and no embedding model (paging and prompt assembly only; archive
items are written and keyword-indexed, no vectors).

With ``model_ms``, each turn waits that long between ``context()`` and the reply, untimed,
as an agent loop waits for the model's answer: background work (the archive's vectors,
a demotion being planned) then runs in that wait, as it does in use. With 0 (the default)
the turns follow each other and that work competes with the timed calls for the cores.
"""

from __future__ import annotations

import multiprocessing
import random
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..core.config import MemosSettings
from .progress import ProgressFn

__all__ = ["VARIANTS", "chat_messages", "measure", "run_overhead"]

VARIANTS = ("memos", "memos_no_recall")

_TOPICS = ["the trip to Porto", "my sister's wedding", "the tax return", "a new laptop", "the garden", "the quarterly report",
           "learning Spanish", "the dentist appointment", "a birthday present", "the kitchen renovation"]
_VERBS = ["planning", "worried about", "excited about", "researching", "budgeting for", "writing up", "rethinking"]
_REPLIES = ["Here is a short plan for {t}: start early, list what matters, and check the costs twice.",
            "For {t}, I would compare three options and keep notes on each.",
            "Noted. I can remind you about {t} next week if that helps.",
            "A good next step for {t} is to ask someone who has done it before."]


def chat_messages(seed: int = 7) -> Iterator[dict[str, Any]]:
    """An endless, deterministic user/assistant chat (about 20-40 tokens per message)."""
    rng = random.Random(seed)
    i = 0
    while True:
        i += 1
        t = rng.choice(_TOPICS)
        user = f"I'm {rng.choice(_VERBS)} {t}. Reference REF-{i:06d}; what should I do first?"
        yield {"role": "user", "content": user}
        yield {"role": "assistant", "content": rng.choice(_REPLIES).format(t=t)}


def _percentile(values: Sequence[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def measure(size: int, variant: str, turns: int = 300, budget: int = 4096, model_ms: float = 0.0) -> dict[str, Any]:
    """Fill a session to ``size`` messages, then time ``turns`` turns (in this process),
    each waiting ``model_ms`` (untimed) for a stand-in model's answer before its reply."""
    settings = replace(MemosSettings.from_env(), budget_tokens=budget, auto_recall=variant == "memos")
    folder = Path(tempfile.mkdtemp(prefix="memos-overhead-"))
    try:
        return _measure(variant, size, turns, settings, folder, model_ms / 1000)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _measure(variant: str, size: int, turns: int, settings: MemosSettings, folder: Path, wait: float
             ) -> dict[str, Any]:
    from ..session.memory import Memory

    recall = variant == "memos"
    if recall:
        mem = Memory("overhead", store=folder / "memos.db", settings=settings)
    else:  # nothing reads the vectors without recall: no model, so only paging and assembly are timed
        mem = Memory("overhead", store=folder / "memos.db", settings=settings, embedding_model_dir=folder / "no-model")
    msgs = chat_messages()
    t0 = time.perf_counter()
    filled = 0
    while filled < size:
        batch = [next(msgs) for _ in range(min(50, size - filled))]
        mem.add(batch)
        filled += len(batch)
    fill_s = time.perf_counter() - t0
    if recall:
        mem.flush()
    times: list[float] = []
    tokens = 0
    for _ in range(turns):
        user, reply = next(msgs), next(msgs)
        t = time.perf_counter()
        mem.add(user)
        ctx = mem.context()
        asked = time.perf_counter()
        if wait:
            time.sleep(wait)
        t += time.perf_counter() - asked  # the model's time is not memos'
        mem.add(reply)
        times.append((time.perf_counter() - t) * 1000)
        tokens = max(tokens, mem.counter.count_messages(ctx))
    stats = mem.stats()
    mem.close()
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "size": size, "p50_ms": round(_percentile(times, 0.5), 3), "p95_ms": round(_percentile(times, 0.95), 3),
        "max_ms": round(max(times), 3), "mean_ms": round(sum(times) / len(times), 3),
        "peak_mb": round(peak_kb / 1024 if sys.platform != "darwin" else peak_kb / 2**20, 1),
        "fill_s": round(fill_s, 1), "fill_messages_per_s": round(size / fill_s, 1) if fill_s else None,
        "max_context_tokens": tokens, "demotions": stats.demotions, "turns": turns,
    }


def _child(args: tuple[int, str, int, int, float]) -> dict[str, Any]:
    return measure(*args)


def run_overhead(
    *,
    sizes: Sequence[int] = (1000, 10000, 100000),
    variants: Sequence[str] = VARIANTS,
    turns: int = 300,
    budget: int = 4096,
    model_ms: float = 0.0,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """Measure every variant at every size, each in a fresh process; the JSON-able result."""
    ctx = multiprocessing.get_context("spawn")
    results: list[dict[str, Any]] = []
    for variant in variants:
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; expected one of {VARIANTS}")
        by_size: list[dict[str, Any]] = []
        for size in sizes:
            with ctx.Pool(1) as pool:
                by_size.append(pool.apply(_child, ((size, variant, turns, budget, model_ms),)))
            if progress:
                progress(variants.index(variant) * len(sizes) + len(by_size), len(variants) * len(sizes),
                         f"{variant}: {size:,} messages")
        first, last = by_size[0], by_size[-1]
        results.append({
            "strategy": variant,
            "metrics": {
                "p95_ms_max": max(r["p95_ms"] for r in by_size),
                "p95_growth": round(last["p95_ms"] / first["p95_ms"], 3) if first["p95_ms"] else None,
                "peak_mb_max": max(r["peak_mb"] for r in by_size),
            },
            "by_size": {str(r["size"]): r for r in by_size},
        })
    return {
        "benchmark": "overhead",
        "params": {"sizes": list(sizes), "turns": turns, "budget": budget, "llm": None, "model_ms": model_ms,
                   "messages": "synthetic user/assistant chat, 20-40 tokens each",
                   "turn": "add(user) + context() + add(reply)"
                           + (f", {model_ms:g} ms untimed between context() and the reply" if model_ms else "")},
        "results": results,
    }
