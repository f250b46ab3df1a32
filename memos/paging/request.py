"""One prompt's request: what the prompt is for and what the API request carries beside
the messages. :meth:`memos.Memory.context` builds one per prompt and hands it through the
pager and the assembler, as tenacity's ``RetryCallState`` travels through its strategies;
nothing of it is written onto them."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Request"]


@dataclass(frozen=True)
class Request:
    """A prompt's request (frozen: narrowing the query gives a new one)."""

    # the question the prompt ends with (context(query=...)), not stored; None: the hot tier's newest unit
    query: str | None = None
    # tokens of the tool schemas the request carries, and of the caller's reserve
    tools_tokens: int = 0
    # whether the tools include memos' archive (the memory-pressure notice asks the model to call it)
    archive_offered: bool = True
    # the query's cap, once the prompt could not give it the newest unit's room
    query_cap: int | None = None

    @property
    def asking(self) -> bool:
        """Whether the prompt ends with a query rather than the hot tier's newest unit."""
        return self.query is not None
