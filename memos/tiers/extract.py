"""Fact extraction: the :class:`FactExtractor` protocol and the offline rule-based one.

:class:`RuleExtractor` reads messages and proposes facts for the cold tier:

- user messages: rules the user sets, as the rule classifier judges them (constraints and
  preferences, English and Chinese, pinned; see :mod:`memos.text.classifiers.rules`), tastes ("I love",
  "我喜欢": kept, shown when relevant), addresses (one current value: a new one supersedes
  the old), "my X is Y" / "我的X是Y" statements the attribute classifier keeps (see
  :mod:`memos.text.classifiers.attributes`), identifiers, corrections that name no key ("Sorry, wrong
  number, it's +351 913 000 111.", "我换号了，新号码是13900139000。": a new value for the phone
  number or email given shortly before, as the correction classifier judges them:
  :mod:`memos.text.classifiers.corrections`), and revocations ("I'm not vegetarian anymore",
  "出差不用只坐高铁了", as the revocation classifier judges them: :mod:`memos.text.classifiers.revocations`);
- assistant messages: decisions ("booked", "confirmed", "decided", …) and identifiers;
- tool chains: the task state (the last call of each tool and its result), failed
  attempts (error results), and identifiers found in the results (JSON fields included).

:func:`identifier_facts` is the identifier safety net: a fact for every identifier in
a set of messages that is not already covered.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar, runtime_checkable

from ..core.messages import Message, call_input, call_name
from ..core.tokens import default_counter
from ..text.classifiers.attributes import Attribute, AttributeClassifier, default_attribute_classifier
from ..text.classifiers.corrections import CorrectionClassifier, default_correction_classifier
from ..text.classifiers.detector import default_detector
from ..text.classifiers.replacements import no_change_reason
from ..text.classifiers.revocations import RevocationClassifier, default_revocation_classifier
from ..text.classifiers.rules import _CJK, RuleDetector, RuleJudgement, has_words, judge_each_text
from ..text.patterns import DECISION, FAILURE, find_identifiers, identifier_spans, value_kind
from ..text.script import simplified
from ..text.sentences import headings, in_context, list_item, split_clauses, split_sentences, without_code
from .cold import Fact, FactCandidate, Invalidation, fact_key

_Sourced = TypeVar("_Sourced", FactCandidate, Invalidation)

__all__ = ["ADDRESS", "Extraction", "FactExtractor", "RuleExtractor", "identifier_facts", "message_source", "timed"]

_STREET = (
    r"(?:Rua|Avenida|Av\.|Calle|Via|Rue|Praça|Largo|Travessa|Calçada)(?: d[aeo]s?)? [A-Z][\w'-]*(?: [A-Z][\w'-]*)*"
    r"|[A-Z][\w'-]*(?: [A-Z][\w'-]*)* (?:Street|St|Avenue|Ave|Road|Rd|Lane|Ln|Boulevard|Blvd|Drive|Dr|Way|Court|Ct|Place|Pl)\b"
)
_POSTCODE = r"(?:\d{4}-\d{3}|\d{5}(?:-\d{4})?|[A-Z]{1,2}\d[A-Z\d]? \d[A-Z]{2})"
ADDRESS = re.compile(
    rf"\b\d{{1,5}}[A-Z]?,? (?:{_STREET})"
    rf"(?:,? (?:(?:[A-Z][a-zà-ú]+ )?{_POSTCODE}(?: [A-Z][a-zà-ú]+)?|[A-Z][a-zà-ú]+(?: {_POSTCODE})?))?"
)
_ZH_ADDRESS = re.compile(r"[\u4e00-\u9fff]{2,30}(?:路|街|大道|巷)\d+号(?:[\u4e00-\u9fff\d]*室)?")

# Tastes ("I love hiking") are kept as unpinned preferences, found when relevant; rules the
# user sets are found by the rule classifier (memos.text.classifiers.rules) and pinned.
_CLAUSE_END = re.compile(r"[，,、；;]|\s(?=\D)")  # where a contact value said in Chinese ends
# the most tokens of a rule's message kept whole (counted, not read off its length: 80 tokens
# are about 320 characters of English and 65 of Chinese, and a pinned line costs its tokens in
# every prompt)
_WHOLE_RULE_TOKENS = 80
_SOFT_PREFERENCE = re.compile(
    r"\b(?:i (?:really )?(?:like|love|enjoy|hate|adore)|my favou?rite)\b|我(?:很|最|比较)?(?:喜欢|爱)",
    re.IGNORECASE,
)
_FIRM_DECISION = re.compile(r"\b(booked|confirmed|decided|chose)\b", re.I)
_ADDRESS_FIELDS = re.compile(r"(?:^|_)(?:address|ship_to|shipping|deliver_to|delivery)(?:_|$)", re.I)
_ID_FIELDS = re.compile(r"(?:^|_)(?:id|ids|ref|reference|tracking|number|code|email|url|sku|confirmation)(?:_|$)", re.I)


@dataclass(frozen=True)
class Extraction:
    """What an extractor proposes: candidate facts and revocations."""

    candidates: tuple[FactCandidate, ...] = ()
    invalidations: tuple[Invalidation, ...] = ()


@runtime_checkable
class FactExtractor(Protocol):
    """Proposes facts for the cold tier from messages."""

    name: str

    def extract(self, messages: Sequence[Message], known: Sequence[Fact] = ()) -> Extraction:
        """Facts and revocations found in ``messages`` (oldest first); ``known`` are the
        current facts, for extractors that decide UPDATE / INVALIDATE themselves."""
        ...


def _snippet(text: str, start: int, end: int, width: int = 70) -> str:
    lo = max(0, start - width)
    hi = min(len(text), end + width)
    s = " ".join(text[lo:hi].split())
    return ("…" if lo > 0 else "") + s + ("…" if hi < len(text) else "")


def _flatten(value: Any, path: str = "") -> Iterable[tuple[str, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _flatten(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:50]):
            yield from _flatten(v, f"{path}[{i}]")
    else:
        yield path, value


def _item_judgement(in_context: RuleJudgement, alone: RuleJudgement) -> RuleJudgement:
    """A list item's judgement: read with its heading ("My rules: no pork"), or alone ("no
    pork") when that reads as a rule and the mean of the two readings' log-odds leans to one
    (the heading of "Things I did this weekend:" makes "at most 3 hours of sleep" none)."""
    if in_context.is_rule or not alone.is_rule:
        return in_context
    odds = [math.log(max(1e-6, p) / max(1e-6, 1 - p)) for p in (in_context.score, alone.score)]
    return replace(alone, sentence=in_context.sentence) if sum(odds) >= 0 else in_context


@dataclass
class RuleExtractor:
    """The offline :class:`FactExtractor`: the rule classifier for rules the user sets
    (``detector``, default the shipped one), the attribute classifier for "my X is Y" /
    "我的X是Y" (``attributes``, default the shipped one), the revocation classifier for
    sentences that lift a rule (``revocations``, default the shipped one), the correction
    classifier for a phone number or email given as a new one without its name
    (``corrections``, default the shipped one), patterns for identifiers, addresses and the rest."""

    name: str = "rules"
    pin_preferences: bool = True
    detector: RuleDetector | None = None
    attributes: AttributeClassifier | None = None
    # every "我的X是Y" too: off by default (only a phone number or email is kept), since at 1,024
    # tokens on MemDaily the facts took the room of the messages asked about (target recall
    # 0.638 -> 0.569 on two files); see docs/rules-and-facts.md
    chinese_attributes: bool = False
    revocations: RevocationClassifier | None = None
    corrections: CorrectionClassifier | None = None

    def extract(self, messages: Sequence[Message], known: Sequence[Fact] = ()) -> Extraction:
        """Facts and revocations found in ``messages``; tool results need their call among them.
        The rules do not need ``known``: the cold tier decides ADD / UPDATE / NOOP."""
        cands: list[FactCandidate] = []
        invs: list[Invalidation] = []
        calls: dict[str, tuple[str, str]] = {}
        for m in messages:
            src = (m.id,)
            role = m.role
            for call in m.data.get("tool_calls") or ():
                calls[call["id"]] = (call_name(call), call_input(call))
            if role in ("user", "system", "developer"):
                self._user(m, src, cands, invs)
            elif role == "assistant":
                self._assistant(m, src, cands)
            elif role == "tool":
                self._tool(m, src, cands, calls.get(str(m.data.get("tool_call_id")), ("tool", "")))
        return Extraction(tuple(cands), tuple(invs))

    def _user(self, m: Message, src: tuple[str, ...], cands: list[FactCandidate], invs: list[Invalidation]) -> None:
        text = m.text
        said = without_code(text)  # a pasted code block states no rule, correction or attribute
        sentences = split_sentences(said)
        # a list item is judged, and kept, with its heading ("My travel rules: never Ryanair"),
        # and a heading by itself states nothing
        heads = headings(sentences)
        texts = [in_context(s, h) for s, h in zip(sentences, heads, strict=True)]
        leading = set(filter(None, heads))
        detector = self.detector or default_detector()
        judged = detector.judge(texts) if m.role == "user" and sentences else []
        # A short message that states a rule is kept whole: the reason given with it matters.
        whole = " ".join(said.split()) if len(sentences) <= 3 and any(j.is_rule for j in judged) else None
        if whole is not None and default_counter().count(whole) > _WHOLE_RULE_TOKENS:
            whole = None
        items = [i for i, head in enumerate(heads) if head is not None] if judged else []
        if items:  # an item is judged as a message of its own, with its heading and alone
            read = judge_each_text(detector, [texts[i] for i in items] + [list_item(sentences[i]) for i in items])
            for k, i in enumerate(items):
                judged[i] = _item_judgement(read[k], read[k + len(items)])
        revocations = self.revocations or default_revocation_classifier()
        revoking = revocations.judge(texts)  # a list item with its heading, as the rules are read
        corrections = self.corrections or default_correction_classifier()
        corrected: list[FactCandidate] = []
        for i, sentence in enumerate(sentences):
            rule = judged[i] if i < len(judged) and judged[i].is_rule and sentence not in leading else None
            found = None
            if rule is not None:
                pinned = rule.kind == "constraint" or self.pin_preferences
                value = texts[i] if heads[i] else whole or texts[i]  # an item is kept with its heading alone
                found = FactCandidate(rule.kind, fact_key(rule.kind, texts[i]), value, src, m.seq,
                                      confidence=min(1.0, max(0.0, rule.score)), pinned=pinned, origin=rule.by)
            if revoking[i]:
                # a sentence lifting a rule is not a rule to pin; one that names no current
                # rule, or reads more surely as a rule, may set one (the cold tier decides: it
                # knows the rules)
                invs.append(Invalidation(texts[i], src, m.seq, otherwise=found,
                                         confidence=round(revocations.score(texts[i]), 4),
                                         holds_instead=found is not None and self._holds_instead(texts[i], revocations)))
            elif found is not None:
                cands.append(found)
            elif m.role == "user" and has_words(sentence) and no_change_reason(texts[i]) is None:
                # no rule by itself, it may change one ("Change the budget to $250."): the cold
                # tier, which knows the rules in force, decides
                body = " ".join(texts[i].split())
                cands.append(FactCandidate("constraint", fact_key("constraint", body), body, src, m.seq, pinned=True,
                                           origin="classifier", revises=True))
            if rule is None and _SOFT_PREFERENCE.search(simplified(sentence)) and not sentence.endswith(("?", "？")):
                cands.append(FactCandidate("preference", fact_key("preference", sentence), sentence, src, m.seq,
                                           origin=self.name))
            fixed = dict(corrections.corrections(sentences, i)) if m.role == "user" else {}
            for a in self.stated_attributes(sentence):
                kind = next((k for k, v in fixed.items() if v in a.value), "")
                fixed.pop(kind, None)  # "scratch that, my number is …": the stated key carries the correction
                cands.append(FactCandidate("fact", fact_key("fact", a.key), a.value, src, m.seq,
                                           confidence=a.score, single=True, origin=self.name, corrects=kind))
            corrected += [FactCandidate("identifier", fact_key("identifier", value), " ".join(sentence.split()),
                                        src, m.seq, confidence=0.8, once=True, origin=self.name, corrects=kind)
                          for kind, value in fixed.items()]
        self._addresses(text, src, m.seq, cands)
        self._identifiers(text, src, m.seq, cands)
        cands += corrected  # after the identifiers: a corrected identifier is superseded by the new one's row

    def stated_attributes(self, sentence: str) -> list[Attribute]:
        """The attributes ``sentence`` states. A Chinese one, unless ``chinese_attributes``, only
        when it is the user's own phone number or email ("我的手机号是13812345678，有事打我", not
        "我妈的…", as "my mom's number" is not read in English): filed under its key, the next one
        given replaces it, as in English."""
        found = (self.attributes or default_attribute_classifier()).attributes(sentence)
        if self.chinese_attributes:
            return found
        out = []
        for a in found:
            if not _CJK.search(a.key):
                out.append(a)
                continue
            contact = _CLAUSE_END.split(a.value, maxsplit=1)[0].strip()
            if "的" not in a.key and value_kind(contact) is not None:
                out.append(replace(a, value=contact))
        return out

    def _holds_instead(self, sentence: str, revocations: RevocationClassifier) -> bool:
        """Whether a sentence that lifts a rule also says what holds instead: a clause other
        than the one that reads most as the revocation is judged a rule ("There's no need to
        call me Professor anymore, Sam works.")."""
        clauses = split_clauses(sentence)
        if len(clauses) < 2:
            return False
        lifting = max(range(len(clauses)), key=lambda i: revocations.score(clauses[i]))
        rest = [c for i, c in enumerate(clauses) if i != lifting]
        return any(j.is_rule for j in (self.detector or default_detector()).judge(rest))

    def _assistant(self, m: Message, src: tuple[str, ...], cands: list[FactCandidate]) -> None:
        text = m.text
        for sentence in split_sentences(text):
            if DECISION.search(simplified(sentence)) and (find_identifiers(sentence) or _FIRM_DECISION.search(sentence)):
                cands.append(FactCandidate("decision", fact_key("decision", sentence), sentence, src, m.seq, confidence=0.7))
        self._identifiers(text, src, m.seq, cands)

    def _tool(self, m: Message, src: tuple[str, ...], cands: list[FactCandidate], call: tuple[str, str]) -> None:
        name, args = call
        result = " ".join(m.text.split())
        preview = result[:160] + ("…" if len(result) > 160 else "")
        cands.append(FactCandidate("task_state", f"last {name} call", f"{name}({args}) -> {preview}", src, m.seq, single=True))
        if FAILURE.search(result):
            cands.append(FactCandidate("failed_attempt", f"{name}({args})"[:160], preview, src, m.seq))
        try:
            data = json.loads(m.text)
        except (ValueError, TypeError):
            data = None
        if isinstance(data, (dict, list)):
            for path, value in _flatten(data):
                leaf = path.rsplit(".", 1)[-1]
                if isinstance(value, str) and _ADDRESS_FIELDS.search(leaf) and ADDRESS.search(value):
                    cands.append(FactCandidate("identifier", "address", value, src, m.seq, single=True))
                elif isinstance(value, (str, int)) and not isinstance(value, bool) and _ID_FIELDS.search(leaf):
                    v = str(value)
                    if len(v) >= 3:
                        cands.append(FactCandidate("identifier", v, f"{v} ({name} {path})", src, m.seq, once=True))
        self._identifiers(m.text, src, m.seq, cands)

    def _addresses(self, text: str, src: tuple[str, ...], seq: int, cands: list[FactCandidate]) -> None:
        for rx in (ADDRESS, _ZH_ADDRESS):
            for mt in rx.finditer(text):
                cands.append(FactCandidate("identifier", "address", mt.group(0).strip(" ,."), src, seq, single=True))

    def _identifiers(self, text: str, src: tuple[str, ...], seq: int, cands: list[FactCandidate]) -> None:
        for start, end, ident in identifier_spans(text):
            cands.append(FactCandidate("identifier", ident, _snippet(text, start, end), src, seq,
                                       confidence=0.9, once=True))


def identifier_facts(
    sources: Iterable[tuple[str, tuple[str, ...], int]], covered: str, known: str | Callable[[str], bool]
) -> list[FactCandidate]:
    """The safety net: a fact for each identifier in ``sources`` (text, source message
    ids, seq) that appears neither in ``covered`` (the new summary) nor in ``known``
    (text holding the cold tier's keys and values, or a lookup that says whether the
    cold tier already has the identifier)."""
    is_known = known if callable(known) else known.__contains__
    out: list[FactCandidate] = []
    seen: set[str] = set()
    for text, ids, seq in sources:
        for start, end, ident in identifier_spans(text):
            if ident in seen or ident in covered or is_known(ident):
                continue
            seen.add(ident)
            out.append(FactCandidate("identifier", ident, _snippet(text, start, end), ids, seq,
                                     confidence=0.9, once=True))
    return out


def timed(found: Iterable[_Sourced], messages: Iterable[Message]) -> list[_Sourced]:
    """Candidates or invalidations with the time of their newest source message among
    ``messages`` (those that have a time keep it): the cold tier orders a key's values by it."""
    times = {m.id: m.created_at for m in messages}
    return [f if f.source_time else replace(f, source_time=max((times.get(i, 0.0) for i in f.source_ids), default=0.0))
            for f in found]


def message_source(m: Message) -> tuple[str, tuple[str, ...], int]:
    """A message as a source for :func:`identifier_facts`: its text with its tool-call arguments."""
    return (m.text_and_calls, (m.id,), m.seq)
