"""Replacements: which rule the user set earlier a new rule replaces.

"From now on, reply in Spanish." replaces "Always reply in English."; "Keep your replies under
100 words." holds beside it, and so does "Never book easyJet either." beside "Never book
Ryanair.". The pinned section should hold the rules in force: two that contradict each other
leave the model to guess. As for rules and revocations (:mod:`memos.text.classifiers.rules`,
:mod:`memos.text.classifiers.revocations`), this is a measured classifier, not a phrase list: a logistic
regression over features of the pair (:func:`pair_features`): how many words the two share
and how many each has that the other lacks, whether their numbers differ (or only their
numbers), a negation in one and not the other, and closed-class cues in the new rule: of a
change ("instead", "switch", 改, 换), of time ("from now on", "now", 以后, 现在), of an
addition ("either", "also", 也, 还), and the share of the words of a setting the new rule
gives ("Set my taxi budget to 70 euros a ride.", 把…设成) that the old one holds.

Its weights ship with the package (``replacements_model.json.gz``), fitted by
``benchmarks/replacements.py`` on the *train* split of ``tests/data/rules/replacements.tsv``
(pairs written for it, English and Chinese: replacements of every kind, and rules on the same
matter that hold together); each language's threshold is the lowest score at which the
cross-validated precision there reaches 0.95, since a false replacement takes a rule in force
out of the pinned section (it stays in the fact history, superseded by the new one).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

from ..script import simplified
from ..terms import content_terms
from .linear import LinearModel
from .rules import _CJK, _EN_CUES, _ZH_CUES, _ZH_KIN, named_subject

__all__ = ["MAX_TERMS", "REPLACEMENTS_FILE", "ReplacementClassifier", "changes_quantity", "default_replacement_classifier",
           "new_terms", "no_change_reason", "pair_features", "quantities", "quantity_kinds"]

REPLACEMENTS_FILE = Path(__file__).with_name("replacements_model.json.gz")
# The most words (or Chinese character pairs) a rule of the pairs the model was fitted on has:
# longer ones, mostly pasted text ("other ways to say Works of art, regardless of their theme
# ...", said twice among PrefEval's filler prompts), are no pairs it knows, and it does not judge them.
MAX_TERMS = 12

# closed-class cues of the new rule, by what they say about the old one
_CUES = {
    "change": re.compile(r"\b(?:instead|switch(?:ed)?|chang(?:e|ed)|make (?:it|that|them)|back (?:on|to)|"
                         r"raise|lower|increase|decrease|reduce|bump|move|push|update|adjust)\b|改|换|而是|提高|降|"
                         r"调[到整成高低大小]|放宽|缩短|延长|挪", re.I),
    "time": re.compile(r"\b(?:from now on|going forward|now|anymore|any more|no longer|actually)\b|现在|以后|不再|不用|其实|又",
                       re.I),
    "permit": re.compile(r"\b(?:is|are) (?:fine|ok|okay)\b|\bcan\b|也可以|可以了|就行", re.I),
    "also": re.compile(r"\b(?:either|too|also|as well|another)\b|也|还|另外", re.I),
    "scope": re.compile(r"\b(?:for|on|in|during|at night|when|if)\b|的话|的时候|工作日|周末|白天|晚上", re.I),
}
# the measure words a Chinese number counts with ("两杯", "三晚", "五份")
_MEASURE = "个次天晚杯张段小分周年月块元本位份间趟件岁斤公米层刻页集瓶碗盒双"
# who or when the new sentence is about, read as the rule detector reads them: a sentence about
# someone else ("My husband changed his seat to window."), past events or this one time ("Book
# the direct flight at 4pm.") or a question changes no rule of the user's
_ABOUT = {
    "other": (re.compile(r"^(?:he|she|they|his|her|their|(?:my|our) (?:\w+ )?(?:sister|brother|mom|mother|dad|father|"
                         r"parents|wife|husband|partner|boss|friend|kids?|son|daughter|colleague|manager|roommate|"
                         r"neighbou?r|aunt|uncle|cousin|grand\w+)s?\b|[A-Z][a-z]+ (?:has|had|changed|switched|moved))\b", re.I),
              re.compile(rf"^(?:他|她|他们|她们|(?:我|我的|我们的?|我家)?(?:{_ZH_KIN}))")),
    # a sentence-final 了 says a state has changed ("跑步目标改成25公里了。", "预算可以提高到一千了。"),
    # not that something happened: only 了 with more after it ("今天跑了5公里") reads as past here
    "past": (re.compile(_EN_CUES["past"], re.I),
             re.compile(_ZH_CUES["past"].replace("(?:了|", "(?:了(?![吧啊呀啦嘛哦]?[。！!~～…]*$)|", 1))),
    # the rule detector's one-off cues less "now" and "at <time>": "Bedtime is 8:30 now." and
    # "Send the summary at 8:30 instead." change a rule's time
    "oneoff": (re.compile(r"\b(?:tonight|today|tomorrow|this (?:time|once|week|weekend|trip|one|order|purchase|bill|"
                          r"month|morning|evening)|just this once|right now|for now|next (?:monday|tuesday|wednesday|"
                          r"thursday|friday|saturday|sunday|weekend))\b", re.I),
               re.compile(r"今晚|今天|明天|这次|这一次|就这一次|这一单|这单|下周[一二三四五六日]|先别|再")),
    # a thing pointed at ("Reduce this draft to 50 words.", "这份文件打印五份。") is this one thing,
    # not the matter of a standing rule; a time pointed at is not ("从这个月开始", "这周起")
    "this one": (re.compile(r"\b(?:this|these|those) (?!(?:is|are|was|were|to|for|as|one)\b)[a-z]", re.I),
                 re.compile(r"[这那](?:些|个(?!月|星期|礼拜|周|季度|学期)|[家首篇封条款单辆台份张本件瓶碗盒双杯段位间趟层页集])")),
    # an amount acted on, the object of the verb that opens the sentence ("Move $300 from checking
    # to savings.", "Print 5 copies of the agenda.", "转2000块到储蓄账户。"), is this action's: a verb
    # of keeping or limiting ("Keep $800 in checking.", 留, 保持, 控制) gives a setting, and so
    # does an amount with a rate ("Allow 3 drinks a week now.", "一天最多三杯") or "instead", and
    # an amount after 到, 成, 为 or 至 is the value a thing changes to ("涨到70元吧。")
    "amount acted on": (
        re.compile(r"^(?!.*\b(?:(?:a|an|per|each|every)\s+(?:day|night|week|month|year|hour|ride|trip|meal|person|"
                   r"sheet|page|paycheck|time)|daily|nightly|weekly|monthly|yearly|instead)\b)"
                   r"(?:please\s+|just\s+|go ahead and\s+|(?:can|could) you\s+)?"
                   r"(?!(?:keep|set|make|use|cap|limit|allow|budget|leave|hold|maintain|stay|raise|lower|increase|decrease|"
                   r"reduce|change|adjust|bump|up)\b)[a-z]+\s+(?:another\s+|an? extra\s+|only\s+|just\s+)?[$€£¥]?\d", re.I),
        re.compile(rf"^(?!.*(?:每|[一1](?:天|周|星期|个月|月|年|晚)|超过|以[下内上]|之内|最多|至少|不到))(?:请|麻烦你?|帮我|给我|再|你)*"
                   rf"(?!留|保持|控制|改|调|换|设|定|提|降|放宽|缩|延|挪)(?:给[\u4e00-\u9fff]{{1,3}})?"
                   rf"(?:(?![我你他她们的零一二两三四五六七八九十百千万])[\u4e00-\u9fff]){{1,2}}?(?<![到成为至])"
                   rf"(?:掉|了)?(?:\d+|[一二两三四五六七八九十百千万]+)[{_MEASURE}]")),
}
_STANDING = (re.compile(_EN_CUES["standing"], re.I), re.compile(_ZH_CUES["standing"]))
_POINTED = ("this one", "amount acted on")  # what a standing cue beside it makes a setting
# "Set <setting> to <value>" / "<setting>设成<value>": the setting named, whose words an earlier
# rule on that setting holds ("Set my taxi budget to 70 euros a ride." after "My taxi budget is …")
_SETTING = (re.compile(r"\bset\s+(?:up\s+)?(.+?)\s+(?:to|at|as|for)\b", re.I),
            re.compile(r"(?:^|[，,。；;！!])(?:把|将)?([^，,。；;！!]+?)(?:设[成为到置]|定[为成])"))
# a lone 一 is a number only as a count or a day ("一次", "一小时", "周一"): in 一下, 一点, 一定, 一起
# ("a bit", "surely", "together") it is none, and "简短一点" ("a bit shorter") gave no time of day
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*|(?:[零二两三四五六七八九十百千万半]|一(?=[零一二两三四五六七八九十百千万半]))"
                     rf"[零一二两三四五六七八九十百千万半]*|(?<=[周第期])一|一(?=[{_MEASURE}])")
# the unit after a number says what it counts; units of one kind compare ("2 hours" and "90 minutes")
_CURRENCY = "$€£¥"
_UNIT = re.compile(r"\s*(%|[a-z']+|[个半]*(?:小时|分钟|钟头|[\u4e00-\u9fff]))", re.I)
_UNIT_KIND = {word: kind for kind, words in {
    "money": "euro dollar buck usd eur gbp yuan rmb 块 元 刀",
    "time": "am pm o'clock 点",
    "duration": "hour hr minute min second sec 小时 分钟 钟头 秒",
    "date": "st nd rd th 号 日",
    "share": "% percent 成",
}.items() for word in words.split()}
# words after a number that are no unit ("at 7 every morning", "up to 3 a day")
_NO_UNIT = frozenset("a an the and or on in at to for per each every from before after with by of if when than".split())
_NEGATION = re.compile(r"\b(?:no|not|never|don't|do not|avoid|without|nothing)\b|[不别没勿禁]", re.I)


# the words that mark a sentence as a rule ("always", "only", "must", 都要, 一律, 每次) are the
# rule detector's cues, not the matter of the rule: two rules sharing only them share nothing
_RULE_WORDS = (re.compile(f"{_EN_CUES['general']}|{_EN_CUES['standing']}", re.I),
               re.compile(f"{_ZH_CUES['general']}|{_ZH_CUES['standing']}"),
               # nor is the verb that gives a setting ("Set my taxi budget to 70 euros a ride.")
               re.compile(r"\bset\b|设[成为到置]|定[为成]", re.I))


@functools.lru_cache(maxsize=4096)  # each rule in force is read again for every new one
def _terms(text: str) -> frozenset[str]:
    plain = text
    for rx in (*_CUES.values(), *_RULE_WORDS):
        plain = rx.sub(" ", plain)
    # a negation is no matter of a rule ("不要推荐快餐。" and "对外的消息里不要提到并购的事。" share
    # none): whether one rule has it and the other not is a feature of its own
    return frozenset(t for t in content_terms(_NEGATION.sub(" ", _NUMBER.sub(" ", plain)), parts=True))


def new_terms(old: str, new: str) -> frozenset[str]:
    """The words (or Chinese character pairs) of ``new`` that ``old`` lacks, cue words and
    numbers aside: what a rule said after another names that it did not ("aisle" in "I prefer
    aisle seats now." after "I prefer window seats."; nothing in "Red-eye flights are fine
    now." after "Never book red-eye flights.", which lifts a rule and sets none)."""
    return _terms(new) - _terms(old)


def _bin(n: int) -> str:
    return str(min(n, 3))


def pair_features(old: str, new: str) -> dict[str, float]:
    """The features the replacement model reads for the rule ``new`` said after ``old``."""
    return dict(_pair_features(simplified(old), simplified(new)))


@functools.lru_cache(maxsize=4096)  # a new rule is scored against every current rule
def _pair_features(old: str, new: str) -> tuple[tuple[str, float], ...]:
    a, b = _terms(old), _terms(new)
    shared = a & b
    union = a | b
    na, nb = set(_NUMBER.findall(old)), set(_NUMBER.findall(new))
    out: dict[str, float] = {
        "jaccard": len(shared) / len(union) if union else 0.0,
        "cover_old": len(shared) / len(a) if a else 0.0,
        "cover_new": len(shared) / len(b) if b else 0.0,
        f"shared={_bin(len(shared))}": 1.0,
        f"only_old={_bin(len(a - b))}": 1.0,
        f"only_new={_bin(len(b - a))}": 1.0,
    }
    if na and nb:
        out["numbers_differ" if na != nb else "numbers_same"] = 1.0
        if na != nb and a == b:
            out["only_numbers_differ"] = 1.0
    elif na or nb:
        out["numbers_one"] = 1.0
    if bool(_NEGATION.search(old)) != bool(_NEGATION.search(new)):
        out["negation_flip"] = 1.0
    for name, rx in _CUES.items():
        if rx.search(new):  # a cue says little on its own: "from now on" opens most new rules
            out[f"cue_{name}"] = 1.0
            out[f"cue_{name}&shared={_bin(len(shared))}"] = 1.0
    setting = _SETTING[1 if _CJK.search(new) else 0].search(new)
    if setting:
        named = _terms(setting.group(1))
        if named:  # the share of the setting's words the old rule holds
            out["setting_held"] = len(named & a) / len(named)
    if _CJK.search(new):
        out["zh"] = 1.0
    return tuple(out.items())


def no_change_reason(sentence: str) -> str | None:
    """Why ``sentence``, which states no rule by itself, changes no rule of the user's
    whatever words it shares with one: it asks, it is about someone else, a past event or
    this one time (the rule detector's closed-class cues), a thing pointed at or an amount
    acted on ("Move $300 from checking to savings."), or it names no quantity; ``None`` when
    none of these holds."""
    if sentence.rstrip().endswith(("?", "？")):
        return "question"
    if not _NUMBER.search(sentence):
        return "no quantity"
    if named_subject(sentence):  # "王志宏每周健身四次。"
        return "other"
    zh = bool(_CJK.search(sentence))
    standing = _STANDING[zh].search(sentence)  # "these reminders ... from now on" are no one thing
    return next((name for name, (en_rx, zh_rx) in _ABOUT.items()
                 if (zh_rx if zh else en_rx).search(sentence) and not (name in _POINTED and standing)), None)


def quantities(text: str) -> frozenset[str]:
    """The numbers ``text`` names, in digits or Chinese numerals ("60", "8:30", "两")."""
    return frozenset(_NUMBER.findall(text))


def quantity_kinds(text: str) -> frozenset[str]:
    """What each quantity ``text`` names counts, read from its unit: ``money``, ``time`` (of
    day), ``duration``, ``date``, ``share``, or the unit itself ("night", 杯); ``?`` when no
    unit follows it."""
    kinds = set()
    for m in _NUMBER.finditer(text):
        if m.start() and text[m.start() - 1] in _CURRENCY:
            kinds.add("money")
            continue
        if ":" in m.group(0):
            kinds.add("time")
            continue
        unit = _UNIT.match(text, m.end())
        word = unit.group(1).lower().lstrip("个半") or "个" if unit else ""  # "一个半小时": 小时
        if len(word) > 3 and word.endswith("s"):
            word = word[:-1]
        kinds.add("?" if not word or word in _NO_UNIT else _UNIT_KIND.get(word, word))
    return frozenset(kinds)


def changes_quantity(old: str, new: str) -> bool:
    """Whether ``new`` gives a quantity of ``old``'s anew: both name one, not the same, and of a
    kind ``old``'s are (:func:`quantity_kinds`; a quantity with no unit may be of any kind):
    "Change the print job to 5 copies." gives no "2 pages per sheet" anew."""
    a, b = quantities(old), quantities(new)
    if not (a and b and a != b):
        return False
    ka, kb = quantity_kinds(old), quantity_kinds(new)
    return "?" in ka or "?" in kb or bool(ka & kb)


class ReplacementClassifier(LinearModel):
    """The shipped pair model: :meth:`score` is the probability that a rule said after another
    replaces it; a pair is a replacement from its language's threshold (Chinese when the new
    rule has Han characters, English otherwise), or ``threshold``."""

    def __init__(self, model: dict[str, Any] | None = None, *, threshold: float | None = None) -> None:
        super().__init__(REPLACEMENTS_FILE, model, threshold=threshold)

    def score(self, old: str, new: str) -> float:
        """Probability that ``new`` replaces ``old``."""
        return self.probability(pair_features(old, new))

    def replaces(self, old: str, new: str) -> bool:
        """Whether ``new`` replaces ``old``: they share a word (or a Chinese character pair),
        neither has more than :data:`MAX_TERMS`, and the pair scores its language's threshold."""
        a, b = _terms(old), _terms(new)
        if not a & b or len(a) > MAX_TERMS or len(b) > MAX_TERMS:
            return False
        return self.score(old, new) >= self.thresholds["zh" if _CJK.search(new) else "en"]

    def revises(self, old: str, new: str) -> bool:
        """Whether ``new``, a sentence that states no rule by itself, changes the rule ``old``
        ("Change the budget to $250." after "My hotel budget is at most $180 per night."): it
        is not ruled out by :func:`no_change_reason`, gives one of ``old``'s quantities anew
        (:func:`changes_quantity`), and the pair is a replacement (:meth:`replaces`)."""
        return no_change_reason(new) is None and changes_quantity(old, new) and self.replaces(old, new)


@functools.lru_cache(maxsize=1)
def default_replacement_classifier() -> ReplacementClassifier:
    """The shipped replacement classifier, loaded once per process."""
    return ReplacementClassifier()
