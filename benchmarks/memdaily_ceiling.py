"""How much of MemDaily's target recall can a prompt of the budget hold at best? An upper bound.

    python -m benchmarks.memdaily_ceiling --strategy memos --out benchmarks/results/memdaily_ceiling.json

The replay (``memos bench memdaily``) tells 40 trajectories, each another person's, as one
session and asks every question at the end. Questions of different trajectories that ask the
same thing of the same kind of thing ("我用的手机是啥牌子来着？", "我手里拿的这部手机是什么型号来着？")
cannot be told apart, so the best a prompt can do for them is to hold as many of their target
messages as fit. This computes that bound. Questions are grouped by the kind of item or place
their last clause names (``KINDS``; one that names none is a group with the questions worded
as it is); each group's prompt holds the group's target messages, shortest first, in the room
the budget leaves after the question and the recalled section's header. The bound assumes an
oracle that knows what kind of thing each question is about (that a fridge, 冰箱, is one of
the household appliances, 家电, asked about) and nothing of who asks; it reads no answer.

With ``--strategy``, that strategy's target recall (as ``memos bench memdaily`` scores it) is
reported beside the bound, per kind, with the share of questions whose first target message
(the statement: "我用的手机是华为Mate60。") is in its prompt.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memos.bench.memdaily import load_memdaily, replay
from memos.bench.scoring import context_text, evidence_recall, mean
from memos.bench.strategies import make_strategy
from memos.cli.bench import write_results
from memos.core.sections import recall_message
from memos.core.tokens import TokenCounter

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "memdaily"
# the kinds of item and place the files' questions ask about, each under the name it is
# grouped by (a longer name first: 运动鞋 before 鞋, 美妆产品 is 美妆)
KINDS = (("运动鞋", "运动鞋"), ("鞋", "运动鞋"), ("手机", "手机"), ("家电", "家电"), ("电器", "家电"),
         ("美妆", "美妆"), ("小区", "小区"), ("公园", "公园"), ("商场", "商场"), ("景区", "景区"), ("医院", "医院"))
_KIND_NAMES = frozenset(kind for _, kind in KINDS)
_CLAUSE = re.compile(r"[，,：:]")


def kind_of(question: str) -> str | None:
    """The kind of thing the question's last clause (after a preamble) asks about, if it names one."""
    last = _CLAUSE.split(question.strip())[-1]
    return next((kind for word, kind in KINDS if word in last), None)


def ceiling(data: Path = DATA, *, start: int = 0, budget: int = 1024, trajectories: int = 40,
            strategy: str | None = None) -> dict[str, Any]:
    """The bound for each file of ``data`` (and ``strategy``'s recall beside it); see the module."""
    counter = TokenCounter()
    header = counter.count_message(recall_message(["x"]) or {})
    files: list[dict[str, Any]] = []
    every: list[float] = []
    measured: list[float] = []
    for ep in load_memdaily(data, trajectories=trajectories, start=start):
        groups: dict[str, list[int]] = defaultdict(list)
        for i, (question, _) in enumerate(ep.questions):
            groups[kind_of(question) or question].append(i)
        bound = [0.0] * len(ep.questions)
        for members in groups.values():
            pool = sorted({t for i in members for t in ep.questions[i][1]}, key=lambda t: (counter.count(t), t))
            for i in members:
                question, targets = ep.questions[i]
                room = budget - header - counter.count_messages([{"role": "user", "content": question}])
                held: set[str] = set()
                for text in pool:
                    cost = counter.count(f"- user: {text}") + 1
                    if cost > room:
                        break
                    room -= cost
                    held.add(text)
                bound[i] = sum(t in held for t in targets) / len(targets)
        scores: list[float] = []
        firsts: list[bool] = []
        if strategy:
            strat = make_strategy(strategy, counter, budget)
            try:
                for ctx, _, targets in replay(strat, ep):
                    text = context_text(ctx)
                    scores.append(evidence_recall(text, targets) or 0.0)
                    firsts.append(evidence_recall(text, targets[:1]) == 1.0)
            finally:
                strat.close()
        by_kind: dict[str, Any] = {}
        for name, members in sorted(groups.items()):
            if name not in _KIND_NAMES:
                continue
            told = {t for i in members for t in ep.questions[i][1]}
            row: dict[str, Any] = {"questions": len(members), "target_messages": len(told),
                                   "target_tokens": sum(counter.count(t) for t in told),
                                   "ceiling": mean([bound[i] for i in members])}
            if strategy:
                row[strategy] = mean([scores[i] for i in members])
                row["statement_in_prompt"] = mean([float(firsts[i]) for i in members])
            by_kind[name] = row
        entry: dict[str, Any] = {"file": ep.name, "questions": len(ep.questions), "ceiling": mean(bound)}
        if strategy:
            entry[strategy] = mean(scores)
        entry["by_kind"] = by_kind
        files.append(entry)
        every += bound
        measured += scores
    out: dict[str, Any] = {"ceiling": mean(every)}
    if strategy:
        out[strategy] = mean(measured)
    return {"benchmark": "memdaily_ceiling",
            "params": {"data": str(data), "budget": budget, "trajectories_per_file": trajectories,
                       "first_trajectory": start, "tokens": counter.encoding_name, "strategy": strategy},
            "results": {"all": out, "files": files}}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memdaily_ceiling", description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=str(DATA), help="the MemDaily folder (default ../shared/data/memdaily)")
    parser.add_argument("--budget", type=int, default=1024)
    parser.add_argument("--starts", default="0,40", help="first trajectories, comma-separated (default 0,40)")
    parser.add_argument("--strategy", default=None, help="a strategy to measure beside the bound (e.g. memos)")
    parser.add_argument("--out", default=None, help="write the results as JSON here (default: a new file in ./memos-bench/)")
    args = parser.parse_args(argv)
    runs = [ceiling(Path(args.data), start=int(s), budget=args.budget, strategy=args.strategy) for s in args.starts.split(",")]
    doc = {"benchmark": "memdaily_ceiling", "params": {**runs[0]["params"], "first_trajectory": None,
                                                       "starts": [int(s) for s in args.starts.split(",")]},
           "results": {str(r["params"]["first_trajectory"]): r["results"] for r in runs}}
    print(json.dumps({k: v["all"] for k, v in doc["results"].items()}))
    write_results(doc, "memdaily_ceiling", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
