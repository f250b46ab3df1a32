"""The LLM paths: summaries and fact extraction by any OpenAI-compatible endpoint.

Each is used only when configured (``Memory(llm=LLMConfig(...))`` or
``MEMOS_LLM_BASE_URL`` / ``MEMOS_LLM_MODEL``); when a call still fails after its
retries, memos does that step offline and records the fallback.
"""

from .client import LLMConfig, LLMError, complete, make_client
from .extractor import RECORD_FACTS_TOOL, LLMFactExtractor
from .rules import JUDGE_RULES_TOOL, LLMRuleJudge
from .summarizer import SUMMARY_INSTRUCTIONS, LLMSummarizer

__all__ = [
    "JUDGE_RULES_TOOL",
    "RECORD_FACTS_TOOL",
    "SUMMARY_INSTRUCTIONS",
    "LLMConfig",
    "LLMError",
    "LLMFactExtractor",
    "LLMRuleJudge",
    "LLMSummarizer",
    "complete",
    "make_client",
]
