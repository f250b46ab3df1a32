"""One retrying call to an OpenAI-compatible chat endpoint.

:class:`LLMConfig` says where the endpoint is (``MEMOS_LLM_BASE_URL``, ``MEMOS_LLM_MODEL``,
``OPENAI_API_KEY``) and how hard to try. :func:`complete` sends one chat completion at
temperature 0 through the ``openai`` client, wrapped in tenacity: rate limits (honouring
``Retry-After``), timeouts, connection errors and 5xx answers are retried with jittered
exponential backoff until ``max_attempts`` or the total ``deadline_s``; anything else
(a 400 such as a context-length error, a malformed answer) fails at once. The caller
decides what to do on failure: memos falls back to its offline implementation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import openai
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential_jitter,
)

from ...core.config import environment

__all__ = ["LLMConfig", "LLMError", "complete", "make_client"]


class LLMError(Exception):
    """An LLM call failed for good (after its retries, or at once for a non-retryable error)."""


@dataclass(frozen=True, kw_only=True)
class LLMConfig:
    """Where the LLM is and how to call it."""

    # OpenAI-compatible endpoint, e.g. http://localhost:11434/v1 for Ollama; None: OpenAI.
    base_url: str | None = None
    # Model name as the endpoint knows it.
    model: str = "gpt-4o-mini"
    # API key; None reads OPENAI_API_KEY (local servers accept any non-empty key).
    api_key: str | None = None
    # Seconds one HTTP request may take.
    timeout_s: float = 30.0
    # Attempts per call, the first included.
    max_attempts: int = 4
    # Seconds all attempts of one call may take together.
    deadline_s: float = 60.0
    # Longest backoff between attempts, in seconds.
    max_backoff_s: float = 8.0
    # Tokens a summary may take in the model's answer.
    summary_max_tokens: int = 800

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LLMConfig | None:
        """A config from ``MEMOS_LLM_BASE_URL`` / ``MEMOS_LLM_MODEL`` / ``OPENAI_API_KEY``, or
        None when neither a base URL nor a model is set (memos then stays offline)."""
        llm = environment(environ).llm
        if not llm.base_url and not llm.model:
            return None
        return cls(base_url=llm.base_url, model=llm.model or cls.model, api_key=llm.api_key)


def make_client(config: LLMConfig) -> openai.OpenAI:
    """An ``openai.OpenAI`` client for the config, with the SDK's own retries off (tenacity does them)."""
    key = config.api_key or environment().llm.api_key or ("not-needed" if config.base_url else None)
    return openai.OpenAI(base_url=config.base_url, api_key=key, timeout=config.timeout_s, max_retries=0)


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, (openai.RateLimitError, openai.APITimeoutError, openai.APIConnectionError,
                        openai.InternalServerError)):
        return True
    return isinstance(exc, openai.APIStatusError) and exc.status_code >= 500


class _wait_retry_after:
    """The server's ``Retry-After`` when it sent one (capped), else jittered exponential backoff."""

    def __init__(self, cap: float) -> None:
        self.cap = cap
        self.backoff = wait_exponential_jitter(multiplier=0.25, max=cap, jitter=0.25)

    def __call__(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, openai.APIStatusError):
            raw = exc.response.headers.get("retry-after")
            try:
                if raw is not None:
                    return min(self.cap, max(0.0, float(raw)))
            except ValueError:
                pass
        return float(self.backoff(state))


def complete(client: openai.OpenAI, config: LLMConfig, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
    """One chat completion (temperature 0) with retries; raises :class:`LLMError` when it fails."""
    retrying = Retrying(
        retry=retry_if_exception(_retryable),
        stop=stop_after_attempt(config.max_attempts) | stop_after_delay(config.deadline_s),
        wait=_wait_retry_after(config.max_backoff_s),
        reraise=True,
    )
    try:
        for attempt in retrying:
            with attempt:
                return client.chat.completions.create(
                    model=config.model, messages=messages, temperature=0, **kwargs  # type: ignore[arg-type]
                )
    except Exception as exc:
        raise LLMError(f"{type(exc).__name__}: {exc}") from exc
    raise LLMError("no attempt was made")  # pragma: no cover - Retrying always attempts once
