"""The ``memos`` command line: ``memos demo``."""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]


def _demo(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from .demo import plot_tokens, run_demo
    from .memory import PagingEvent

    console = Console() if sys.stdout.isatty() else Console(width=120)
    warnings.showwarning = lambda message, *_a, **_k: Console(stderr=True).print(f"[yellow]warning:[/yellow] {message}")
    out = Path(args.out)
    store = out / "demo.db"
    if store.exists():
        store.unlink()
    for suffix in ("-wal", "-shm"):
        Path(str(store) + suffix).unlink(missing_ok=True)
    with Progress(TextColumn("[bold]replaying"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, disable=args.quiet) as progress:
        task = progress.add_task("turns", total=args.turns)

        def on_event(turn: int, e: PagingEvent) -> None:
            if args.quiet:
                return
            if e.kind == "hard":
                what = f"demoted {e.messages} messages" + (f", pinned {e.pinned}" if e.pinned else "")
                what += f", summary v{e.summary_version} ({e.summarizer})" if e.summary_version else ""
            else:
                what = f"compacted {e.messages} old tool results to placeholders"
            progress.console.print(f"turn {turn:>3}  {e.kind:<4}  {what}; context {e.tokens_before} -> {e.tokens_after} tokens")

        result = run_demo(turns=args.turns, budget=args.budget, store=store, seed=args.seed,
                          on_event=on_event, on_turn=lambda _: progress.advance(task))
    png = plot_tokens(result, out / "prompt_tokens.png")

    table = Table(title=f"memos demo: {result.turns} turns, budget {result.budget} tokens ({result.encoding})")
    table.add_column("measure")
    table.add_column("memos", justify="right")
    table.add_column("full history", justify="right")
    n = len(result.memos_tokens)
    table.add_row("prompt tokens, first turn", str(result.memos_tokens[0]), str(result.full_tokens[0]))
    table.add_row("prompt tokens, middle turn", str(result.memos_tokens[n // 2]), str(result.full_tokens[n // 2]))
    table.add_row("prompt tokens, last turn", str(result.memos_tokens[-1]), str(result.full_tokens[-1]))
    table.add_row("cumulative prompt tokens", f"{result.memos_total:,}", f"{result.full_total:,}")
    table.add_row("share of full history", f"{result.ratio:.1%}", "100%")
    table.add_row("largest single prompt", str(result.max_prompt_tokens), "")
    table.add_row("model calls", str(result.model_calls), str(result.model_calls))
    table.add_row("demotions / soft compactions", f"{result.demotions} / {result.soft_compactions}", "")
    table.add_row("archival search", result.search_mode, "")
    present = sum(result.constraints_present.values())
    table.add_row("constraints present at the end", f"{present}/{len(result.constraints_present)}", "")
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(result.facts_by_kind.items()))
    table.add_row("current facts by kind", kinds, "")
    table.add_row("superseded facts (kept as history)", str(result.superseded_facts), "")
    table.add_row("identifiers preserved", f"{result.identifiers_preserved}/{len(result.identifiers)}", "")
    for r in result.retrieves:
        found = ", ".join(r["recalled_identifiers"]) or "none"
        table.add_row(f"agent retrieve (turn {r['turn']}): \"{r['query']}\"",
                      f"{len(r['hits'])} hits; early ids recalled: {found}", "")
    table.add_row("prompts over budget", str(result.over_budget_prompts), "")
    table.add_row("prompts with orphan tool messages", str(result.orphan_prompts), "")
    table.add_row("messages in the log", str(result.messages_logged), "")
    console.print(table)
    for c, ok in result.constraints_present.items():
        if not ok:
            console.print(f"[red]missing constraint:[/red] {c}")
    console.print(f"plot: {png.resolve()}")
    for ident in result.identifiers_missing:
        console.print(f"[red]identifier lost:[/red] {ident}")
    ok = (result.orphan_prompts == 0 and result.over_budget_prompts == 0 and not result.identifiers_missing
          and all(result.constraints_present.values()))
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``memos`` console script."""
    parser = argparse.ArgumentParser(prog="memos", description="Tiered memory for LLM agents.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="replay a long function-calling session offline and compare prompt tokens")
    demo.add_argument("--turns", type=int, default=220, help="turns to replay (>= 40; default 220)")
    demo.add_argument("--budget", type=int, default=4096, help="prompt budget in tokens (default 4096)")
    demo.add_argument("--seed", type=int, default=7, help="seed of the scripted session (default 7)")
    demo.add_argument("--out", default="memos-demo", help="folder for the store and the plot (default ./memos-demo)")
    demo.add_argument("--quiet", action="store_true", help="no progress bar or per-compaction lines")
    args = parser.parse_args(argv)
    if args.command == "demo":
        if args.turns < 40:
            parser.error("--turns must be at least 40")
        if args.budget < 512:
            parser.error("--budget must be at least 512")
        return _demo(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
