"""Errors raised by memos.

::

    MemosError
     ├── InvalidMessage (also ValueError)     a message does not have the OpenAI chat shape
     ├── InvalidNamespace (also ValueError)   a user / agent / session label is unusable
     └── BudgetExceeded                       content that may not be evicted does not fit
          └── PinLimitExceeded                 an explicit pin would not fit the pinned section's cap

Every error carries a message that names the problem; nothing already stored is
changed when one is raised.
"""

from __future__ import annotations

__all__ = ["BudgetExceeded", "InvalidMessage", "InvalidNamespace", "MemosError", "PinLimitExceeded", "StoreNotFound"]


class MemosError(Exception):
    """Base class of every error memos raises on purpose."""


class InvalidMessage(MemosError, ValueError):
    """A message given to :meth:`memos.Memory.add` is not a valid OpenAI chat message."""


class InvalidNamespace(MemosError, ValueError):
    """A namespace label (user, agent, session) is empty, not a string, or holds the separator."""


class StoreNotFound(MemosError, FileNotFoundError):
    """A SQLite store path whose folder does not exist (a typo would otherwise start an
    empty memory there): create the folder, or ask memos to (``create_folder=True``)."""


class BudgetExceeded(MemosError):
    """The content that may never leave the context (system prompt, pinned items, the
    in-flight tool chain) needs more tokens than the budget allows.

    ``needed`` is the token count of that content, ``budget`` the prompt budget.
    """

    def __init__(self, needed: int, budget: int, detail: str = "") -> None:
        self.needed = needed
        self.budget = budget
        msg = (
            f"the context needs at least {needed} tokens for content that may not be evicted "
            f"but the budget is {budget} tokens"
        )
        if detail:
            msg += f" ({detail})"
        msg += "; raise the budget or unpin something"
        super().__init__(msg)


class PinLimitExceeded(BudgetExceeded):
    """:meth:`memos.Memory.pin` was asked to pin something that would take the explicit pins
    past the pinned section's cap (``settings.pinned_share`` of the budget). Nothing was pinned.

    ``needed`` is what the explicit pins would take with it, ``budget`` the cap.
    """

    def __init__(self, needed: int, cap: int, detail: str = "") -> None:
        self.needed = needed
        self.budget = cap
        msg = (f"pinning this would take the explicit pins to {needed} tokens, over the pinned section's cap of "
               f"{cap} tokens (pinned_share of the budget)")
        if detail:
            msg += f" ({detail})"
        MemosError.__init__(self, msg + "; unpin something, shorten it, or raise pinned_share or the budget")
