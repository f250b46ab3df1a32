"""A :class:`~memos.tiers.warm.Summarizer` backed by an OpenAI-compatible LLM."""

from __future__ import annotations

from typing import Any

import openai

from ...tiers.hot import render_text
from ...tiers.warm import SummaryPlan
from .client import LLMConfig, LLMError, complete, make_client

__all__ = ["SUMMARY_INSTRUCTIONS", "LLMSummarizer"]

SUMMARY_INSTRUCTIONS = """\
[memos:summarize] You maintain the running memory of a conversation between a user and an \
assistant that uses tools. Write the memory as short bullet lines, one fact or event per line.
Keep:
- the user's goal and every constraint or preference they stated;
- decisions made, and what is done, in progress and blocked;
- failed attempts (what was tried and why it failed);
- the next steps;
- every id, order number, amount, date, email, URL, file path and address exactly as written.
Drop greetings, small talk, repeated reasoning, and values that were later corrected \
(keep only the corrected value).
Answer with the bullet lines only."""


class LLMSummarizer:
    """Summaries written by an LLM: incremental (the previous summary is given and updated)
    or, every Nth demotion, rebuilt from the original messages."""

    name = "llm"

    def __init__(self, config: LLMConfig, client: openai.OpenAI | None = None) -> None:
        self.config = config
        self.client = client or make_client(config)

    def messages(self, plan: SummaryPlan) -> list[dict[str, Any]]:
        """The chat messages sent for a plan (the instructions, then the material)."""
        transcript = "\n".join(f"#{m.seq} {m.role}: {render_text(m.data)}" for m in plan.messages)
        parts = []
        if plan.kind == "incremental" and plan.previous:
            parts.append("Current memory (update it; do not rewrite it from nothing):\n" + plan.previous)
            parts.append("New messages to fold in:\n" + transcript)
        else:
            parts.append("Messages to summarise from scratch:\n" + transcript)
        if plan.superseded:
            parts.append("These values were corrected later; do not present them as current: " + "; ".join(plan.superseded))
        parts.append(f"Stay under {plan.max_tokens} tokens.")
        return [{"role": "system", "content": SUMMARY_INSTRUCTIONS}, {"role": "user", "content": "\n\n".join(parts)}]

    def summarize(self, plan: SummaryPlan) -> str:
        """The new summary; raises :class:`~memos.adapters.llm.client.LLMError` when the LLM fails."""
        reply = complete(self.client, self.config, self.messages(plan),
                         max_tokens=min(self.config.summary_max_tokens, max(64, plan.max_tokens)))
        try:
            text = reply.choices[0].message.content
        except (AttributeError, IndexError, TypeError) as exc:
            raise LLMError(f"malformed completion: {exc}") from exc
        if not isinstance(text, str) or not text.strip():
            raise LLMError("the LLM returned an empty summary")
        return text.strip()
