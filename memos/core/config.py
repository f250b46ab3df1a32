"""Settings: one frozen record holding every default, and the one place that reads the
environment.

:class:`MemosSettings` holds the paging and recall numbers of a session. Change a setting with
:func:`dataclasses.replace` (``replace(DEFAULT_SETTINGS, budget_tokens=4096)``) or
:meth:`MemosSettings.from_env` (``MEMOS_<FIELD>``). :func:`environment` reads the other
``MEMOS_*`` variables, grouped as users think of them (store, embedding, text, LLM); the rest
of memos receives what they say and reads no variable itself.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

__all__ = ["DEFAULT_SETTINGS", "SHARE_SCOPES", "SYSTEM_MESSAGE_STYLES", "EmbeddingEnvironment", "Environment",
           "LLMEnvironment", "MemosSettings", "StoreEnvironment", "TextEnvironment", "env_flag", "environment"]

SHARE_SCOPES = ("user", "agent", "session")
SYSTEM_MESSAGE_STYLES = ("separate", "one")
# what may start the name of a memos tool (the name must stay a valid function name)
TOOL_PREFIX = re.compile(r"[A-Za-z0-9_-]{0,40}")


@dataclass(frozen=True, kw_only=True)
class MemosSettings:
    """Every tunable number of the pager and the tiers, with its default."""

    # Prompt budget in tokens: the assembled context never exceeds it.
    budget_tokens: int = 8192
    # The shares below are of the budget less the tool schemas a request carries (the
    # pinned share excepted), and the paging thresholds of that less the recall reserve.
    # Share above which old, already-used tool results become placeholders.
    soft_threshold: float = 0.60
    # Share above which the oldest hot messages are demoted.
    hard_threshold: float = 0.80
    # Share the hot tier is brought down to by a demotion.
    hot_target: float = 0.50
    # Share the rolling summary may take.
    summary_share: float = 0.15
    # Share the relevant (not pinned) facts may take.
    facts_share: float = 0.10
    # Share of the whole budget the pinned section may take. Explicit pins (pin()) must fit in it
    # beside the line telling of automatic rules past it;
    # rules pinned automatically are ranked (relevance, recency) and those past it are shown
    # as facts when relevant.
    pinned_share: float = 0.15
    # Share recalled archival items may take.
    recall_share: float = 0.60
    # Share held back for recall: paging thresholds apply to the rest.
    recall_reserve: float = 0.40
    # Bring archival items relevant to the latest user message (or query) into the prompt.
    auto_recall: bool = True
    # With context(query=...), the hot tier's older units compete with recalled items for
    # the room: those that rank for the question stay, the others give way (the newest units,
    # up to half the hot target, open tool chains, pinned messages and system events stay).
    query_focus: bool = True
    # An older hot unit stays for the question when the search finds it: by keyword, or by
    # meaning at least this share as similar as the nearest match (and its neighbours).
    focus_relative_similarity: float = 0.50
    # Archival items auto-recall looks at for each prompt.
    recall_top_k: int = 60
    # Auto-recall ignores dense matches less similar than this (cosine) to the user message.
    recall_min_similarity: float = 0.20
    # Share of the room paging works in above which the agent sees a memory-pressure notice.
    warning_threshold: float = 0.70
    # Show that notice at all.
    pressure_notice: bool = True
    # Embed archived items on a background thread (add() never waits for the model).
    background_indexing: bool = True
    # Prepare demotions (summary, facts: the LLM calls) on a background thread; the units
    # stay hot until it is done, and a prompt that would not fit waits for it.
    background_compaction: bool = False
    # Every Nth demotion rebuilds the summary from the logged originals.
    full_resummary_every: int = 5
    # A full re-summary reads at most this many of the newest demoted messages (older
    # ones live on as facts and archival items), so its cost does not grow with the session.
    resummary_window: int = 400
    # The newest N units (a turn, or a whole tool chain) always stay hot.
    keep_recent_units: int = 2
    # What the assistant referred to in its last N messages (an id or a time it quoted, a
    # promise it made) stays hot while the budget allows (ReferenceGuard).
    reference_turns: int = 3
    # A placeholder keeps this many characters of the tool result it replaces.
    placeholder_preview_chars: int = 120
    # Model whose tiktoken encoding counts tokens; None counts with cl100k_base.
    model: str | None = None
    # A Hugging Face tokenizer.json that counts tokens instead (an open model's own tokenizer).
    tokenizer: str | None = None
    # Whose long-term memory the cold facts (pinned rules included) and the archive are:
    # 'user' (every session of the user sees them, whatever the agent), 'agent' (the
    # user's sessions with the same agent) or 'session' (this session only). The hot tier
    # and the rolling summary always belong to the session.
    share: str = "user"
    # Put before the names of memos' tools (``memory_`` gives ``memory_retrieve``), so they
    # cannot collide with the app's own tools.
    tool_prefix: str = ""
    # How the prompt opens: 'separate' (the app's system messages, then each memos section as
    # a system message of its own) or 'one' (all of them joined into the first message, for
    # chat templates that take a single system message, at the start only).
    system_messages: str = "separate"

    def __post_init__(self) -> None:
        if not isinstance(self.budget_tokens, int) or self.budget_tokens < 64:
            raise ValueError(f"budget_tokens must be an int >= 64, got {self.budget_tokens!r}")
        for name in ("soft_threshold", "hard_threshold", "hot_target", "summary_share", "facts_share", "recall_share",
                     "warning_threshold", "pinned_share", "focus_relative_similarity"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0.0 < value <= 1.0:
                raise ValueError(f"{name} must be in (0, 1], got {value!r}")
        if not self.hot_target <= self.hard_threshold:
            raise ValueError(
                f"hot_target ({self.hot_target}) must not exceed hard_threshold ({self.hard_threshold})"
            )
        if self.soft_threshold > self.hard_threshold:
            raise ValueError(
                f"soft_threshold ({self.soft_threshold}) must not exceed hard_threshold ({self.hard_threshold})"
            )
        if self.resummary_window < 1:
            raise ValueError("resummary_window must be >= 1")
        if self.full_resummary_every < 1:
            raise ValueError("full_resummary_every must be >= 1")
        if self.reference_turns < 1:
            raise ValueError("reference_turns must be >= 1")
        if self.keep_recent_units < 1:
            raise ValueError("keep_recent_units must be >= 1")
        if self.recall_top_k < 1:
            raise ValueError("recall_top_k must be >= 1")
        if self.share not in SHARE_SCOPES:
            raise ValueError(f"share must be one of {', '.join(SHARE_SCOPES)}, got {self.share!r}")
        if self.system_messages not in SYSTEM_MESSAGE_STYLES:
            raise ValueError(f"system_messages must be one of {', '.join(SYSTEM_MESSAGE_STYLES)}, "
                             f"got {self.system_messages!r}")
        if not isinstance(self.tool_prefix, str) or not TOOL_PREFIX.fullmatch(self.tool_prefix):
            raise ValueError(f"tool_prefix must be up to 40 letters, digits, '_' or '-', got {self.tool_prefix!r}")
        if not 0.0 <= self.recall_reserve < 0.8:
            raise ValueError(f"recall_reserve must be in [0, 0.8), got {self.recall_reserve!r}")

    @property
    def paged_share(self) -> float:
        """The share of the room that paging works in: all of it, or with auto-recall, what
        the recall reserve leaves."""
        return 1.0 - (self.recall_reserve if self.auto_recall else 0.0)

    @property
    def hot_target_tokens(self) -> int:
        """The hot target's share of the whole budget, in tokens (a prompt's pager applies
        the share to the budget less that request's tool schemas and the recall reserve)."""
        return int(self.budget_tokens * self.hot_target)

    @property
    def summary_max_tokens(self) -> int:
        """Largest size of the stored rolling summary, in tokens (a prompt shows at most the
        summary's share of the budget less that request's tool schemas)."""
        return max(32, int(self.budget_tokens * self.summary_share))

    @property
    def pinned_max_tokens(self) -> int:
        """Largest size of the pinned section, in tokens."""
        return max(32, int(self.budget_tokens * self.pinned_share))

    @classmethod
    def from_env(cls, base: MemosSettings | None = None, environ: Mapping[str, str] | None = None) -> MemosSettings:
        """Settings from ``MEMOS_<FIELD>`` environment variables over ``base``.

        ``MEMOS_BUDGET_TOKENS=4096`` sets ``budget_tokens``; unknown variables are ignored.
        """
        env = os.environ if environ is None else environ
        base = base or DEFAULT_SETTINGS
        changes: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(f"MEMOS_{f.name.upper()}")
            if raw is None:
                continue
            current = getattr(base, f.name)
            try:
                if isinstance(current, bool):
                    changes[f.name] = _flag(raw)
                elif isinstance(current, int):
                    changes[f.name] = int(raw)
                elif isinstance(current, float):
                    changes[f.name] = float(raw)
                elif isinstance(current, str):
                    changes[f.name] = raw
                else:
                    changes[f.name] = raw or None
            except ValueError as exc:
                raise ValueError(f"MEMOS_{f.name.upper()}={raw!r} is not a valid {f.name}") from exc
        try:
            return replace(base, **changes)
        except ValueError as exc:  # a value of the right type that the settings refuse: say where it came from
            given = ", ".join(f"MEMOS_{name.upper()}={env[f'MEMOS_{name.upper()}']!r}" for name in changes)
            raise ValueError(f"{exc} (from the environment: {given})") from exc


DEFAULT_SETTINGS = MemosSettings()

_ON = frozenset({"1", "true", "yes", "on"})
_OFF = frozenset({"0", "false", "no", "off", ""})


def _flag(raw: str) -> bool:
    value = raw.strip().lower()
    if value not in _ON | _OFF:
        raise ValueError(f"expected one of {sorted(_ON | _OFF - {''})}")
    return value in _ON


def env_flag(name: str, default: bool, environ: Mapping[str, str] | None = None) -> bool:
    """An on/off environment variable (1/true/yes/on, 0/false/no/off), ``default`` when unset;
    any other value is a ``ValueError`` naming the variable."""
    raw = (os.environ if environ is None else environ).get(name)
    if raw is None:
        return default
    try:
        return _flag(raw)
    except ValueError as exc:
        raise ValueError(f"{name}={raw!r}: {exc}") from exc


RULE_MODELS = ("auto", "minilm", "ngrams")


@dataclass(frozen=True, kw_only=True)
class StoreEnvironment:
    """Where memory lives."""

    # MEMOS_STORE: a SQLite file path or an SQLAlchemy URL.
    url: str = "memos.db"
    # MEMOS_CHROMA_URL: an http(s):// Chroma server for the archival vectors.
    chroma_url: str | None = None
    # MEMOS_CHROMA_PATH: a Chroma folder (default: beside the SQLite file).
    chroma_path: str | None = None
    # MEMOS_CHROMA_PREFIX: what the Chroma collections' names start with.
    chroma_prefix: str = "memos"
    # MEMOS_TOKEN_INDEX: store archived items' token states and rank candidates by them too.
    token_index: bool = True


@dataclass(frozen=True, kw_only=True)
class EmbeddingEnvironment:
    """The dense embedding model."""

    # MEMOS_EMBEDDING_MODEL: 'all-MiniLM-L6-v2' (default) or 'multilingual-e5-small'.
    model: str = ""
    # MEMOS_EMBEDDING_MODEL_DIR: the folder of all-MiniLM-L6-v2's ONNX export (else Chroma's cache).
    model_dir: str | None = None
    # MEMOS_EMBEDDING_LANGUAGES: the languages the model reads (else its config's).
    languages: str | None = None


@dataclass(frozen=True, kw_only=True)
class TextEnvironment:
    """Counting tokens and reading rules."""

    # MEMOS_ENCODING: a tiktoken encoding name that counts tokens.
    encoding: str | None = None
    # MEMOS_RULE_MODEL: 'auto', 'minilm' or 'ngrams' (see memos.text.classifiers.detector).
    rule_model: str = "auto"


@dataclass(frozen=True, kw_only=True)
class LLMEnvironment:
    """An OpenAI-compatible model for summaries, facts and rules (none: memos stays offline)."""

    # MEMOS_LLM_BASE_URL: the endpoint, e.g. http://localhost:11434/v1.
    base_url: str | None = None
    # MEMOS_LLM_MODEL: the model name as the endpoint knows it.
    model: str | None = None
    # OPENAI_API_KEY: the key (local servers accept any).
    api_key: str | None = None


class Environment:
    """Every ``MEMOS_*`` variable that is not a :class:`MemosSettings` field, by group; each
    group is read when it is asked for, so a bad value is reported where it is used."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._env = environ

    def _text(self, name: str) -> str | None:
        return self._env.get(name) or None

    @property
    def store(self) -> StoreEnvironment:
        """MEMOS_STORE, MEMOS_CHROMA_URL, MEMOS_CHROMA_PATH, MEMOS_CHROMA_PREFIX, MEMOS_TOKEN_INDEX."""
        return StoreEnvironment(url=self._text("MEMOS_STORE") or "memos.db", chroma_url=self._text("MEMOS_CHROMA_URL"),
                                chroma_path=self._text("MEMOS_CHROMA_PATH"),
                                chroma_prefix=self._text("MEMOS_CHROMA_PREFIX") or "memos",
                                token_index=env_flag("MEMOS_TOKEN_INDEX", True, self._env))

    @property
    def embedding(self) -> EmbeddingEnvironment:
        """MEMOS_EMBEDDING_MODEL, MEMOS_EMBEDDING_MODEL_DIR, MEMOS_EMBEDDING_LANGUAGES."""
        return EmbeddingEnvironment(model=(self._env.get("MEMOS_EMBEDDING_MODEL") or "").strip(),
                                    model_dir=self._text("MEMOS_EMBEDDING_MODEL_DIR"),
                                    languages=self._text("MEMOS_EMBEDDING_LANGUAGES"))

    @property
    def text(self) -> TextEnvironment:
        """MEMOS_ENCODING, MEMOS_RULE_MODEL."""
        rule_model = (self._env.get("MEMOS_RULE_MODEL") or "auto").strip().lower() or "auto"
        if rule_model not in RULE_MODELS:
            raise ValueError(f"MEMOS_RULE_MODEL must be 'auto', 'minilm' or 'ngrams', got {rule_model!r}")
        return TextEnvironment(encoding=self._text("MEMOS_ENCODING"), rule_model=rule_model)

    @property
    def llm(self) -> LLMEnvironment:
        """MEMOS_LLM_BASE_URL, MEMOS_LLM_MODEL, OPENAI_API_KEY."""
        return LLMEnvironment(base_url=self._text("MEMOS_LLM_BASE_URL"), model=self._text("MEMOS_LLM_MODEL"),
                              api_key=self._text("OPENAI_API_KEY"))

    @property
    def settings_given(self) -> frozenset[str]:
        """The :class:`MemosSettings` fields that ``MEMOS_<FIELD>`` variables set."""
        return frozenset(f.name for f in fields(MemosSettings) if f"MEMOS_{f.name.upper()}" in self._env)


def environment(environ: Mapping[str, str] | None = None) -> Environment:
    """The environment's ``MEMOS_*`` variables as they are now (``os.environ`` unless
    ``environ`` is given); a group's bad value is a ``ValueError`` naming the variable when
    that group is read."""
    return Environment(os.environ if environ is None else environ)
