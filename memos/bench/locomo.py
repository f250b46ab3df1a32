"""LoCoMo: is the evidence for each question in the prompt a strategy builds under a budget?

Each conversation is replayed turn by turn (speaker A as ``user``, speaker B as
``assistant``; each turn reads "Name: text", the first turn of a session carries the
session's date, a shared image its caption). Then, for every question of categories 1-4,
the strategy builds its prompt with the question as the query (questions are not
stored), and the prompt is scored: evidence recall (share of the question's evidence
turns whose text is in it) and answer containment (the gold answer string is in it).
With ``--llm``, the model answers from each prompt and judges its answer against the gold.

With ``cross_session`` (``memos bench locomo --cross-session``) each LoCoMo session is a chat
of its own of one user (memos: a session of its own on one store) and the questions are asked
in a new chat: long-term memory. The chat window and the summary buffer see only the new chat;
the searches see every earlier turn, with the same budget.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.tokens import TokenCounter
from .datafiles import read_json, shaped_as
from .progress import ProgressFn
from .scoring import answer_contained, context_text, evidence_recall, mean
from .strategies import STRATEGIES, embedding_model_name, make_strategy

__all__ = ["CATEGORIES", "Conversation", "LLMJudge", "load_locomo", "plot_locomo", "run_locomo"]

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


@dataclass(frozen=True)
class Conversation:
    """One LoCoMo conversation as chat messages, with its scored questions."""

    sample_id: str
    messages: tuple[dict[str, Any], ...]
    turn_text: dict[str, str]  # dia_id -> the turn's text
    questions: tuple[dict[str, Any], ...]
    session_starts: tuple[int, ...] = ()  # index in ``messages`` of each session's first turn


def _sessions(conv: dict[str, Any]) -> Iterator[tuple[int, list[dict[str, Any]], str]]:
    keys = [k for k in conv if k.startswith("session_") and not k.endswith("date_time")]
    for k in sorted(keys, key=lambda k: int(k.split("_")[1])):
        if isinstance(conv[k], list):
            yield int(k.split("_")[1]), conv[k], str(conv.get(f"{k}_date_time", ""))


def load_locomo(path: str | Path, *, conversations: int | None = None, date_notes: bool = False) -> list[Conversation]:
    """Read ``locomo7.json``; malformed evidence ids ("D8:6; D9:17", "D") are split or skipped.
    Each session's date goes before its first turn's text, or, with ``date_notes``, in a
    system message of its own before it (``[session 12: 1:56 pm on 8 May, 2023]``), as apps add them.
    Raises ``ValueError`` naming the file when it is not a LoCoMo file."""
    with shaped_as(path, "a LoCoMo file (a list of conversations, each with conversation and qa)"):
        return [_conversation(item, i, date_notes) for i, item in enumerate(read_json(path)[:conversations])]


def _conversation(item: dict[str, Any], index: int, date_notes: bool) -> Conversation:
    """One conversation of the file: its turns as messages, its questions with their evidence texts."""
    conv = item["conversation"]
    a = conv["speaker_a"]
    messages: list[dict[str, Any]] = []
    texts: dict[str, str] = {}
    starts: list[int] = []
    for number, turns, date in _sessions(conv):
        starts.append(len(messages))  # a session starts with its date note, when there is one
        if date_notes and date:
            messages.append({"role": "system", "content": f"[session {number}: {date}]"})
        for i, t in enumerate(turns):
            text = str(t.get("text", ""))
            texts[str(t.get("dia_id"))] = text
            body = f"{t['speaker']}: {text}"
            if t.get("blip_caption"):
                body += f" [shares a photo: {t['blip_caption']}]"
            if i == 0 and date and not date_notes:
                body = f"({date}) {body}"
            messages.append({"role": "user" if t["speaker"] == a else "assistant", "content": body})
    questions = []
    for q in item.get("qa", []):
        if q.get("category") not in CATEGORIES:
            continue
        ids = [e.strip() for raw in q.get("evidence", []) for e in str(raw).split(";")]
        evidence = [texts[e] for e in ids if e in texts]
        questions.append({"question": q["question"], "answer": q.get("answer"), "category": q["category"],
                          "evidence": evidence})
    return Conversation(str(item.get("sample_id", index)), tuple(messages), texts, tuple(questions), tuple(starts))


ANSWER_PROMPT = ("[memos:answer] Answer the user's last question from the conversation and memory in this prompt. "
                 "Reply with the answer only, in a few words; if the prompt does not say, reply 'not mentioned'.")
JUDGE_PROMPT = ("[memos:judge] You grade answers. Given a question, the gold answer and a model's answer, reply with "
                "exactly CORRECT if the model's answer means the same as the gold answer (dates and names may be "
                "written differently), otherwise exactly WRONG.")


class LLMJudge:
    """Answers a question from a strategy's prompt with the model, then asks the model
    whether that answer matches the gold one (the LLM-as-judge protocol of memory benchmarks)."""

    def __init__(self, config: Any) -> None:
        from ..adapters.llm import make_client

        self.config = config
        self.client = make_client(config)
        self.calls = 0

    def _ask(self, messages: list[dict[str, Any]]) -> str:
        from ..adapters.llm.client import complete

        self.calls += 1
        reply = complete(self.client, self.config, messages, max_tokens=64)
        return str(reply.choices[0].message.content or "").strip()

    def grade(self, prompt: list[dict[str, Any]], question: str, gold: Any) -> tuple[str, bool]:
        """The model's answer to ``question`` from ``prompt``, and whether the judge accepts it."""
        answer = self._ask([{"role": "system", "content": ANSWER_PROMPT}, *prompt])
        verdict = self._ask([{"role": "system", "content": JUDGE_PROMPT},
                             {"role": "user", "content": f"Question: {question}\nGold answer: {gold}\nModel answer: {answer}"}])
        return answer, verdict.upper().startswith("CORRECT")


def run_locomo(
    data: str | Path,
    *,
    budgets: Sequence[int] = (2048,),
    strategies: Sequence[str] = STRATEGIES,
    conversations: int | None = None,
    questions: int | None = None,
    progress: ProgressFn | None = None,
    llm: Any = None,
    cross_session: bool = False,
    date_notes: bool = False,
) -> dict[str, Any]:
    """Run the benchmark; returns the JSON-able result (see ``memos bench locomo``).

    With ``llm`` (an :class:`~memos.adapters.llm.LLMConfig`), every prompt is also answered by the
    model and the answer judged by it: ``llm_accuracy`` overall and by category."""
    counter = TokenCounter()
    judge = LLMJudge(llm) if llm is not None else None
    convs = load_locomo(data, conversations=conversations, date_notes=date_notes)
    results = []
    runs = [(b, n) for b in budgets for n in strategies if not (n == "full_history" and b != budgets[0])]
    done, total = 0, len(runs) * len(convs)
    for budget in budgets:
        for name in strategies:
            if name == "full_history" and budget != budgets[0]:
                continue  # no budget: the same at every budget
            rec: list[float] = []
            ans: list[float] = []
            rates = ["evidence_recall", "answer_containment", *(["llm_accuracy"] if judge else [])]
            by_cat: dict[int, dict[str, list[float]]] = {c: {k: [] for k in rates} for c in CATEGORIES}
            judged: list[float] = []
            tokens: list[int] = []
            ingest_s = 0.0
            turns = 0
            query_ms: list[float] = []
            over = 0
            per_question: dict[str, list[dict[str, Any]]] = {}  # each question's scores, in the conversation's order
            for conv in convs:
                strat = make_strategy(name, counter, budget)
                t0 = time.perf_counter()
                starts = set(conv.session_starts[1:]) if cross_session else set()
                for i, m in enumerate(conv.messages):
                    if i in starts:
                        strat.new_session(f"session-{sorted(starts).index(i) + 2}")
                    strat.add(m)
                if cross_session:
                    strat.new_session("questions")
                ingest_s += time.perf_counter() - t0
                turns += len(conv.messages)
                for q in conv.questions[:questions]:
                    t1 = time.perf_counter()
                    ctx = strat.context(q["question"])
                    query_ms.append((time.perf_counter() - t1) * 1000)
                    n = counter.count_messages(ctx)
                    tokens.append(n)
                    over += name != "full_history" and n > budget
                    text = context_text(ctx)
                    r = evidence_recall(text, q["evidence"])
                    a = float(answer_contained(text, q["answer"]))
                    if r is not None:
                        rec.append(r)
                        by_cat[q["category"]]["evidence_recall"].append(r)
                    ans.append(a)
                    by_cat[q["category"]]["answer_containment"].append(a)
                    per_question.setdefault(conv.sample_id, []).append(
                        {"evidence_recall": None if r is None else round(r, 4), "answer_contained": a})
                    if judge is not None:
                        _, ok = judge.grade(ctx, q["question"], q["answer"])
                        judged.append(float(ok))
                        per_question[conv.sample_id][-1]["llm_correct"] = float(ok)
                        by_cat[q["category"]]["llm_accuracy"].append(float(ok))
                strat.close()
                done += 1
                if progress:
                    progress(done, total, f"{name} @ {budget}: {conv.sample_id}")
            results.append({
                "strategy": name,
                "budget": None if name == "full_history" else budget,
                "metrics": {
                    "evidence_recall": mean(rec), "answer_containment": mean(ans),
                    "mean_context_tokens": round(mean(tokens), 1), "ms_per_turn": round(ingest_s * 1000 / max(1, turns), 3),
                    "ms_per_question": round(mean(query_ms), 2), "questions": len(ans), "over_budget": over,
                    **({"llm_accuracy": mean(judged)} if judge else {}),
                },
                "by_category": {CATEGORIES[c]: {k: mean(v) for k, v in d.items()} for c, d in by_cat.items()},
                "per_question": per_question,
            })
    return {
        "benchmark": "locomo",
        "params": {"data": str(data), "budgets": list(budgets), "conversations": len(convs), "date_notes": date_notes,
                   "cross_session": cross_session,
                   "questions_per_conversation": questions, "tokens": counter.encoding_name,
                   "embedding_model": embedding_model_name(),
                   "llm": {"model": llm.model, "base_url": llm.base_url, "calls": judge.calls} if judge else None},
        "results": results,
    }


def plot_locomo(result: dict[str, Any], path: str | Path) -> Path:
    """A PNG of evidence recall by budget, one line per strategy (full history as a line)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    budgets = result["params"]["budgets"]
    for name in dict.fromkeys(r["strategy"] for r in result["results"]):
        rows = [r for r in result["results"] if r["strategy"] == name]
        if rows[0]["budget"] is None:
            ax.axhline(rows[0]["metrics"]["evidence_recall"], color="grey", linestyle="--", label=f"{name} (no budget)")
            continue
        ax.plot([r["budget"] for r in rows], [r["metrics"]["evidence_recall"] for r in rows], marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xticks(budgets, [str(b) for b in budgets])
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("prompt budget (tokens)")
    ax.set_ylabel("evidence recall")
    ax.set_title(f"LoCoMo evidence recall by budget ({result['params']['conversations']} conversations)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
