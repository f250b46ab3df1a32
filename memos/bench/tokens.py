"""Token cost of a long agent session: cumulative prompt tokens per strategy.

The demo's scripted function-calling session (default 300 turns) is replayed through every
strategy; before each model call the strategy builds its prompt and the prompt is counted.
The agent's own memory-tool steps are left out (only memos has those tools), so every
strategy sees exactly the same messages. Cumulative prompt tokens are reported as a share
of ``full_history``'s, with the largest prompt, prompts over budget, prompts holding an
orphan tool message (the API rejects those) and the constraints still in the last prompt.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..core.sections import find_orphans
from ..core.tokens import TokenCounter
from ..demo.session import CONSTRAINTS, SYSTEM_PROMPT, Step, Turn, demo_session
from .progress import ProgressFn
from .scoring import context_text
from .strategies import STRATEGIES, make_strategy

__all__ = ["plot_tokens_per_turn", "run_tokens", "tool_session"]


def tool_session(turns: int = 300, seed: int = 7) -> list[Turn]:
    """The demo session without the steps that call memos' own tools."""
    out = []
    for t in demo_session(turns, seed):
        steps = tuple(s for s in t.steps if not s.memory_tool) or (Step(reply="OK."),)
        out.append(Turn(t.number, t.user, steps, t.tag))
    return out


def run_tokens(
    *,
    turns: int = 300,
    budget: int = 4096,
    seed: int = 7,
    strategies: Sequence[str] = STRATEGIES,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """Replay the session through each strategy; returns the JSON-able result."""
    counter = TokenCounter()
    script = tool_session(turns, seed)
    results: list[dict[str, Any]] = []
    full_total = 0
    for name in strategies:
        strat = make_strategy(name, counter, budget)
        per_turn: list[int] = []
        total = calls = largest = over = orphans = 0
        t0 = time.perf_counter()
        ctx: list[dict[str, Any]] = []
        try:
            strat.add({"role": "system", "content": SYSTEM_PROMPT})
            for turn in script:
                strat.add({"role": "user", "content": turn.user})
                for i, step in enumerate(turn.steps):
                    ctx = strat.context(None)
                    n = counter.count_messages(ctx)
                    total += n
                    calls += 1
                    largest = max(largest, n)
                    over += name != "full_history" and n > budget
                    orphans += bool(find_orphans(ctx))
                    if i == 0:
                        per_turn.append(n)
                    strat.add(step.assistant_message())
                    for m in step.tool_messages():
                        strat.add(m)
                if progress:
                    progress(strategies.index(name) * len(script) + turn.number, len(strategies) * len(script),
                             f"{name}, turn {turn.number}")
            ctx = strat.context(None)
        finally:
            strat.close()
        elapsed = time.perf_counter() - t0
        if name == "full_history":
            full_total = total
        text = context_text(ctx)
        results.append({
            "strategy": name,
            "budget": None if name == "full_history" else budget,
            "metrics": {
                "cumulative_tokens": total,
                "ratio_to_full_history": None,
                "max_prompt_tokens": largest,
                "model_calls": calls,
                "over_budget": over,
                "orphan_prompts": orphans,
                "constraints_in_last_prompt": round(sum(c in text for c in CONSTRAINTS) / len(CONSTRAINTS), 4),
                "ms_per_turn": round(elapsed * 1000 / len(script), 3),
            },
            "tokens_per_turn": per_turn,
        })
    for r in results:
        if full_total:
            r["metrics"]["ratio_to_full_history"] = round(r["metrics"]["cumulative_tokens"] / full_total, 4)
    return {
        "benchmark": "tokens",
        "params": {"session": "memos demo (memory-tool steps left out)", "turns": turns, "seed": seed,
                   "budget": budget, "tokens": counter.encoding_name, "llm": None},
        "results": results,
    }


def plot_tokens_per_turn(result: dict[str, Any], path: str | Path) -> Path:
    """A PNG of prompt tokens per turn, one line per strategy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=110)
    for r in result["results"]:
        ratio = r["metrics"]["ratio_to_full_history"]
        label = r["strategy"] + (f" ({ratio:.1%} of full)" if ratio is not None and r["strategy"] != "full_history" else "")
        ax.plot(range(1, len(r["tokens_per_turn"]) + 1), r["tokens_per_turn"], label=label)
    ax.set_xlabel("turn")
    ax.set_ylabel("prompt tokens")
    ax.set_yscale("log")
    ax.set_title(f"prompt tokens per turn, budget {result['params']['budget']}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
