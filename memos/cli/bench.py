"""``memos bench``: the benchmark commands of the command line (see :mod:`memos.cli.app`)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..bench.memdaily import STRATEGIES as DAILY
from ..bench.progress import Progress
from ..bench.strategies import STRATEGIES

__all__ = ["bench", "code_version", "results_path", "write_results"]


def _ints(text: str, what: str) -> list[int]:
    try:
        values = [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        raise SystemExit(f"error: {what} takes numbers separated by commas, got {text!r}") from None
    if not values:
        raise SystemExit(f"error: {what} needs at least one number")
    return values


RUNS_DIR = Path("memos-bench")


def results_path(name: str, out: str | None = None) -> Path:
    """Where a benchmark writes its results: ``out`` when given, else a new file
    ``memos-bench/<name>-<UTC time>.json`` (a run never overwrites recorded results)."""
    if out:
        return Path(out)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    path = RUNS_DIR / f"{name}-{stamp}.json"
    n = 1
    while path.exists():
        n += 1
        path = RUNS_DIR / f"{name}-{stamp}-{n}.json"
    return path


def code_version() -> dict[str, Any]:
    """What code a run measured: the checkout's commit and whether files differed from it,
    or the installed version when memos does not run from a git checkout."""
    import subprocess

    import memos

    root = Path(memos.__file__).resolve().parents[1]

    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None
        return proc.stdout.strip() if proc.returncode == 0 else None

    commit = git("rev-parse", "--short=7", "HEAD") if (root / ".git").exists() else None
    if commit is None:
        return {"version": memos.__version__}
    return {"commit": commit, "uncommitted_changes": bool(git("status", "--porcelain", "--untracked-files=no", "memos"))}


def write_results(result: dict[str, Any], name: str, out: str | None, say: Any = print) -> Path:
    """Write ``result`` as JSON to :func:`results_path`, with the code it measured
    (:func:`code_version`), and say where."""
    result = {**result, "code": code_version()}
    path = results_path(name, out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    say(f"results: {path.resolve()}")
    return path


def _strategies(args: argparse.Namespace, default: Sequence[str]) -> tuple[str, ...]:
    """The strategies ``--strategies`` names (default: ``default``), checked."""
    from ..bench.strategies import ALL_STRATEGIES

    if not getattr(args, "strategies", None):
        return tuple(default)
    names = tuple(n.strip() for n in args.strategies.split(",") if n.strip())
    unknown = [n for n in names if n not in ALL_STRATEGIES]
    if unknown or not names:
        raise SystemExit(f"error: unknown strategies {unknown}; choose from {', '.join(ALL_STRATEGIES)}")
    return names


def _write(result: dict[str, Any], args: argparse.Namespace, console: Any) -> Path:
    return write_results(result, args.benchmark, args.out, console.print)


def plotted(plot: Any, *args: Any) -> str:
    """Where ``plot(*args)`` wrote its PNG, or why there is none (matplotlib is the ``plot``
    extra: a server embedding memos does not need it)."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        return "none (install the plot extra for PNGs: pip install -e '.[plot]')"
    return str(Path(plot(*args)).resolve())




def bench(args: argparse.Namespace) -> int:
    """Run the benchmark ``args.benchmark`` names."""
    from rich.console import Console
    from rich.table import Table

    console = Console() if sys.stdout.isatty() else Console(width=140)
    try:
        if args.benchmark == "locomo":
            return _bench_locomo(args, console, Table)
        if args.benchmark == "prefeval":
            return _bench_prefeval(args, console, Table)
        if args.benchmark == "tokens":
            return _bench_tokens(args, console, Table)
        if args.benchmark == "memdaily":
            return _bench_memdaily(args, console, Table)
        return _bench_overhead(args, console, Table)
    except SystemExit as exc:
        console.print(f"[red]{exc}[/red]")
        return 2


def _bench_locomo(args: argparse.Namespace, console: Any, Table: Any) -> int:
    from ..bench.locomo import plot_locomo, run_locomo

    budgets = _ints(args.budget, "--budget")
    if min(budgets) < 256:
        raise SystemExit("error: every budget must be at least 256 tokens")
    if not Path(args.data).is_file():
        raise SystemExit(f"error: no LoCoMo file at {args.data}")
    llm = None
    if args.llm:
        from ..adapters.llm import LLMConfig

        llm = LLMConfig.from_env()
        if llm is None:
            raise SystemExit("error: --llm needs MEMOS_LLM_BASE_URL (and MEMOS_LLM_MODEL) or OPENAI_API_KEY")
    with Progress("LoCoMo") as progress:
        result = run_locomo(args.data, budgets=budgets, conversations=args.conversations, questions=args.questions,
                            progress=progress.update, llm=llm, cross_session=args.cross_session,
                            date_notes=args.date_notes, strategies=_strategies(args, STRATEGIES))
    mode = ", cross-session: questions in a new chat" if args.cross_session else ""
    mode += ", session dates as system notes" if args.date_notes else ""
    table = Table(title=f"LoCoMo ({result['params']['conversations']} conversations{mode})")
    cols = ["strategy", "budget", "evidence recall", "answer in context", "context tokens", "ms/turn", "ms/question"]
    for col in cols + (["LLM-judged accuracy"] if llm else []):
        table.add_column(col, justify="left" if col == "strategy" else "right")
    for r in result["results"]:
        m = r["metrics"]
        table.add_row(r["strategy"], str(r["budget"] or "none"), f"{m['evidence_recall']:.3f}",
                      f"{m['answer_containment']:.3f}", f"{m['mean_context_tokens']:.0f}", f"{m['ms_per_turn']:.2f}",
                      f"{m['ms_per_question']:.1f}", *([f"{m['llm_accuracy']:.3f}"] if llm else []))
    console.print(table)
    path = _write(result, args, console)
    if len(budgets) > 1:
        console.print(f"plot: {plotted(plot_locomo, result, path.with_suffix('.png'))}")
    return 0


def _bench_prefeval(args: argparse.Namespace, console: Any, Table: Any) -> int:
    from ..bench.prefeval import run_prefeval

    fillers = _ints(args.filler, "--filler")
    if min(fillers) < 0:
        raise SystemExit("error: --filler counts must not be negative")
    if args.budget < 256:
        raise SystemExit("error: --budget must be at least 256 tokens")
    if not Path(args.data, "explicit_preference").is_dir():
        raise SystemExit(f"error: no PrefEval data (explicit_preference/) under {args.data}")
    with Progress("PrefEval") as progress:
        try:
            result = run_prefeval(args.data, fillers=fillers, budget=args.budget, per_topic=args.per_topic,
                                  progress=progress.update, strategies=_strategies(args, STRATEGIES))
        except ValueError as exc:
            raise SystemExit(f"error: {exc}") from None
    table = Table(title=f"PrefEval ({result['params']['preferences']} preferences, budget {args.budget})")
    table.add_column("strategy")
    for n in fillers:
        table.add_column(f"in context @{n}", justify="right")
    table.add_column("context tokens", justify="right")
    for r in result["results"]:
        table.add_row(r["strategy"], *(f"{r['by_filler'][str(n)]:.3f}" for n in fillers),
                      f"{r['metrics']['mean_context_tokens']:.0f}")
    console.print(table)
    _write(result, args, console)
    return 0


def _bench_memdaily(args: argparse.Namespace, console: Any, Table: Any) -> int:
    from ..bench.memdaily import run_memdaily

    if args.budget < 256 or args.trajectories < 1 or args.start < 0:
        raise SystemExit("error: --budget must be at least 256 tokens, --trajectories at least 1, --start >= 0")
    if not Path(args.data).is_dir():
        raise SystemExit(f"error: no MemDaily data at {args.data} (a folder of its JSON files)")
    files = [f.strip() for f in args.files.split(",") if f.strip()] if args.files else None
    with Progress("MemDaily") as progress:
        result = run_memdaily(args.data, budget=args.budget, trajectories=args.trajectories, files=files,
                              start=args.start, progress=progress.update, strategies=_strategies(args, DAILY))
    table = Table(title=f"MemDaily ({len(result['params']['files'])} files, {args.trajectories} trajectories each as "
                        f"one session, budget {args.budget})")
    for col in ("strategy", "target-message recall", "context tokens", "ms/question"):
        table.add_column(col, justify="left" if col == "strategy" else "right")
    for r in result["results"]:
        m = r["metrics"]
        table.add_row(r["strategy"], f"{m['target_recall']:.3f}", f"{m['mean_context_tokens']:.0f}",
                      f"{m['ms_per_question']:.1f}")
    console.print(table)
    _write(result, args, console)
    return 0


def _bench_tokens(args: argparse.Namespace, console: Any, Table: Any) -> int:
    from ..bench.tokens import plot_tokens_per_turn, run_tokens

    if args.turns < 40:
        raise SystemExit("error: --turns must be at least 40")
    if args.budget < 512:
        raise SystemExit("error: --budget must be at least 512 tokens")
    with Progress("replaying") as progress:
        result = run_tokens(turns=args.turns, budget=args.budget, progress=progress.update)
    table = Table(title=f"prompt tokens over {args.turns} turns (budget {args.budget})")
    for col in ("strategy", "cumulative tokens", "share of full history", "largest prompt", "orphan prompts",
                "constraints kept", "ms/turn"):
        table.add_column(col, justify="left" if col == "strategy" else "right")
    for r in result["results"]:
        m = r["metrics"]
        table.add_row(r["strategy"], f"{m['cumulative_tokens']:,}", f"{m['ratio_to_full_history']:.1%}",
                      f"{m['max_prompt_tokens']:,}", str(m["orphan_prompts"]), f"{m['constraints_in_last_prompt']:.0%}",
                      f"{m['ms_per_turn']:.1f}")
    console.print(table)
    path = _write(result, args, console)
    console.print(f"plot: {plotted(plot_tokens_per_turn, result, path.with_suffix('.png'))}")
    return 0


def _bench_overhead(args: argparse.Namespace, console: Any, Table: Any) -> int:
    from ..bench.overhead import run_overhead

    sizes = _ints(args.sizes, "--sizes")
    if min(sizes) < 1 or args.turns < 10:
        raise SystemExit("error: sizes must be positive and --turns at least 10")
    if args.model_ms < 0:
        raise SystemExit("error: --model-ms must be 0 or more")
    with Progress("measuring") as progress:
        result = run_overhead(sizes=sizes, turns=args.turns, budget=args.budget, model_ms=args.model_ms,
                              progress=progress.update)
    wait = f"; {args.model_ms:g} ms model wait, untimed" if args.model_ms else ""
    table = Table(title=f"overhead per turn ({args.turns} turns timed after each session length; no LLM{wait})")
    for col in ("variant", "messages", "p50 ms", "p95 ms", "peak MB", "fill msgs/s"):
        table.add_column(col, justify="left" if col == "variant" else "right")
    for r in result["results"]:
        for size, m in r["by_size"].items():
            table.add_row(r["strategy"], f"{int(size):,}", f"{m['p50_ms']:.2f}", f"{m['p95_ms']:.2f}",
                          f"{m['peak_mb']:.0f}", f"{m['fill_messages_per_s']:.0f}")
    console.print(table)
    _write(result, args, console)
    return 0
