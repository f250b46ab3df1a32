"""MemDaily (MemSim): is the message a Chinese question is about in the prompt?

Each file of ``../shared/data/memdaily`` holds trajectories of short Chinese messages a
user tells an assistant (people, places, items, events), each with questions whose
``target_step_id`` names the messages that answer them. As MemSim's own benchmark does,
``trajectories`` of them are replayed one after another as one long session (user messages
only), then every question of those trajectories is asked with ``context(query=question)``
(not stored) under the budget, and the prompt is scored by target-message recall: the
share of the question's target messages whose text is in it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.tokens import TokenCounter
from .datafiles import shaped_as
from .progress import ProgressFn
from .scoring import context_text, evidence_recall, mean
from .strategies import Strategy, embedding_model_name, make_strategy

__all__ = ["STRATEGIES", "Episode", "load_memdaily", "replay", "run_memdaily"]

STRATEGIES = ("sliding_window", "rag_only", "bm25", "search", "memos")


@dataclass(frozen=True)
class Episode:
    """One MemDaily file's first trajectories as one session, with their questions."""

    name: str
    messages: tuple[str, ...]
    questions: tuple[tuple[str, tuple[str, ...]], ...]  # (question, target message texts)


def load_memdaily(folder: str | Path, *, trajectories: int = 40, files: Sequence[str] | None = None,
                  start: int = 0) -> list[Episode]:
    """The episodes of ``folder``'s files (all ``*.json``, or ``files`` by name): trajectories
    ``start`` to ``start + trajectories`` of each."""
    folder = Path(folder)
    paths = sorted(folder.glob("*.json")) if not files else [folder / f for f in files]
    if not paths:
        raise ValueError(f"no MemDaily files (*.json) in {folder}")
    return [_episode(path, start, trajectories) for path in paths]


def _episode(path: Path, start: int, trajectories: int) -> Episode:
    """One file's episode; ``ValueError`` naming the file when it is not a MemDaily file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"{path} cannot be read: {exc}") from exc
    messages: list[str] = []
    questions: list[tuple[str, tuple[str, ...]]] = []
    with shaped_as(path, "a MemDaily file (a list of trajectories, each with message_list and question_list)"):
        for traj in json.loads(text)[start : start + trajectories]:
            by_mid = {m["mid"]: str(m["message"]) for m in traj["message_list"]}
            messages += [str(m["message"]) for m in traj["message_list"]]
            for q in traj["question_list"]:
                targets = tuple(by_mid[i] for i in q.get("target_step_id", []) if i in by_mid)
                if targets:
                    questions.append((str(q["question"]), targets))
    return Episode(path.stem, tuple(messages), tuple(questions))


def replay(strat: Strategy, ep: Episode) -> Iterator[tuple[list[dict[str, Any]], float, tuple[str, ...]]]:
    """Replay ``ep``'s messages into ``strat``, then yield each question's prompt, the
    milliseconds ``context()`` took and the question's target messages."""
    for text in ep.messages:
        strat.add({"role": "user", "content": text})
    for question, targets in ep.questions:
        t0 = time.perf_counter()
        ctx = strat.context(question)
        yield ctx, (time.perf_counter() - t0) * 1000, targets


def run_memdaily(data: str | Path, *, budget: int = 1024, trajectories: int = 40, files: Sequence[str] | None = None,
                 start: int = 0, strategies: Sequence[str] = STRATEGIES, progress: ProgressFn | None = None
                 ) -> dict[str, Any]:
    """Run the benchmark; returns the JSON-able result (see ``memos bench memdaily``)."""
    counter = TokenCounter()
    episodes = load_memdaily(data, trajectories=trajectories, files=files, start=start)
    results = []
    done, total = 0, len(strategies) * len(episodes)
    for name in strategies:
        recall: list[float] = []
        by_file: dict[str, float] = {}
        per_question: dict[str, list[float]] = {}  # each question's score, in the file's order
        tokens: list[int] = []
        over = 0
        query_ms: list[float] = []
        for ep in episodes:
            strat = make_strategy(name, counter, budget)
            try:
                scores = []
                for ctx, ms, targets in replay(strat, ep):
                    query_ms.append(ms)
                    n = counter.count_messages(ctx)
                    tokens.append(n)
                    over += n > budget
                    scores.append(evidence_recall(context_text(ctx), targets) or 0.0)
            finally:
                strat.close()
            recall += scores
            by_file[ep.name] = mean(scores)
            per_question[ep.name] = [round(s, 4) for s in scores]
            done += 1
            if progress:
                progress(done, total, f"{name}: {ep.name}")
        results.append({"strategy": name, "budget": budget,
                        "metrics": {"target_recall": mean(recall), "questions": len(recall),
                                    "mean_context_tokens": round(sum(tokens) / max(1, len(tokens)), 1),
                                    "over_budget": over, "ms_per_question": mean(query_ms)},
                        "by_file": by_file, "per_question": per_question})
    return {"benchmark": "memdaily",
            "params": {"data": str(data), "budget": budget, "trajectories_per_file": trajectories, "first_trajectory": start,
                       "files": [e.name for e in episodes], "tokens": counter.encoding_name,
                       "embedding_model": embedding_model_name()},
            "results": results}
