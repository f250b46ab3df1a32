"""Rules the user sets: which sentences are standing constraints or preferences.

"Skip red-eye flights", "book economy only", "respond in Spanish from now on", "I'm allergic
to peanuts", "出差只坐高铁" are rules the assistant must keep following; "we must have spent it
all", "my sister only flies economy", "我们最多玩了三个小时" share their cue words and are not.
Telling them apart is a classification problem, so it is done by a measured classifier, not a
word list:

- :class:`RuleClassifier`: a logistic regression over character n-grams (which
  see Chinese with no word segmenter), word n-grams and a few closed-class cues (grammatical
  person, tense, time reference, questions). Its weights ship with the package
  (``rules_model.json.gz``); they were fitted by ``benchmarks/rules.py`` on the *train* split of
  the labelled corpus in ``tests/data/rules/corpus.tsv`` (English and Chinese), and its
  precision and recall per language on the held-back *test* split and on sentences drawn from
  the benchmark data are recorded in ``benchmarks/results/rules.json``. No model download.
- with all-MiniLM-L6-v2 on disk, English sentences are judged by it (fine-tuned) together
  with the n-gram model (:mod:`memos.text.classifiers.rules_minilm`); see
  :func:`memos.text.classifiers.detector.default_detector`.
- an LLM judge (:class:`memos.adapters.llm.LLMRuleJudge`) when an LLM is configured; it falls back to
  the classifier when the call fails.

Each answers a :class:`RuleJudgement` per sentence: the kind (``constraint``, ``preference``
or ``none``), a score in [0, 1] and who judged.
"""

from __future__ import annotations

import functools
import gzip
import json
import math
import re
import string
import threading
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..script import simplified
from ..sentences import split_sentences, without_code

__all__ = ["RULE_KINDS", "RuleClassifier", "RuleDetector", "RuleJudgement", "bare", "could_be_users", "default_classifier",
           "features", "has_words", "in_a_language_read", "judge_each_text", "load_model",
           "named_subject", "stated_rules", "unquoted"]

RULE_KINDS = ("constraint", "preference")
MODEL_FILE = Path(__file__).with_name("rules_model.json.gz")


def load_model(path: Path = MODEL_FILE) -> dict[str, Any]:
    """The classifier's weights as written by ``benchmarks/rules.py`` (gzipped JSON)."""
    return dict(json.loads(gzip.decompress(path.read_bytes()).decode("utf-8")))


@dataclass(frozen=True)
class RuleJudgement:
    """What a detector decided about one sentence."""

    sentence: str
    kind: str  # 'constraint', 'preference' or 'none'
    score: float  # how sure the detector is that the sentence is a rule, in [0, 1]
    by: str  # 'classifier', 'llm', or another detector's name

    @property
    def is_rule(self) -> bool:
        """Whether the sentence states a rule (a constraint or a preference)."""
        return self.kind in RULE_KINDS


@runtime_checkable
class RuleDetector(Protocol):
    """Judges sentences: is each a rule the user sets for the assistant?"""

    name: str

    def judge(self, sentences: Sequence[str]) -> list[RuleJudgement]:
        """One judgement per sentence of one message, in order."""
        ...


def judge_each_text(detector: RuleDetector, texts: Sequence[str]) -> list[RuleJudgement]:
    """One judgement per text, each as a message of its own: the detector's ``judge_each``
    (one batch, one request) when it has one, else its ``judge`` of each text alone."""
    each = getattr(detector, "judge_each", None)
    return each(texts) if each is not None else [detector.judge([t])[0] for t in texts]


# -- features --------------------------------------------------------------------------

_CJK = re.compile(r"[\u3400-\u9fff]")
# a rule is said in words: a "sentence" with no word of two letters or more and no Han
# character (a counter "（30）", an emoji, "#12", a URL, an email, a file path) states none,
# whatever its score
_WORDY = re.compile(r"(?=..)[^\W\d_]+(?:['\u2019-][^\W\d_]+)*")
_EDGES = string.punctuation + "“”‘’«»「」『』（）。，；：！？…"
_WORD = re.compile(r"[a-z0]+(?:'[a-z]+)?")
_DIGITS = re.compile(r"\d+")
# Closed-class cues (pronouns, auxiliaries, time adverbs, question particles): they say who
# the sentence is about and when, which is what separates "I never fly at night" from
# "my dad never flies at night" or "we never flew at night". The model learns their weights.
_EN_CUES = {
    "subj_i": r"^(?:i|i'm|i've|i'd|i'll|me|my)\b",
    "subj_we": r"^(?:we|we're|we've|we'd|our|us)\b",
    "subj_you": r"^(?:you|you're|you've|your)\b",
    "subj_3": r"^(?:he|she|they|his|her|their|my (?:sister|brother|mom|mother|dad|father|wife|husband|partner|boss|"
              r"friend|friends|kids?|son|daughter|colleague|manager|roommate|neighbou?r|coach|grandmother|accountant)|"
              r"the (?:\w+ )?(?:hotel|airline|museum|company|shop|store|teacher|doctor|client|guide|landlord|school|gym|"
              r"building|vet|waiter)s?|guests|passengers|visitors|kids|people|most|some|many|employees|pilots)\b",
    "name_subj": r"^[A-Z][a-z]+ (?:is|was|has|had|says|said|told|wants|prefers|always|never|only|can't|doesn't|won't)\b",
    "past": r"\b(?:was|were|did|didn't|had|hadn't|went|got|took|spent|paid|booked|tried|ate|stayed|used to|"
            r"last (?:week|month|year|time|summer|winter|night)|yesterday|ago|back then|when i was|finally|"
            r"earlier today|this morning|once|told|said|saw|came|gave|knew|met|wrote|ran|sat|began|bought|brought|"
            r"found|thought)\b",
    "past_ed": r"\b\w{3,}ed\b",
    "standing": r"\b(?:from now on|going forward|from (?:today|here|this point) on|henceforth|until further notice|"
                r"starting (?:next|today|tomorrow|now)|for the rest of|in (?:the )?future|next time|as a rule)\b",
    "general": r"\b(?:always|never|every|each|all|any|anything|everything|nothing|only|ever|whenever|no more than|"
               r"at least|at most|maximum|minimum|under|over|must|have to|has to|need to|needs to|should)\b",
    "oneoff": r"\b(?:tonight|today|tomorrow|this (?:time|once|week|weekend|friday|monday|trip|one|search|purchase)|"
              r"just this once|right now|now|yet|next (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
              r"weekend)|at \d)\b",
    "neg": r"\b(?:don't|do not|never|no|not|won't|can't|cannot|avoid|skip|stop|quit|refuse|without)\b",
    "please": r"\b(?:please|make sure|remember|keep in mind|note that|just so you know)\b",
    "modal_you": r"\b(?:you|you're)\s+(?:must|should|have to|need to)\b",
    "plan": r"\b(?:going to|planning to|plan to|about to|will be (?:attending|going|visiting)|signed up for|"
            r"i'm attending|am attending)\b",
    "haha": r"\b(?:ha|haha|lol|lmao|just kidding|kidding|joking)\b",
    "hedge": r"\b(?:maybe|perhaps|might|wonder|considering|thinking about|someday|one day|if i were|would be nice|"
             r"if only|suppose)\b",
    "excl": r"!$",
}
# kinship and social relations (a closed class, as English "my sister", "my boss"): who a
# sentence that opens with "我表哥…" or "我的上司…" is about
_ZH_KIN = ("(?:表|堂)(?:哥|姐|弟|妹)|哥哥|姐姐|弟弟|妹妹|姐|妹|哥|弟|父亲|母亲|爸爸|妈妈|妈|爸|爷爷|奶奶|外公|外婆|姥姥|"
           "姥爷|叔叔|阿姨|舅舅|舅妈|婶婶|姑姑|姑父|姨妈|姨父|伯伯|伯母|儿子|女儿|孙子|孙女|侄子|侄女|外甥|老公|老婆|丈夫|"
           "妻子|男朋友|女朋友|对象|朋友|闺蜜|同事|同学|室友|邻居|上司|下属|领导|老板|经理|家孩子|孩子|家人|客户")
_ZH_CUES = {
    "subj_i": r"^(?:我|咱)",
    "subj_you": r"^(?:你|您)",
    "subj_3": rf"^(?:他|她|它|他们|她们|(?:我|我的|我们的?|我家)?(?:{_ZH_KIN})|"
              r"小[\u4e00-\u9fff]|老[\u4e00-\u9fff]|朋友|老师|医生|客户|客人|乘客|导游|公司|酒店|这家|博物馆|房东|有些人|"
              r"大部分|很多|学校|教练|员工|飞行员|小区|会计|兽医|孩子们)",
    "past": r"(?:了|过|上次|那次|昨天|去年|上个月|上周|以前|小时候|当时|最后|那趟|那家|刚|有一次)",
    "standing": r"(?:以后|今后|从现在开始|从现在起|从今天起|从今以后|从下周开始|往后|一律|每次|每天|每个|所有|都要|都用|都别|"
                r"都不要|永远|总是|务必|一定要|原则上)",
    "general": r"(?:只|都|必须|不能|不要|别|不准|至少|最多|不超过|禁止|千万|一律|每)",
    "oneoff": r"(?:今晚|今天|明天|这次|这一次|就这一次|现在|下周[一二三四五六日]|先别|再)",
    "plan": r"(?:将要|即将|打算|准备|计划|正在|要去参加|报名了)",
    "q": r"(?:吗|呢|是不是|要不要|能不能|怎么|什么|多少|几点|哪)",
    "please": r"^(?:请|麻烦|记住|记得|提醒你)",
    "haha": r"(?:哈哈|呵呵|开玩笑)",
    "hedge": r"(?:也许|说不定|要是|在想|考虑|大概|要不|假如|真想)",
}
# Chinese writes no capitals, so a name is read from its parts (a closed class, as pronouns
# are): one of the commonest surnames, two given-name characters that are no function words or
# numerals, then the verb ("李梓涵喜欢健身。", "欧阳娜娜从来不吃香菜。"). Two-character names
# ("张伟") are left out: too many words open with a surname's character ("周末不要…").
_ZH_SURNAMES = ("王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈"
                "姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤")
_ZH_NAMED = re.compile(rf"^(?:欧阳|司马|诸葛|上官|[{_ZH_SURNAMES}])"
                       r"[^不的是了在和与就都也还只每要别没很太最又再一二两三四五六七八九十百千万个我你他她它们这那么吗呢吧啊"
                       r"\W\d\sA-Za-z]{2}"
                       r"(?:喜欢|喜爱|热爱|钟爱|爱|不|只|每|从来|向来|总|一直|已经|是|在|说|觉得|最|今年|住|也|还|对|有|想|会|"
                       r"就|都|很|特别|超|经常|平时|平常|常常|偶尔|刚|去|希望|现在|目前|最近)")
# a directive to the assistant beside a name ("…，以后给他的报告都写短一点。"); a habit is not one
# ("王志宏每天都去游泳。")
_ZH_DIRECTIVE = re.compile(r"以后|今后|从现在|从今|往后|一律|务必|原则上|请|麻烦|记得|记住")
_EN = [(k, re.compile(v, re.IGNORECASE)) for k, v in _EN_CUES.items()]
_ZH = [(k, re.compile(v)) for k, v in _ZH_CUES.items()]
_SUBJECT_CUES = 5  # the first five English cues say who the sentence is about
_TENSE_CUES = ("past", "past_ed")
# A relative clause ("cosmetics that were tested on animals") or what follows "rather you"
# ("I'd rather you didn't use emojis") does not set the sentence's tense: the tense cues are
# read on the rest, and a past form inside such a clause is a cue of its own. A "that" that
# opens the sentence or follows punctuation is a demonstrative ("I must say, that dinner was
# great"), not a clause.
_SUBORDINATE = re.compile(r"(?:(?<=\w )(?:that|which|who|whom|whose)\b(?!'s)|\brather (?:you|we|they|he|she)\b)[^,;:.!?]*",
                          re.IGNORECASE)
_TENSE = [rx for k, rx in _EN if k in _TENSE_CUES]


def has_words(sentence: str) -> bool:
    """Whether ``sentence`` has a word: a token between spaces that holds a Han character or,
    less the punctuation around it, is letters only (two or more, apostrophes and hyphens
    within). One that has none (a URL, an email or a path pasted alone) states no rule."""
    return any(_CJK.search(t) or _WORDY.fullmatch(t.strip(_EDGES)) for t in sentence.split())


_QUOTES = {'"': '"', "'": "'", "\u201c": "\u201d", "\u2018": "\u2019", "\u00ab": "\u00bb", "\u300c": "\u300d",
           "\u300e": "\u300f"}


def named_subject(sentence: str) -> bool:
    """Whether ``sentence`` is Chinese about a person it names: it opens with a name (a common
    surname and two given-name characters) before its verb, with no directive to the
    assistant ("以后", "一律", "请") beside it. Such a sentence is someone else's, as "Sarah
    loves hiking." is: it sets no rule of the user's and lifts none, whatever a model scores it."""
    sentence = simplified(sentence)
    return bool(_ZH_NAMED.match(sentence.strip())) and not _ZH_DIRECTIVE.search(sentence)


_HIRAGANA = re.compile(r"[\u3041-\u309f]")
_LETTER = re.compile(r"[^\W\d_]")
_READ_LETTER = re.compile(r"[A-Za-z\u00c0-\u024f\u1e00-\u1eff\u3400-\u9fff\uf900-\ufaff]")


def in_a_language_read(sentence: str) -> bool:
    """Whether ``sentence`` is in a script the rule models read: not Japanese (two hiragana or
    more, which Chinese does not use; a brand in katakana may be) and most of its letters Latin
    or Han. One in Japanese, Korean, Russian, Arabic, Hindi, Thai, ... is in a language the
    models were not fitted on, whose scores would be noise; it states no rule offline (pin it,
    or configure an LLM)."""
    if len(_HIRAGANA.findall(sentence)) >= 2:
        return False
    letters = _LETTER.findall(sentence)
    return 2 * sum(1 for c in letters if _READ_LETTER.match(c)) > len(letters) if letters else True


def could_be_users(sentence: str) -> bool:
    """Whether ``sentence`` could set or lift a rule of the user's at all: it has a word
    (:func:`has_words`), is in a language the models read (:func:`in_a_language_read`) and is
    not about a person it names (:func:`named_subject`). A model scores only such sentences;
    the rest score 0."""
    return has_words(sentence) and in_a_language_read(sentence) and not named_subject(sentence)


def unquoted(sentence: str) -> str:
    """``sentence`` without the quotation marks around all of it: a rule pasted in quotes
    ("\u201cI dislike floral patterns.\u201d") is judged as the rule itself."""
    t = sentence.strip()
    while len(t) > 2 and _QUOTES.get(t[0]) == t[-1] and t[0] not in t[1:-1] and t[-1] not in t[1:-1]:
        t = t[1:-1].strip()
    return t


# a full stop (or an ellipsis) that ends a sentence says nothing about whether it is a rule, and
# chatty users leave it out: "use metric units" is the rule "Use metric units."
_FINAL_STOP = re.compile(r"\s*[.\u3002\uff0e\u2026]+$")


def bare(sentence: str) -> str:
    """``sentence`` as the rule models read it: :func:`unquoted`, less the full stop or
    ellipsis that ends it (a question or exclamation mark stays: it tells)."""
    t = unquoted(sentence)
    return _FINAL_STOP.sub("", t) or t


def _normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower().replace("\u2019", "'")
    return " ".join(_DIGITS.sub("0", text).split())


def _cues(text: str) -> list[str]:
    t = " ".join(unicodedata.normalize("NFKC", text).replace("\u2019", "'").split())
    out: list[str] = []
    if _CJK.search(t):
        out += ["zh:" + k for k, rx in _ZH if rx.search(t)]
    else:
        main = _SUBORDINATE.sub(" ", t)
        clauses = " ".join(_SUBORDINATE.findall(t))
        out += ["en:" + k for k, rx in _EN if rx.search(main if k in _TENSE_CUES else t)]
        if any(rx.search(clauses) for rx in _TENSE):
            out.append("en:past_clause")
        if not any(rx.search(t) for _, rx in _EN[:_SUBJECT_CUES]):
            out.append("en:no_subj")
    if t.endswith(("?", "？")):
        out.append("q")
    return out


def features(text: str) -> dict[str, float]:
    """The classifier's features of one sentence: character 1-4-grams and word 1-2-grams
    (together scaled to unit length), the first word or two, and the cues, each crossed with
    the sentence's subject, read with Traditional Chinese as Simplified. Training
    (``benchmarks/rules.py``) and prediction share this."""
    text = simplified(unquoted(text))
    t = _normalise(text)
    grams: set[str] = set()
    s = f"^{t}$"
    for n in (1, 2, 3, 4):
        grams.update("c:" + s[i : i + n] for i in range(len(s) - n + 1))
    words = _WORD.findall(t)
    grams.update("w:" + w for w in words)
    grams.update(f"b:{a}_{b}" for a, b in zip(words, words[1:], strict=False))
    if words:
        grams.add("f:" + words[0])
        if len(words) > 1:
            grams.add(f"f2:{words[0]}_{words[1]}")
    scale = 1.0 / math.sqrt(len(grams)) if grams else 0.0
    out = {g: scale for g in grams}
    cues = _cues(text)
    subjects = [c for c in cues if "subj" in c]
    for c in cues:
        out[c] = 1.0
        for s_ in subjects:
            if c not in subjects:
                out[f"{s_}*{c}"] = 1.0
    return out


# -- the classifier --------------------------------------------------------------------


class RuleClassifier:
    """The shipped linear model: ``score`` is the probability that a sentence is a rule,
    ``kind`` separates constraints from preferences among rules. Where the model has a
    Chinese part, a sentence with Han characters is scored by the weighted mean (its ``mix``)
    of the Chinese part's log-odds and the joint model's; the Chinese part's weights apply to
    the features present (each a naive Bayes log-count ratio times a logistic regression weight).

    Its thresholds, one per language, are the scores from which a sentence counts as a rule,
    chosen at training time on the train split (:meth:`threshold_for`: Chinese for a sentence
    with Han characters, English otherwise); ``threshold`` replaces both. ``threshold`` is the
    English one. ``judge`` is given the sentences of one message:
    when there are more than two, a sentence must reach ``long_message_threshold`` instead.
    Rules are mostly stated briefly; a long chatty message (a story, a product review) holds
    many sentences that share a rule's cue words, and the higher bar cuts how many of them
    are pinned (LoCoMo turns 43 % -> 16 %, MemDaily messages 17 % -> 14 %, PrefEval's
    preferences still 99 %).
    """

    name = "classifier"

    def __init__(self, model: dict[str, Any] | None = None, *, threshold: float | None = None,
                 long_message_threshold: float = 0.85) -> None:
        model = model if model is not None else load_model()
        self.rule_weights: dict[str, float] = model["rule"]["weights"]
        self.rule_bias: float = float(model["rule"]["bias"])
        self.kind_weights: dict[str, float] = model["kind"]["weights"]
        self.kind_bias: float = float(model["kind"]["bias"])
        # Chinese sentences: a model over features present or absent (when the file has one)
        zh = model.get("rule_zh")
        self.zh_weights: dict[str, float] | None = zh["weights"] if zh else None
        self.zh_bias: float = float(zh["bias"]) if zh else 0.0
        self.zh_mix: float = float(zh.get("mix", 1.0)) if zh else 0.0
        # a sentence is judged again and again (guards walk the hot tier, summaries re-score
        # their lines): each text's probabilities are computed once
        self._probabilities = functools.lru_cache(maxsize=16384)(self._compute)
        by_language = model.get("thresholds") or {"en": model["threshold"], "zh": model["threshold"]}
        self.thresholds = {k: float(v if threshold is None else threshold) for k, v in by_language.items()}
        self.threshold = self.thresholds["en"]
        self.long_message_threshold = float(long_message_threshold)
        if not all(0.0 < t < 1.0 for t in self.thresholds.values()) or not 0.0 < self.long_message_threshold < 1.0:
            raise ValueError(f"thresholds must be in (0, 1), got {self.thresholds} and {long_message_threshold}")

    @staticmethod
    def _logit(weights: dict[str, float], bias: float, feats: dict[str, float]) -> float:
        return bias + sum(weights.get(k, 0.0) * v for k, v in feats.items())

    def _compute(self, sentence: str) -> tuple[float, str]:
        if not could_be_users(sentence):
            return 0.0, "constraint"
        feats = features(bare(sentence))
        z = self._logit(self.rule_weights, self.rule_bias, feats)
        if self.zh_weights is not None and _CJK.search(sentence):
            z_zh = self.zh_bias + sum(self.zh_weights.get(k, 0.0) for k in feats)
            z = self.zh_mix * z_zh + (1 - self.zh_mix) * z
        p = 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))
        kind = "preference" if self._logit(self.kind_weights, self.kind_bias, feats) > 0 else "constraint"
        return p, kind

    def score(self, sentence: str) -> float:
        """Probability that ``sentence`` states a rule."""
        return self._probabilities(sentence)[0]

    def kind(self, sentence: str) -> str:
        """``constraint`` or ``preference``: which kind of rule ``sentence`` would be."""
        return self._probabilities(sentence)[1]

    def threshold_for(self, sentence: str) -> float:
        """The score from which ``sentence`` counts as a rule: its language's threshold."""
        return self.thresholds["zh"] if _CJK.search(sentence) else self.thresholds["en"]

    def judge(self, sentences: Sequence[str]) -> list[RuleJudgement]:
        """One judgement per sentence of one message."""
        out = []
        floor = self.long_message_threshold if len(sentences) > 2 else 0.0
        for s in sentences:
            p, kind = self._probabilities(s)
            bar = max(self.threshold_for(s), floor)
            out.append(RuleJudgement(s, kind if p >= bar else "none", round(p, 4), self.name))
        return out

    def judge_each(self, texts: Sequence[str]) -> list[RuleJudgement]:
        """One judgement per text, each as a message of its own."""
        return [self.judge([t])[0] for t in texts]

    def rules(self, text: str) -> list[RuleJudgement]:
        """The sentences of ``text`` that state rules, in order (see :func:`stated_rules`)."""
        return stated_rules(self, text)


def stated_rules(detector: RuleDetector, text: str) -> list[RuleJudgement]:
    """The sentences of ``text`` that state rules as ``detector`` judges them, in order; a
    fenced code block states none."""
    return [j for j in detector.judge(split_sentences(without_code(text))) if j.is_rule]


_NGRAMS: RuleClassifier | None = None
_LOCK = threading.RLock()


def default_classifier() -> RuleClassifier:
    """The shipped n-gram classifier, loaded once per process."""
    global _NGRAMS
    if _NGRAMS is None:
        with _LOCK:
            if _NGRAMS is None:
                _NGRAMS = RuleClassifier()
    return _NGRAMS
