"""Text patterns the rule-based parts share: identifiers, small talk, cue words."""

from __future__ import annotations

import functools
import re

__all__ = ["ACK", "DECISION", "FAILURE", "GOAL", "IDENTIFIER", "FOLD_TABLE", "find_codes", "find_identifiers",
           "fold", "identifier_spans", "references", "value_kind"]

# Characters an id is typed or written with that read as ASCII ones: full-width letters,
# digits, hyphen, underscore, dot and at sign (an input method's full-width mode types
# "ＯＲＤ－８８１２３"), and the hyphens models and word processors write (U+2010 hyphen, U+2011
# non-breaking hyphen, U+2012 figure dash, U+2212 minus, U+FE63 small hyphen-minus). One
# character for one, so a span of the folded text is the same span of the original. Other
# full-width punctuation is kept: "，" and "。" end a URL or an id glued to Chinese text.
_FOLD = {c: c - 0xFEE0 for c in (*range(0xFF10, 0xFF1A), *range(0xFF20, 0xFF3B), *range(0xFF41, 0xFF5B),
                                  0xFF0D, 0xFF0E, 0xFF3F)}
_FOLD.update(dict.fromkeys((0x2010, 0x2011, 0x2012, 0x2212, 0xFE63), ord("-")))
_FOLDED = re.compile("[" + "".join(map(chr, sorted(_FOLD))) + "]")
# what fold() replaces and with what, as the two strings of SQL's translate()
FOLD_TABLE = ("".join(map(chr, sorted(_FOLD))), "".join(chr(_FOLD[c]) for c in sorted(_FOLD)))


def fold(text: str) -> str:
    """``text`` with full-width letters, digits, hyphens, underscores, dots and at signs,
    and the other hyphens, as their ASCII characters (the same length: spans carry over)."""
    return text.translate(_FOLD) if _FOLDED.search(text) else text


# Boundaries are ASCII-only: an id glued to Chinese text ("订单号是ORD-88123，") is still an id,
# where \b would see no boundary between two word characters.
_L = r"(?<![A-Za-z0-9_])"
_R = r"(?![A-Za-z0-9_])"
_IDENTIFIER_PARTS = [
    r"https?://[^\s<>\"')\]\u3000-\u303f\uff00-\uffef]+",  # URLs (they end at CJK punctuation)
    r"(?<![A-Za-z0-9.+_-])[A-Za-z0-9.+_-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+",  # emails (from the start of a run: linear)
    r"(?<![\w/])(?:~|\.{1,2})?/(?:[\w.-]+/)*[\w.-]+\.\w+",  # unix file paths with an extension
    r"[A-Za-z]:\\(?:[\w .-]+\\)*[\w .-]+",  # windows paths
    rf"{_L}\d{{4}}-\d{{2}}-\d{{2}}(?:[T ]\d{{2}}:\d{{2}}(?::\d{{2}})?)?{_R}",  # ISO dates (before the codes below)
    rf"{_L}[A-Z]{{2,}}[A-Z0-9]*[-_#]?\d[A-Za-z0-9_-]*{_R}",  # ORD-12345, INV2024, TKT-88-A
    rf"{_L}(?=[A-Za-z0-9-]{{0,63}}\d)(?=[A-Za-z0-9-]{{0,63}}[A-Z])[A-Z0-9][A-Za-z0-9]*-[A-Za-z0-9-]+{_R}",  # A1-B2 codes
    rf"{_L}(?=[A-Z0-9]*[A-Z])(?=[A-Z0-9]*\d)[A-Z0-9]{{8,}}{_R}",  # 1Z999AA10123456784 (tracking numbers)
    r"[$€£¥]\s?\d[\d,]*(?:\.\d+)?",  # amounts with a currency sign
    rf"{_L}\d[\d,]{{0,31}}(?:\.\d+)?\s?(?:USD|EUR|GBP|CNY|RMB|JPY|dollars|euros|元|块)",  # amounts with a unit
    rf"{_L}\d{{1,2}}/\d{{1,2}}/\d{{2,4}}{_R}",  # 5/8/2023
    rf"{_L}(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.? \d{{1,2}}(?:st|nd|rd|th)?,? \d{{4}}{_R}",
    rf"{_L}\d{{1,2}} (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*,? \d{{4}}{_R}",
    r"\d{4}年\d{1,2}月\d{1,2}日",
    rf"{_L}\d{{1,5}} [A-Z][a-z]+(?: [A-Z][a-z]+)* "
    r"(?:Street|St|Avenue|Ave|Road|Rd|Lane|Ln|Boulevard|Blvd|Drive|Dr|Way|Court|Ct|Place|Pl)\b\.?",
    rf"{_L}\+?\d[\d -]{{7,}}\d{_R}",  # phone numbers
]
IDENTIFIER = re.compile("|".join(f"(?:{p})" for p in _IDENTIFIER_PARTS))

ACK = re.compile(
    r"^(?:hi|hello|hey|thanks|thank you|thx|ok|okay|sure|great|cool|nice|got it|sounds good|perfect|"
    r"you're welcome|no problem|bye|goodbye|good morning|good night|alright|yes|no|yep|nope|"
    r"你好|谢谢|好的|嗯|再见)(?:[ ,!.~。！]*(?:there|so much|a lot|again|thanks|!)?)*[ ,!.~。！]*$",
    re.IGNORECASE,
)
GOAL = re.compile(r"\b(?:want|need|goal|trying to|plan|please|would like|looking for|help me)\b|想要|需要|帮我|计划", re.I)
DECISION = re.compile(
    r"\b(?:decided|decide|let's|we'll|i'll|will|chose|choose|confirmed|confirm|agreed|booked|instead|go with|"
    r"switch(?:ed)? to|actually|correction|changed)\b|决定|确认|改成|换成",
    re.I,
)
FAILURE = re.compile(
    r"\b(?:error|failed|failure|unable|rejected|not available|unavailable|denied|invalid|timeout|sold out)\b|失败|错误", re.I
)


_EMAIL = re.compile(r"[A-Za-z0-9.+_-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
_PHONE = re.compile(r"\+?\d[\d -]{5,}\d")
_DATE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}(?!\d)")  # "2024-04-15 9:00" reads as digits and dashes too


def value_kind(value: str) -> str | None:
    """What kind of contact value ``value`` is, whole: ``"email"``, ``"phone"`` (seven digits
    or more), or None. A person has one current value of each, so a correction that names no key
    ("wrong number, it's …") can be matched to the value it corrects."""
    v = value.strip().rstrip(".,;:。，；")
    if _EMAIL.fullmatch(v):
        return "email"
    if _PHONE.fullmatch(v) and sum(c.isdigit() for c in v) >= 7 and not _DATE.match(v):
        return "phone"
    return None


def identifier_spans(text: str) -> list[tuple[int, int, str]]:
    """Each identifier in ``text`` as ``(start, end, token)``, in order: ``end`` is where the
    match ends, ``token`` the match without trailing punctuation (three characters or more),
    as written. Ids typed full-width or with another hyphen are found too (:func:`fold`)."""
    out: list[tuple[int, int, str]] = []
    for m in IDENTIFIER.finditer(fold(text)):
        token = text[m.start() : m.end()].strip().rstrip(".,;:")
        if len(token) >= 3:
            out.append((m.start(), m.end(), token))
    return out


def find_identifiers(text: str) -> list[str]:
    """Identifiers in ``text`` (ids, order numbers, amounts, dates, emails, URLs, paths, addresses), in order, unique."""
    return list(dict.fromkeys(token for _, _, token in identifier_spans(text)))


def find_codes(text: str) -> list[str]:
    """The identifiers in ``text`` that are codes, written one way only: order numbers,
    references, tracking numbers (letters and digits in one word), emails and URLs. Amounts,
    dates, phone numbers and addresses, which are written many ways, are left out."""
    return [i for i in find_identifiers(text) if not any(c.isspace() for c in i)
            and ("@" in i or "://" in i or (any(c.isdigit() for c in i) and any(c.isalpha() for c in i)))]


_TIME = re.compile(r"(?<![\d:])\d{1,2}:\d{2}(?![\d:])")


@functools.lru_cache(maxsize=4096)
def references(text: str) -> frozenset[str]:
    """What a message points at that an older message may hold: identifiers and clock times."""
    return frozenset(map(fold, find_identifiers(text))) | frozenset(_TIME.findall(text))
