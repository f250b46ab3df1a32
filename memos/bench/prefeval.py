"""PrefEval: is a preference stated long ago still in the prompt when it matters?

For each explicit preference of PrefEval (Zhao et al., ICLR 2025) and each filler length
N: the user states the preference, N filler messages follow (PrefEval's unrelated real
conversations from ``filtered_inter_turns.json``, in order), then the question arrives as
the query. The prompt a strategy builds under the budget is scored by whether the
preference text is in it (whitespace and case folded).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..core.tokens import TokenCounter
from .datafiles import read_json, shaped_as
from .progress import ProgressFn
from .scoring import context_text, mean, preference_in_context
from .strategies import STRATEGIES, embedding_model_name, make_strategy

__all__ = ["load_fillers", "load_preferences", "run_prefeval"]


def load_preferences(data: str | Path, *, per_topic: int | None = None) -> list[dict[str, str]]:
    """Every ``{topic, preference, question}`` of ``explicit_preference/*.json`` (the first
    ``per_topic`` of each topic when given)."""
    out = []
    for f in sorted(Path(data, "explicit_preference").glob("*.json")):
        with shaped_as(f, "a PrefEval topic file (a list of items with preference and question)"):
            for item in read_json(f)[:per_topic]:
                out.append({"topic": f.stem, "preference": str(item["preference"]), "question": str(item["question"])})
    if not out:
        raise FileNotFoundError(f"no explicit_preference/*.json under {data}")
    return out


def load_fillers(data: str | Path) -> list[dict[str, str]]:
    """The filler messages of ``filtered_inter_turns.json``, conversation after conversation."""
    path = Path(data, "filtered_inter_turns.json")
    with shaped_as(path, "PrefEval's filler file (a list of conversations of role / content messages)"):
        return [{"role": str(m["role"]), "content": str(m["content"])} for c in read_json(path) for m in c["conversation"]]


def run_prefeval(
    data: str | Path,
    *,
    fillers: Sequence[int] = (10, 100, 300),
    budget: int = 4096,
    strategies: Sequence[str] = STRATEGIES,
    per_topic: int | None = None,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """Run the benchmark; returns the JSON-able result (see ``memos bench prefeval``)."""
    counter = TokenCounter()
    prefs = load_preferences(data, per_topic=per_topic)
    filler = load_fillers(data)
    if max(fillers) > len(filler):
        raise ValueError(f"at most {len(filler)} filler messages are available, asked for {max(fillers)}")
    results: list[dict[str, Any]] = []
    done, total = 0, len(strategies) * len(fillers)
    for name in strategies:
        metrics: dict[str, Any] = {}
        by_topic: dict[str, dict[str, list[float]]] = {}
        per_preference: dict[str, list[float]] = {}  # by filler count: each preference's hit, in load order
        tokens: list[int] = []
        ms: list[float] = []
        over = 0
        for n in fillers:
            hits: list[float] = []
            for p in prefs:
                strat = make_strategy(name, counter, budget)
                try:
                    t0 = time.perf_counter()
                    strat.add({"role": "user", "content": p["preference"]})
                    for m in filler[:n]:
                        strat.add(m)
                    ctx = strat.context(p["question"])
                    ms.append((time.perf_counter() - t0) * 1000 / (n + 2))
                finally:
                    strat.close()
                size = counter.count_messages(ctx)
                tokens.append(size)
                over += name != "full_history" and size > budget
                hit = float(preference_in_context(context_text(ctx), p["preference"]))
                hits.append(hit)
                by_topic.setdefault(p["topic"], {}).setdefault(str(n), []).append(hit)
            metrics[f"preference_in_context@{n}"] = mean(hits)
            per_preference[str(n)] = hits
            done += 1
            if progress:
                progress(done, total, f"{name}, {n} filler messages")
        metrics.update({
            "preference_in_context": mean([metrics[f"preference_in_context@{n}"] for n in fillers]),
            "mean_context_tokens": round(mean(tokens), 1), "ms_per_turn": round(mean(ms), 3),
            "sessions": len(tokens), "over_budget": over,
        })
        results.append({
            "strategy": name,
            "budget": None if name == "full_history" else budget,
            "metrics": metrics,
            "by_filler": {str(n): metrics[f"preference_in_context@{n}"] for n in fillers},
            "by_topic": {t: {k: mean(v) for k, v in d.items()} for t, d in sorted(by_topic.items())},
            "per_preference": per_preference,
        })
    return {
        "benchmark": "prefeval",
        "params": {"data": str(data), "fillers": list(fillers), "budget": budget, "preferences": len(prefs),
                   "per_topic": per_topic, "tokens": counter.encoding_name, "embedding_model": embedding_model_name(),
                   "llm": None},
        "results": results,
    }
