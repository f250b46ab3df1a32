"""Replay the packaged session through :class:`memos.Memory` and measure it.

Every model call of the scripted agent asks memos for its context; the same call with
the full history is counted beside it. The result says how many tokens each prompt
took, how often the pager ran, whether every constraint was still in the last prompt,
and how many prompts held an orphan tool message (it must be none).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.messages import without_results_of
from ..core.sections import find_orphans
from ..session.memory import Memory, PagingEvent
from ..text.patterns import find_identifiers
from ..tiers.extract import message_source
from .session import CONSTRAINTS, IDENTIFIERS, SYSTEM_PROMPT, Turn, demo_session

__all__ = ["DemoResult", "plot_tokens", "run_demo"]


@dataclass
class DemoResult:
    """What a replay measured."""

    turns: int
    budget: int
    encoding: str
    memos_tokens: list[int] = field(default_factory=list)  # prompt tokens of each turn's first model call
    full_tokens: list[int] = field(default_factory=list)
    memos_total: int = 0  # prompt tokens summed over every model call
    full_total: int = 0
    max_prompt_tokens: int = 0
    model_calls: int = 0
    demotions: int = 0
    soft_compactions: int = 0
    orphan_prompts: int = 0
    over_budget_prompts: int = 0
    constraints_present: dict[str, bool] = field(default_factory=dict)
    messages_logged: int = 0
    final_context: list[dict[str, Any]] = field(default_factory=list)
    facts_by_kind: dict[str, int] = field(default_factory=dict)
    superseded_facts: int = 0
    identifiers: list[str] = field(default_factory=list)
    identifiers_missing: list[str] = field(default_factory=list)
    retrieves: list[dict[str, Any]] = field(default_factory=list)  # the agent's retrieve calls and what came back
    search_mode: str = ""

    @property
    def identifiers_preserved(self) -> int:
        """Identifiers of the conversation (not of memos' own tool results) found at the end in
        the context or the cold tier."""
        return len(self.identifiers) - len(self.identifiers_missing)

    @property
    def ratio(self) -> float:
        """Cumulative prompt tokens with memos as a share of the full history's."""
        return self.memos_total / self.full_total if self.full_total else 0.0


def run_demo(
    *,
    turns: int = 220,
    budget: int = 4096,
    store: str | Path | None = None,
    seed: int = 7,
    on_event: Callable[[int, PagingEvent], None] | None = None,
    on_turn: Callable[[int], None] | None = None,
    session: list[Turn] | None = None,
) -> DemoResult:
    """Replay the packaged session (or ``session``) and return the measurements. Without
    ``store``, the run uses a temporary one and removes it when it ends."""
    script = session if session is not None else demo_session(turns, seed)
    scratch = None
    if store is None:
        scratch = Path(tempfile.mkdtemp(prefix="memos-demo-"))
        store = scratch / "demo.db"
    current = {"turn": 0}

    def forward(event: PagingEvent) -> None:
        if on_event is not None:
            on_event(current["turn"], event)

    mem = Memory("demo", user="maya", store=store, budget=budget, on_event=forward)
    result = DemoResult(turns=len(script), budget=budget, encoding=mem.counter.encoding_name)
    full: list[dict[str, Any]] = []
    full_tokens = 0

    def add(message: dict[str, Any]) -> None:
        nonlocal full_tokens
        mem.add(message)
        full.append(message)
        full_tokens += mem.counter.count_message(message)

    try:
        add({"role": "system", "content": SYSTEM_PROMPT})
        ctx: list[dict[str, Any]] = []
        for turn in script:
            current["turn"] = turn.number
            add({"role": "user", "content": turn.user})
            for i, step in enumerate(turn.steps):
                ctx = mem.context()
                tokens = mem.counter.count_messages(ctx)
                result.memos_total += tokens
                result.full_total += full_tokens + 3
                if i == 0:
                    result.memos_tokens.append(tokens)
                    result.full_tokens.append(full_tokens + 3)
                result.model_calls += 1
                result.max_prompt_tokens = max(result.max_prompt_tokens, tokens)
                result.orphan_prompts += bool(find_orphans(ctx))
                result.over_budget_prompts += tokens > budget
                add(step.assistant_message())
                if step.memory_tool:
                    mem.flush()  # the scripted agent asks right away; make every archived vector visible
                    for call in step.tool_calls:
                        answer = mem.handle_tool_call(call)
                        add(answer)
                        hits = json.loads(answer["content"]).get("results", [])
                        recalled = " ".join(str(m.get("content")) for m in mem.context()
                                            if str(m.get("content", "")).startswith("[memory: recalled]"))
                        result.retrieves.append({
                            "turn": turn.number, "query": json.loads(call["function"]["arguments"]).get("query"),
                            "hits": [{"id": h["id"], "seq": h["seq"], "text": h["text"]} for h in hits],
                            "recalled_identifiers": [i for i in IDENTIFIERS if i in recalled],
                        })
                for tool_msg in step.tool_messages():
                    add(tool_msg)
            if on_turn is not None:
                on_turn(turn.number)
        ctx = mem.context()
        text = "\n".join(str(m.get("content") or "") for m in ctx)
        result.constraints_present = {c: c in text for c in CONSTRAINTS}
        stats = mem.stats()
        result.demotions = stats.demotions
        result.soft_compactions = stats.soft_compactions
        history = mem.history()
        model = mem.embedding_model()
        result.search_mode = f"dense ({model}) + keyword" if model else "keyword only (no embedding model)"
        result.messages_logged = len(history)
        result.final_context = ctx
        facts = mem.facts(include_history=True)
        for f in facts:
            if f.status == "current":
                result.facts_by_kind[f.kind] = result.facts_by_kind.get(f.kind, 0) + 1
        result.superseded_facts = sum(1 for f in facts if f.status == "superseded")
        # the conversation's identifiers: the user's, the assistant's and the app's tools'; what
        # memos' own tools returned quotes memory under memos' own ids and times
        said = without_results_of(history, mem.is_memory_tool)
        result.identifiers = list(dict.fromkeys(i for m in said for i in find_identifiers(message_source(m)[0])))
        findable = text + "\n" + "\n".join(f"{f.key}\n{f.value}" for f in facts)
        result.identifiers_missing = [i for i in result.identifiers if i not in findable]
    finally:
        mem.close()
        if scratch is not None:  # a store of its own making: nothing of the run is left behind
            shutil.rmtree(scratch, ignore_errors=True)
    return result


def plot_tokens(result: DemoResult, path: str | Path) -> Path:
    """Write a PNG of prompt tokens per turn, memos against the full history."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=110)
    xs = list(range(1, len(result.memos_tokens) + 1))
    ax.plot(xs, result.full_tokens, label="full history", color="#c0392b")
    ax.plot(xs, result.memos_tokens, label=f"memos (budget {result.budget})", color="#2471a3")
    ax.set_xlabel("turn")
    ax.set_ylabel("prompt tokens (first model call of the turn)")
    ax.set_title(f"memos demo: {result.turns} turns; cumulative prompt tokens {result.ratio:.1%} of the full history's")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
