"""A :class:`~memos.text.classifiers.rules.RuleDetector` backed by an LLM with structured output.

The model is shown the numbered sentences of a user message and must call
``judge_rules`` with one judgement per sentence: ``constraint``, ``preference`` or
``none`` (a strict JSON schema). When the call or its answer fails, the fallback detector
(the shipped classifier) judges instead, and its judgements say so in ``by``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

import openai
from pydantic import BaseModel, ConfigDict, ValidationError

from ...text.classifiers.detector import default_detector
from ...text.classifiers.rules import RuleDetector, RuleJudgement, judge_each_text
from .client import LLMConfig, LLMError, complete, make_client

__all__ = ["JUDGE_RULES_TOOL", "LLMRuleJudge"]

JUDGE_INSTRUCTIONS = """\
[memos:rules] For each numbered sentence the user wrote, say whether it sets a rule the \
assistant must keep following from now on: a constraint (an instruction, a limit, an allergy or \
diet, a format, a language, how to address the user, "from now on") or a standing preference. \
Narrative about the past, other people's habits, jokes, questions and one-off requests are none. \
Call judge_rules with one judgement per sentence."""

JUDGE_RULES_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "judge_rules",
        "description": "Judge which sentences set rules for the assistant.",
        "strict": True,
        "parameters": {
            "type": "object",
            "properties": {
                "judgements": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "index": {"type": "integer"},
                            "kind": {"type": "string", "enum": ["constraint", "preference", "none"]},
                        },
                        "required": ["index", "kind"],
                        "additionalProperties": False,
                    },
                }
            },
            "required": ["judgements"],
            "additionalProperties": False,
        },
    },
}


class _Judgement(BaseModel):
    model_config = ConfigDict(extra="forbid")
    index: int
    kind: Literal["constraint", "preference", "none"]


class _Judgements(BaseModel):
    model_config = ConfigDict(extra="forbid")
    judgements: list[_Judgement]


class LLMRuleJudge:
    """Rules judged by an LLM; ``fallback`` (default: the shipped classifier) when it fails."""

    name = "llm"

    def __init__(self, config: LLMConfig, client: openai.OpenAI | None = None, *,
                 fallback: RuleDetector | None = None) -> None:
        self.config = config
        self.client = client or make_client(config)
        self.fallback = fallback

    def messages(self, sentences: Sequence[str]) -> list[dict[str, Any]]:
        """The chat messages sent for one judgement."""
        numbered = "\n".join(f"{i}. {s}" for i, s in enumerate(sentences))
        return [{"role": "system", "content": JUDGE_INSTRUCTIONS}, {"role": "user", "content": numbered}]

    def judge(self, sentences: Sequence[str]) -> list[RuleJudgement]:
        """One judgement per sentence, by the LLM, or by the fallback (``by`` then records why)."""
        return self._judge(sentences, each=False)

    def judge_each(self, texts: Sequence[str]) -> list[RuleJudgement]:
        """One judgement per text, each as a message of its own: the LLM judges them in one
        request as it judges a message's sentences (the fallback judges them one by one)."""
        return self._judge(texts, each=True)

    def _judge(self, sentences: Sequence[str], *, each: bool) -> list[RuleJudgement]:
        if not sentences:
            return []
        try:
            reply = complete(self.client, self.config, self.messages(sentences), tools=[JUDGE_RULES_TOOL],
                             tool_choice={"type": "function", "function": {"name": "judge_rules"}})
            call = reply.choices[0].message.tool_calls[0]
            found = _Judgements.model_validate(json.loads(call.function.arguments)).judgements
        except (LLMError, AttributeError, IndexError, TypeError, ValueError, ValidationError) as exc:
            fallback = self.fallback or default_detector()
            reason = f"{type(exc).__name__}: {exc}"[:160]
            judged = judge_each_text(fallback, sentences) if each else fallback.judge(sentences)
            return [RuleJudgement(j.sentence, j.kind, j.score, f"{j.by} (fallback: {reason})") for j in judged]
        kinds = {j.index: j.kind for j in found if 0 <= j.index < len(sentences)}
        return [RuleJudgement(s, kinds.get(i, "none"), 1.0 if kinds.get(i, "none") != "none" else 0.0, self.name)
                for i, s in enumerate(sentences)]
