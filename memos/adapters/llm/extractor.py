"""A :class:`~memos.tiers.extract.FactExtractor` backed by an LLM with structured output.

The model is shown the facts already known (with their ids) and the new messages, and
must call ``record_facts`` with a list of ADD / UPDATE / INVALIDATE / NOOP operations
(a strict JSON schema). The operations become candidates and invalidations for the cold
tier, which applies them with its own rules (history is never overwritten).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

import openai
from pydantic import BaseModel, ConfigDict, ValidationError

from ...core.messages import Message
from ...tiers.cold import FACT_KINDS, RULE_KINDS, Fact, FactCandidate, Invalidation, fact_key
from ...tiers.extract import Extraction
from ...tiers.hot import render_text
from .client import LLMConfig, LLMError, complete, make_client

__all__ = ["RECORD_FACTS_TOOL", "LLMFactExtractor"]

EXTRACT_INSTRUCTIONS = """\
[memos:extract] Read the new messages and record what should be remembered about the user \
and the task, by calling record_facts. Kinds: constraint (a rule the assistant must follow), \
preference, identifier (ids, order numbers, amounts, dates, emails, URLs, paths, addresses: \
copy them exactly), task_state, decision, failed_attempt, fact. Operations: ADD a new fact; \
UPDATE when a message corrects a known fact (give its fact_id and the new value); INVALIDATE \
when the user revokes a known fact (give its fact_id); NOOP when it is already known."""

RECORD_FACTS_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "record_facts",
        "description": "Record facts extracted from the conversation.",
        "strict": True,
        "parameters": {
            "type": "object",
            "properties": {
                "operations": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "op": {"type": "string", "enum": ["ADD", "UPDATE", "INVALIDATE", "NOOP"]},
                            "kind": {"type": "string", "enum": list(FACT_KINDS)},
                            "key": {"type": "string"},
                            "value": {"type": "string"},
                            "fact_id": {"type": ["integer", "null"]},
                            "source_seq": {"type": ["integer", "null"]},
                        },
                        "required": ["op", "kind", "key", "value", "fact_id", "source_seq"],
                        "additionalProperties": False,
                    },
                }
            },
            "required": ["operations"],
            "additionalProperties": False,
        },
    },
}


class _Op(BaseModel):
    model_config = ConfigDict(extra="forbid")
    op: Literal["ADD", "UPDATE", "INVALIDATE", "NOOP"]
    kind: Literal["constraint", "preference", "identifier", "task_state", "decision", "failed_attempt", "fact"]
    key: str
    value: str
    fact_id: int | None = None
    source_seq: int | None = None


class _Ops(BaseModel):
    model_config = ConfigDict(extra="forbid")
    operations: list[_Op]


class LLMFactExtractor:
    """Facts proposed by an LLM as ADD / UPDATE / INVALIDATE / NOOP operations."""

    name = "llm"

    def __init__(self, config: LLMConfig, client: openai.OpenAI | None = None) -> None:
        self.config = config
        self.client = client or make_client(config)

    def messages(self, messages: Sequence[Message], known: Sequence[Fact]) -> list[dict[str, Any]]:
        """The chat messages sent for one extraction."""
        facts = "\n".join(f"[{f.id}] {f.kind} {f.key}: {f.value}" for f in known[-100:]) or "(none yet)"
        transcript = "\n".join(f"#{m.seq} {m.role}: {render_text(m.data)}" for m in messages)
        return [
            {"role": "system", "content": EXTRACT_INSTRUCTIONS},
            {"role": "user", "content": f"Known facts:\n{facts}\n\nNew messages:\n{transcript}"},
        ]

    def extract(self, messages: Sequence[Message], known: Sequence[Fact] = ()) -> Extraction:
        """Operations from the LLM as an :class:`~memos.tiers.extract.Extraction`; raises
        :class:`~memos.adapters.llm.client.LLMError` when the call or its answer is unusable."""
        if not messages:
            return Extraction()
        reply = complete(self.client, self.config, self.messages(messages, known), tools=[RECORD_FACTS_TOOL],
                         tool_choice={"type": "function", "function": {"name": "record_facts"}})
        try:
            call = reply.choices[0].message.tool_calls[0]
            ops = _Ops.model_validate(json.loads(call.function.arguments)).operations
        except (AttributeError, IndexError, TypeError, ValueError, ValidationError) as exc:
            raise LLMError(f"malformed record_facts answer: {exc}") from exc
        by_id = {f.id: f for f in known}
        newest = max(m.seq for m in messages)
        ids = tuple(m.id for m in messages)
        cands: list[FactCandidate] = []
        invs: list[Invalidation] = []
        for op in ops:
            seq = op.source_seq if op.source_seq is not None else newest
            if op.op == "NOOP":
                continue
            if op.op == "INVALIDATE":
                target = by_id.get(op.fact_id) if op.fact_id is not None else None
                if target is not None or op.value.strip():
                    invs.append(Invalidation(target.value if target else op.value, ids, seq,
                                             fact_id=target.id if target else None))
                continue
            if not op.key.strip() or not op.value.strip():
                continue
            # a rule's key is its text, as for every other path that stores rules (fact_key)
            key = fact_key(op.kind, op.value) if op.kind in RULE_KINDS else op.key
            if op.op == "UPDATE" and op.fact_id in by_id:
                key = by_id[op.fact_id].key  # type: ignore[index]
            cands.append(FactCandidate(op.kind, key[:160], op.value, ids, seq,
                                       pinned=op.kind in RULE_KINDS, single=op.op == "UPDATE",
                                       once=op.kind == "identifier" and op.op == "ADD", origin="llm"))
        return Extraction(tuple(cands), tuple(invs))
