"""The ``memos`` command line: ``demo``, ``chat``, ``bench``, ``inspect``, ``export``, ``import`` and ``mcp``."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..core.config import environment

__all__ = ["main"]


def _demo(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
    from rich.table import Table

    from ..demo import plot_tokens, run_demo
    from ..session.memory import PagingEvent
    from .bench import plotted

    console = Console() if sys.stdout.isatty() else Console(width=120)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)  # the demo's own folder
    store = out / "demo.db"
    if store.exists():
        store.unlink()
    for suffix in ("-wal", "-shm"):
        Path(str(store) + suffix).unlink(missing_ok=True)
    with Progress(TextColumn("[bold]replaying"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("left"),
                  TimeRemainingColumn(),
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
    png = plotted(plot_tokens, result, out / "prompt_tokens.png")

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
    console.print(f"plot: {png}")
    for ident in result.identifiers_missing:
        console.print(f"[red]identifier lost:[/red] {ident}")
    ok = (result.orphan_prompts == 0 and result.over_budget_prompts == 0 and not result.identifiers_missing
          and all(result.constraints_present.values()))
    return 0 if ok else 1


def _inspect(mem: object) -> str:
    from ..session.memory import Memory

    assert isinstance(mem, Memory)
    st, counts = mem.stats(), mem.archive_counts()
    lines = [
        f"hot: {st.hot_messages} messages, {st.hot_tokens} tokens",
        f"summary: version {st.summary_version}, {st.summary_tokens} tokens",
        f"facts: {st.facts} current ({st.pinned_facts} pinned)",
        f"archival: {counts.items} items ({counts.vectors_pending} waiting for vectors)",
        f"paging: {st.demotions} demotions, {st.soft_compactions} soft compactions; "
        f"context {st.context_tokens}/{st.budget_tokens} tokens ({st.encoding})",
    ]
    for f in mem.facts()[:20]:
        lines.append(f"  fact #{f.id}{' (pinned)' if f.pinned else ''}: {f.line()}")
    return "\n".join(lines)


def _chat(args: argparse.Namespace) -> int:
    from ..adapters.llm import LLMConfig, make_client
    from ..session.memory import Memory

    config = LLMConfig.from_env() or LLMConfig()
    if args.base_url or args.model:
        config = LLMConfig(base_url=args.base_url or config.base_url, model=args.model or config.model,
                           api_key=config.api_key)
    client = make_client(config)
    mem = Memory(args.session, user=args.user, store=args.store, budget=args.budget, llm=config if args.llm_memory else None)
    out = sys.stdout
    if not args.quiet:
        print(f"memos chat: model {config.model} at {config.base_url or 'api.openai.com'}; "
              "/inspect shows the memory, /quit ends", file=out)
    turns = 0
    try:
        for line in sys.stdin:
            text = line.strip()
            if not text:
                continue
            if text in ("/quit", "/exit"):
                break
            if text == "/inspect":
                print(_inspect(mem), file=out)
                continue
            try:
                result = mem.run_turn(client, config.model, text, max_steps=args.max_steps)
            except Exception as exc:  # the endpoint failed after retries: say so and keep the session
                print(f"error: {type(exc).__name__}: {exc}", file=out)
                continue
            turns += 1
            for name in result.memory_calls:
                print(f"  [memory tool: {name}]", file=out)
            for call in result.other_calls:
                print(f"  [tool call {call['name']}({json.dumps(call['arguments'])}) - not available here]", file=out)
            tokens = ", ".join(str(t) for t in result.prompt_tokens)
            print(f"assistant: {result.reply}", file=out)
            print(f"  (prompt tokens: {tokens})", file=out)
            out.flush()
    except KeyboardInterrupt:
        pass
    finally:
        mem.close()
    if not args.quiet:
        print(f"bye after {turns} turns", file=out)
    return 0


def _open(args: argparse.Namespace, *, must_exist: bool = True, budget_else: int | None = None) -> Any:
    """The session named on the command line, opened read-mostly (no background indexer).
    Its budget: ``--budget``, else ``MEMOS_BUDGET_TOKENS``, else the one the session was used
    with, else ``budget_else`` (an export's), else the default."""
    from dataclasses import replace

    from ..core.config import MemosSettings
    from ..session.memory import Memory
    from ..session.store import MemoryStore
    from ..storage.log import validate_namespace

    store = args.store or environment().store.url
    if must_exist and "://" not in store and not Path(store).is_file():
        raise SystemExit(f"error: no store at {store}")
    settings = replace(MemosSettings.from_env(), background_indexing=False)
    held = MemoryStore.shared(store)  # the Memory below shares it
    try:
        budget = getattr(args, "budget", None)
        if not budget and "budget_tokens" not in environment().settings_given:  # the budget the session is used with
            budget = held.recorded_budget(validate_namespace((args.user, args.agent, args.session))) or budget_else
        if budget:
            settings = replace(settings, budget_tokens=budget)
        mem = Memory(args.session, user=args.user, agent=args.agent, store=store, settings=settings)
    finally:
        held.release()
    if must_exist and not mem.history():
        mem.close()
        raise SystemExit(f"error: session {args.user}/{args.agent}/{args.session} has no messages in {store}")
    return mem


def _inspect_cmd(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from ..session.transfer import snapshot

    mem = _open(args)
    try:
        snap = snapshot(mem)
    finally:
        mem.close()
    if args.json:
        print(json.dumps(snap, indent=2, ensure_ascii=False))
        return 0
    console = Console() if sys.stdout.isatty() else Console(width=160)
    st = snap["stats"]
    ns = snap["namespace"]
    console.print(f"[bold]{ns['user']}/{ns['agent']}/{ns['session']}[/bold]: {st['messages']} messages; context "
                  f"{st['context_tokens']}/{st['budget_tokens']} tokens ({st['encoding']}); archival "
                  f"{snap['archival']['items']} items ({snap['archival']['waiting_for_vectors']} waiting for vectors)")
    hot = Table(title=f"hot tier ({st['hot_messages']} messages, {st['hot_tokens']} tokens)")
    for col in ("seq", "role", "tokens", "flags", "content"):
        hot.add_column(col, justify="right" if col in ("seq", "tokens") else "left")
    for m in snap["hot"]:
        flags = ",".join(f for f, on in (("placeholder", m["compacted"]), ("pinned", m["pinned"])) if on)
        hot.add_row(str(m["seq"]), m["role"], str(m["tokens"]), flags, m["preview"])
    console.print(hot)
    if snap["summary"]:
        s = snap["summary"]
        console.print(f"[bold]summary[/bold] v{s['version']} ({s['kind']}, {s['tokens']} tokens, through #{s['through_seq']})")
        console.print(s["text"], markup=False)
    facts = Table(title=f"facts ({st['facts']} current, {st['pinned_facts']} pinned)")
    for col in ("id", "kind", "key", "value", "pinned"):
        facts.add_column(col)
    for f in snap["facts"]:
        facts.add_row(str(f["id"]), f["kind"], f["key"], f["value"], "yes" if f["pinned"] else "")
    console.print(facts)
    log = Table(title="compaction log")
    for col in ("id", "kind", "time", "tokens", "messages", "summary", "facts +/~/-", "by", "ms", "rolled back by"):
        log.add_column(col)
    for e in snap["compactions"]:
        f = e["facts"]
        log.add_row(str(e["id"]), e["kind"], e["time"], f"{e['tokens_before']} -> {e['tokens_after']}",
                    str(len(e["message_ids"])),
                    f"v{e['summary_version']}" if e["summary_version"] else "",
                    f"{len(f.get('added', []))}/{len(f.get('updated', []))}/{len(f.get('invalidated', []))}",
                    " / ".join(x for x in (e["summarizer"], e["extractor"]) if x), f"{e['duration_ms']:.1f}",
                    str(e["rolled_back_by"] or ""))
    console.print(log)
    return 0


def _export_cmd(args: argparse.Namespace) -> int:
    from ..session.transfer import export_header, export_messages

    mem = _open(args)
    try:
        sys.stdout.write(json.dumps(export_header(mem), ensure_ascii=False) + "\n")
        for m in export_messages(mem):
            sys.stdout.write(json.dumps(m, ensure_ascii=False) + "\n")
    finally:
        mem.close()
    return 0


def _import_cmd(args: argparse.Namespace) -> int:
    from ..core.errors import InvalidMessage
    from ..session.transfer import import_messages, read_header

    if args.file not in (None, "-") and not Path(args.file).is_file():
        raise SystemExit(f"error: no file at {args.file}")
    if args.file in (None, "-"):
        lines = list(sys.stdin)
    else:
        with open(args.file, encoding="utf-8") as source:
            lines = list(source)
    header = next((read_header(line) for line in lines if line.strip()), None)
    exported = header.get("budget_tokens") if header is not None else None
    mem = _open(args, must_exist=False, budget_else=exported if isinstance(exported, int) else None)
    try:
        if mem.history() and not args.append:
            raise SystemExit(f"error: session {args.user}/{args.agent}/{args.session} already has messages; "
                             "use --append to add after them")
        n = import_messages(mem, lines)
        mem.flush()
    except InvalidMessage as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        mem.close()
    print(f"imported {n} messages into {args.user}/{args.agent}/{args.session}", file=sys.stderr)
    return 0


def _mcp(args: argparse.Namespace) -> int:
    from ..integrations.mcp_server import serve
    from ..session.memory import Memory

    mem = Memory(args.session, user=args.user, agent=args.agent, store=_store_of(args))
    try:
        serve(mem, prefix=args.tool_prefix)
    finally:
        mem.close()
    return 0


def _session_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", default=None, help="store path or SQLAlchemy URL (default MEMOS_STORE or ./memos.db)")
    p.add_argument("--user", default="default", help="user label (default default)")
    p.add_argument("--agent", default="default", help="agent label (default default)")
    p.add_argument("--session", required=True, help="session label")


class _LineHandler(logging.Handler):
    """memos' operational messages on stderr as one line each, without a source line."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"{record.levelname.lower()}: {record.getMessage()}", file=sys.stderr)


def _show_logs() -> None:
    root = logging.getLogger("memos")
    if not any(isinstance(h, _LineHandler) for h in root.handlers):
        root.addHandler(_LineHandler(logging.WARNING))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memos", description="Tiered memory for LLM agents.")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    # --debug after the command too; SUPPRESS keeps a subcommand from resetting the top-level flag
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show the traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser = sub.add_parser

    def sub_parser(name: str, **kw: Any) -> argparse.ArgumentParser:
        return add_parser(name, parents=[common], **kw)

    sub.add_parser = sub_parser  # type: ignore[method-assign]
    demo = sub.add_parser("demo", help="replay a long function-calling session offline and compare prompt tokens")
    demo.add_argument("--turns", type=int, default=220, help="turns to replay (>= 40; default 220)")
    demo.add_argument("--budget", type=int, default=4096, help="prompt budget in tokens (default 4096)")
    demo.add_argument("--seed", type=int, default=7, help="seed of the scripted session (default 7)")
    demo.add_argument("--out", default="memos-demo", help="folder for the store and the plot (default ./memos-demo)")
    demo.add_argument("--quiet", action="store_true", help="no progress bar or per-compaction lines")
    chat = sub.add_parser("chat", help="an agent loop against an OpenAI-compatible endpoint, with the memory tools")
    chat.add_argument("--base-url", help="endpoint (default MEMOS_LLM_BASE_URL, else OpenAI)")
    chat.add_argument("--model", help="model name (default MEMOS_LLM_MODEL, else gpt-4o-mini)")
    chat.add_argument("--store", default=None, help="store path or SQLAlchemy URL (default MEMOS_STORE or ./memos.db)")
    chat.add_argument("--session", default="chat", help="session label (default chat)")
    chat.add_argument("--user", default="default", help="user label (default default)")
    chat.add_argument("--budget", type=int, default=8192,
                      help="prompt budget in tokens, tool schemas included (>= 1024; default 8192)")
    chat.add_argument("--max-steps", type=int, default=6, help="model calls per turn at most (default 6)")
    chat.add_argument("--llm-memory", action="store_true", help="let the same model write summaries and extract facts")
    chat.add_argument("--quiet", action="store_true", help="no banner")
    bench = sub.add_parser("bench", help="benchmarks against the usual strategies: locomo, prefeval, memdaily, tokens, overhead")
    bench_sub = bench.add_subparsers(dest="benchmark", required=True)
    locomo = bench_sub.add_parser("locomo", help="LoCoMo evidence recall and answer containment under a budget")
    locomo.add_argument("--data", default="../shared/data/locomo/locomo7.json", help="path of locomo7.json")
    locomo.add_argument("--budget", default="2048", help="prompt budgets, comma-separated (default 2048)")
    locomo.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    locomo.add_argument("--questions", type=int, default=None, help="only the first N questions of each")
    locomo.add_argument("--out", default=None, help="results JSON here, a PNG beside it (default: a new file in ./memos-bench/)")
    locomo.add_argument("--cross-session", action="store_true",
                        help="each LoCoMo session a chat of its own of one user; the questions asked in a new chat")
    locomo.add_argument("--strategies", default=None, help="only these strategies, comma-separated (default all)")
    locomo.add_argument("--date-notes", action="store_true",
                        help="each session's date as a system message before it, as apps add them")
    locomo.add_argument("--llm", action="store_true", help="also answer each question with the model and judge it "
                                                           "(MEMOS_LLM_BASE_URL / MEMOS_LLM_MODEL / OPENAI_API_KEY)")
    pref = bench_sub.add_parser("prefeval", help="PrefEval: is a stated preference in the prompt after N filler messages")
    pref.add_argument("--data", default="../shared/data/prefeval", help="the PrefEval folder")
    pref.add_argument("--filler", default="10,100,300", help="filler message counts, comma-separated (default 10,100,300)")
    pref.add_argument("--budget", type=int, default=4096, help="prompt budget in tokens (default 4096)")
    pref.add_argument("--per-topic", type=int, default=None, help="only the first N preferences of each topic")
    pref.add_argument("--strategies", default=None, help="only these strategies, comma-separated (default all)")
    pref.add_argument("--out", default=None, help="write the results as JSON here (default: a new file in ./memos-bench/)")
    daily = bench_sub.add_parser("memdaily", help="MemDaily (Chinese): is the message a question is about in the prompt")
    daily.add_argument("--data", default="../shared/data/memdaily", help="the MemDaily folder")
    daily.add_argument("--budget", type=int, default=1024, help="prompt budget in tokens (default 1024)")
    daily.add_argument("--trajectories", type=int, default=40, help="trajectories per file, one session (default 40)")
    daily.add_argument("--start", type=int, default=0, help="first trajectory of each file (default 0)")
    daily.add_argument("--files", default=None, help="only these files, comma-separated (default all)")
    daily.add_argument("--strategies", default=None, help="only these strategies, comma-separated (default all)")
    daily.add_argument("--out", default=None, help="write the results as JSON here (default: a new file in ./memos-bench/)")
    tok = bench_sub.add_parser("tokens", help="cumulative prompt tokens of a long agent session, per strategy")
    tok.add_argument("--turns", type=int, default=300, help="turns of the demo session (default 300)")
    tok.add_argument("--budget", type=int, default=4096, help="prompt budget in tokens (default 4096)")
    tok.add_argument("--out", default=None, help="results JSON here, a PNG beside it (default: a new file in ./memos-bench/)")
    over = bench_sub.add_parser("overhead", help="per-turn time and peak memory of memos as the session grows")
    over.add_argument("--sizes", default="1000,10000,100000", help="session lengths, comma-separated")
    over.add_argument("--turns", type=int, default=300, help="turns timed at each size (default 300)")
    over.add_argument("--budget", type=int, default=4096, help="prompt budget in tokens (default 4096)")
    over.add_argument("--model-ms", type=float, default=0.0,
                      help="untimed wait between context() and the reply, as for a model's answer (default 0)")
    over.add_argument("--out", default=None, help="write the results as JSON here (default: a new file in ./memos-bench/)")
    insp = sub.add_parser("inspect", help="the tiers of a session and its compaction log")
    _session_args(insp)
    insp.add_argument("--json", action="store_true", help="print JSON for scripts")
    insp.add_argument("--budget", type=int, default=None,
                      help="measure against this budget (default: the one the session was last used with)")
    exp = sub.add_parser("export", help="a session's messages, in order, as JSONL on stdout")
    _session_args(exp)
    imp = sub.add_parser("import", help="add the messages of an export (JSONL) to a session")
    _session_args(imp)
    imp.add_argument("--file", default=None, help="read this file instead of stdin")
    imp.add_argument("--append", action="store_true", help="add after the messages the session already has")
    imp.add_argument("--budget", type=int, default=None, help="prompt budget the pager works to while importing "
                                                                 "(default MEMOS_BUDGET_TOKENS, else the exported "
                                                                 "session's, else 8192)")
    mcp = sub.add_parser("mcp", help="serve a user's memory to MCP clients over stdio (needs the mcp extra)")
    mcp.add_argument("--store", default=None, help="store path or SQLAlchemy URL (default MEMOS_STORE or ./memos.db)")
    mcp.add_argument("--user", default="default", help="whose memory to serve (default default)")
    mcp.add_argument("--agent", default="default", help="agent label (default default)")
    mcp.add_argument("--session", default="mcp", help="session label of what the server logs (default mcp)")
    mcp.add_argument("--tool-prefix", default="", help="put this before every tool name (e.g. memory_)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``memos`` console script. An error is one line on stderr and a
    non-zero exit (``--debug`` shows the traceback)."""
    parser = _parser()
    args = parser.parse_args(argv)
    _show_logs()
    try:
        return _run(parser, args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader stopped reading (`memos export | head`): no error of ours
        # the interpreter flushes stdout again at exit; pointed at devnull, that does not fail too
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except SystemExit:
        raise
    except Exception as exc:
        if args.debug:
            raise
        print(f"error: {describe_error(exc, _store_of(args))}", file=sys.stderr)
        return 1


def _store_of(args: argparse.Namespace) -> str:
    return str(getattr(args, "store", None) or environment().store.url)


def describe_error(exc: BaseException, store: str = "memos.db") -> str:
    """One line saying what went wrong and what to do about it."""
    import sqlalchemy.exc

    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, sqlalchemy.exc.DBAPIError):
        detail = str(exc.orig) if exc.orig is not None else text
        if "unable to open database file" in detail or "readonly database" in detail:
            return (f"cannot open the store {store} ({detail}): its folder must exist and be writable; "
                    "choose another with --store or MEMOS_STORE")
        if "file is not a database" in detail:
            return f"{store} is not a memos store (not an SQLite database): choose another with --store or MEMOS_STORE"
        return f"the store {store} failed: {detail}"
    try:
        import openai
    except ImportError:  # pragma: no cover - openai is a dependency
        openai = None  # type: ignore[assignment]
    if openai is not None and isinstance(exc, openai.OpenAIError):
        if "api_key" in text or "credentials" in text.lower():
            return ("no API key for the model endpoint: set OPENAI_API_KEY, or point --base-url / "
                    "MEMOS_LLM_BASE_URL at a local OpenAI-compatible server (which needs none)")
        return f"the model endpoint failed: {text}"
    if isinstance(exc, ImportError):
        return text
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.strerror or text}: {exc.filename}"
    if isinstance(exc, (ValueError, KeyError, OSError)):
        return text.strip("'\"")
    return f"{type(exc).__name__}: {text} (--debug shows the traceback)"


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.command in ("inspect", "export", "import"):
        handler = {"inspect": _inspect_cmd, "export": _export_cmd, "import": _import_cmd}[args.command]
        try:
            return handler(args)
        except SystemExit as exc:
            if isinstance(exc.code, int):
                raise
            print(exc, file=sys.stderr)
            return 2
    if args.command == "bench":
        from .bench import bench as run_bench

        return run_bench(args)
    if args.command == "chat":
        if args.budget < 1024:  # memos' tool schemas alone take 571 tokens of it
            parser.error("--budget must be at least 1024")
        if args.max_steps < 1:
            parser.error("--max-steps must be at least 1")
        return _chat(args)
    if args.command == "mcp":
        return _mcp(args)
    if args.command == "demo":
        if args.turns < 40:
            parser.error("--turns must be at least 40")
        if args.budget < 512:
            parser.error("--budget must be at least 512")
        return _demo(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
