"""memos: tiered memory for LLM agents.

Hot (raw recent messages), warm (rolling summary), pinned constraints, behind a pager
that keeps the prompt within a token budget and never splits a tool chain.
"""

from __future__ import annotations

import logging

from .adapters.agent import TurnResult
from .adapters.llm import LLMConfig
from .core.config import DEFAULT_SETTINGS, MemosSettings
from .core.errors import BudgetExceeded, InvalidMessage, InvalidNamespace, MemosError, PinLimitExceeded, StoreNotFound
from .core.messages import Message
from .core.tokens import TokenCounter
from .paging.compaction import PagingEvent
from .paging.guards import (
    ALLOW_ALL,
    ConstraintGuard,
    Guard,
    GuardContext,
    GuardFn,
    PinGuard,
    RecencyGuard,
    ReferenceGuard,
    ToolChainGuard,
    Verdict,
)
from .paging.journal import Rollback
from .paging.stats import ArchiveCounts, MemoryStats
from .session.memory import Memory
from .session.store import MemoryStore
from .storage.facts import Fact, ForgetRecord
from .storage.items import Hit
from .storage.log import CompactionRow, Store, SummaryRow
from .storage.vectors import ArchiveBackend
from .text.embeddings import Embedder
from .tiers.erasure import UserDeletion
from .tiers.extract import FactExtractor, RuleExtractor
from .tiers.hot import Unit
from .tiers.warm import ExtractiveSummarizer, Summarizer

# every type that appears in a public signature (Memory, MemoryStore and what they return)
__all__ = [
    "ALLOW_ALL",
    "DEFAULT_SETTINGS",
    "ArchiveBackend",
    "ArchiveCounts",
    "BudgetExceeded",
    "CompactionRow",
    "ConstraintGuard",
    "Embedder",
    "ExtractiveSummarizer",
    "Fact",
    "FactExtractor",
    "ForgetRecord",
    "Guard",
    "GuardContext",
    "GuardFn",
    "Hit",
    "InvalidMessage",
    "InvalidNamespace",
    "LLMConfig",
    "Memory",
    "MemoryStats",
    "MemoryStore",
    "MemosError",
    "MemosSettings",
    "Message",
    "PagingEvent",
    "PinGuard",
    "PinLimitExceeded",
    "RecencyGuard",
    "ReferenceGuard",
    "Rollback",
    "RuleExtractor",
    "Store",
    "StoreNotFound",
    "Summarizer",
    "SummaryRow",
    "TokenCounter",
    "ToolChainGuard",
    "TurnResult",
    "Unit",
    "UserDeletion",
    "Verdict",
]

__version__ = "0.1.0"

# operational messages (no model, a backend down) go to the "memos" logger; the application
# decides where they are shown
logging.getLogger("memos").addHandler(logging.NullHandler())
