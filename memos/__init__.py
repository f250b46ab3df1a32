"""memos: tiered memory for LLM agents.

Hot (raw recent messages), warm (rolling summary), pinned constraints, behind a pager
that keeps the prompt within a token budget and never splits a tool chain.
"""

from __future__ import annotations

import logging

from .core.config import DEFAULT_SETTINGS, MemosSettings
from .core.errors import BudgetExceeded, InvalidMessage, InvalidNamespace, MemosError, PinLimitExceeded
from .core.messages import Message
from .core.tokens import TokenCounter
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
from .session.memory import Memory, MemoryStats, PagingEvent, Rollback
from .session.store import MemoryStore, UserDeletion
from .tiers.archival import Hit
from .tiers.cold import Fact, ForgetRecord

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
