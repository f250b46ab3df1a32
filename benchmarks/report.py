"""The benchmark tables of the README and docs/benchmarks.md, from the recorded results in benchmarks/results/.

    python -m benchmarks.report
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def _load(name: str) -> dict[str, Any] | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _bold_best(values: dict[str, float]) -> dict[str, str]:
    best = max(values.values()) if values else None
    return {k: (f"**{v:.3f}**" if v == best else f"{v:.3f}") for k, v in values.items()}


def locomo(r: dict[str, Any]) -> str:
    budgets = r["params"]["budgets"]
    rows = {}
    for x in r["results"]:
        if x["budget"] is not None:
            rows.setdefault(x["strategy"], {})[x["budget"]] = x["metrics"]["evidence_recall"]
    by_budget = {b: _bold_best({s: v[b] for s, v in rows.items()}) for b in budgets}
    out = ["| strategy | " + " | ".join(f"{b:,}" for b in budgets) + " |", "|---|" + "---:|" * len(budgets)]
    for s in rows:
        out.append(f"| {s} | " + " | ".join(by_budget[b][s] for b in budgets) + " |")
    full = next(x for x in r["results"] if x["budget"] is None)
    out.append(f"| full_history (no budget, {full['metrics']['mean_context_tokens']:,.0f} tokens a prompt) | "
               f"{full['metrics']['evidence_recall']:.3f} |" + " |" * (len(budgets) - 1))
    cats = ["multi-hop", "temporal", "open-domain", "single-hop"]
    out += ["", f"By category at {budgets[len(budgets) // 2]:,} tokens (evidence recall / answer in context):", "",
            "| strategy | " + " | ".join(cats) + " |", "|---|" + "---:|" * len(cats)]
    mid = budgets[len(budgets) // 2]
    for x in r["results"]:
        if x["budget"] == mid:
            c = x["by_category"]
            out.append(f"| {x['strategy']} | " + " | ".join(
                f"{c[k]['evidence_recall']:.2f} / {c[k]['answer_containment']:.2f}" for k in cats) + " |")
    return "\n".join(out)


def prefeval(r: dict[str, Any]) -> str:
    fillers = r["params"]["fillers"]
    out = ["| strategy | " + " | ".join(f"{n} filler messages" for n in fillers) + " | prompt tokens |",
           "|---|" + "---:|" * (len(fillers) + 1)]
    for x in r["results"]:
        name = x["strategy"] + (" (no budget)" if x["budget"] is None else "")
        out.append(f"| {name} | " + " | ".join(f"{x['by_filler'][str(n)]:.0%}" for n in fillers)
                   + f" | {x['metrics']['mean_context_tokens']:,.0f} |")
    return "\n".join(out)


def tokens(r: dict[str, Any]) -> str:
    out = ["| strategy | cumulative prompt tokens | share of full history | largest prompt "
           "| prompts with orphan tool messages | constraints in the last prompt |", "|---|---:|---:|---:|---:|---:|"]
    for x in r["results"]:
        m = x["metrics"]
        out.append(f"| {x['strategy']} | {m['cumulative_tokens']:,} | {m['ratio_to_full_history']:.1%} | "
                   f"{m['max_prompt_tokens']:,} | {m['orphan_prompts']} | {m['constraints_in_last_prompt']:.0%} |")
    return "\n".join(out)


def overhead(r: dict[str, Any]) -> str:
    out = ["| variant | messages | p50 | p95 | peak memory | fill rate |", "|---|---:|---:|---:|---:|---:|"]
    for x in r["results"]:
        for size, m in x["by_size"].items():
            out.append(f"| {x['strategy']} | {int(size):,} | {m['p50_ms']:.1f} ms | {m['p95_ms']:.1f} ms | "
                       f"{m['peak_mb']:,.0f} MB | {m['fill_messages_per_s']:,.0f} msg/s |")
    return "\n".join(out)


def locomo_cross_session(r: dict[str, Any]) -> str:
    out = ["| strategy | evidence recall | answer in context | prompt tokens | ms per question |",
           "|---|---:|---:|---:|---:|"]
    best = _bold_best({x["strategy"]: x["metrics"]["evidence_recall"] for x in r["results"] if x["budget"] is not None})
    for x in r["results"]:
        m = x["metrics"]
        recall = best.get(x["strategy"], f"{m['evidence_recall']:.3f}")
        name = x["strategy"] + (" (no budget)" if x["budget"] is None else "")
        out.append(f"| {name} | {recall} | {m['answer_containment']:.3f} | {m['mean_context_tokens']:,.0f} | "
                   f"{m['ms_per_question']:.1f} |")
    return "\n".join(out)


def memdaily(r: dict[str, Any], holdout: dict[str, Any] | None = None) -> str:
    head = "| strategy | trajectories 0-39 |" + (" trajectories 40-79 |" if holdout else "") + " prompt tokens |"
    out = [head, "|---|---:|" + ("---:|" if holdout else "") + "---:|"]
    best = _bold_best({x["strategy"]: x["metrics"]["target_recall"] for x in r["results"]})
    other = {x["strategy"]: x["metrics"]["target_recall"] for x in (holdout or {}).get("results", [])}
    best_other = _bold_best(other)
    for x in r["results"]:
        cells = [best[x["strategy"]]] + ([best_other.get(x["strategy"], "")] if holdout else [])
        out.append(f"| {x['strategy']} | " + " | ".join(cells) + f" | {x['metrics']['mean_context_tokens']:,.0f} |")
    return "\n".join(out)


def sessions(r: dict[str, Any]) -> str:
    return "\n".join([
        "| open sessions | open p50 / p95 | first prompt p50 | threads before / with all open | RSS before / with all open |",
        "|---:|---:|---:|---:|---:|",
        f"| {r['sessions']:,} ({r['users']} users) | {r['open_ms']['p50']:.1f} / {r['open_ms']['p95']:.1f} ms | "
        f"{r['first_prompt_ms']['p50']:.1f} ms | {r['threads']['before']} / {r['threads']['with_all_open']} | "
        f"{r['rss_mb']['before']:,.0f} / {r['rss_mb']['with_all_open']:,.0f} MB |",
    ])


def main() -> int:
    for name, fn in (("locomo", locomo), ("locomo_cross_session", locomo_cross_session), ("prefeval", prefeval),
                     ("tokens", tokens), ("overhead", overhead), ("overhead_model_wait", overhead), ("sessions", sessions)):
        r = _load(name)
        if r is not None:
            print(f"### {name}\n\n{fn(r)}\n")
    for name in ("memdaily", "memdaily_m3e"):  # the default model, then a Chinese-capable one
        daily = _load(name)
        if daily is not None:
            print(f"### {name} ({daily['params'].get('embedding_model')})\n\n{memdaily(daily, _load(name + '_holdout'))}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
