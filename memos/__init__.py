"""memos: tiered memory for LLM agents.

Hot (raw recent messages), warm (rolling summary), pinned constraints, behind a pager
that keeps the prompt within a token budget and never splits a tool chain.
"""

from __future__ import annotations

import logging

from .config import DEFAULT_SETTINGS, MemosSettings
from .errors import BudgetExceeded, InvalidMessage, InvalidNamespace, MemosError, PinLimitExceeded
from .memory import Memory, MemoryStats, PagingEvent, Rollback
from .memory_store import MemoryStore, UserDeletion
from .messages import Message
from .paging.guards import (
    ALLOW_ALL,
    ConstraintGuard,
    Guard,
    PinGuard,
    RecencyGuard,
    ReferenceGuard,
    ToolChainGuard,
    Verdict,
)
from .tiers.archival import Hit
from .tiers.cold import Fact, ForgetRecord
from .tokens import TokenCounter

__all__ = [
    "ALLOW_ALL",
    "DEFAULT_SETTINGS",
    "BudgetExceeded",
    "ConstraintGuard",
    "Fact",
    "ForgetRecord",
    "Guard",
    "Hit",
    "InvalidMessage",
    "InvalidNamespace",
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
    "TokenCounter",
    "UserDeletion",
    "ToolChainGuard",
    "Verdict",
]

__version__ = "0.1.0"

# operational messages (no model, a backend down) go to the "memos" logger; the application
# decides where they are shown
logging.getLogger("memos").addHandler(logging.NullHandler())
