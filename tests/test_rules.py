"""The rule classifier, measured on the corpus's held-back test split, and its results file."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import opencc
import pytest

from benchmarks.rules import MESSAGES, evaluate, load_benchmark_sentences, load_corpus
from memos.text.classifiers.detector import default_detector
from memos.text.classifiers.rules import (
    RuleClassifier,
    bare,
    default_classifier,
    features,
    has_words,
    in_a_language_read,
    load_model,
    named_subject,
    unquoted,
)
from memos.text.classifiers.rules_minilm import MiniLMRuleClassifier
from memos.text.script import simplified
from memos.text.sentences import split_sentences
from tests.conftest import EMBEDDING_DIR, HAVE_MODEL, needs_data, needs_model

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "rules.json"


def test_the_corpus_has_a_fixed_split_with_both_languages_and_every_kind():
    rows = load_corpus()
    assert len(rows) >= 800
    assert len({r["text"] for r in rows}) == len(rows)
    assert {r["split"] for r in rows} == {"train", "test", "holdout"}
    for lang in ("en", "zh"):
        for split in ("train", "test", "holdout"):
            part = [r for r in rows if r["lang"] == lang and r["split"] == split]
            assert {r["label"] for r in part} == {"constraint", "preference", "none"}
    categories = {r["category"] for r in rows if r["label"] != "none"}
    assert {"imp", "lim", "diet", "fmt", "lang", "addr", "fwd", "pref", "cond"} <= categories
    assert {"narr", "other", "joke", "q", "req", "chat"} <= {r["category"] for r in rows if r["label"] == "none"}


def test_the_chatty_messages_are_whole_messages_in_both_languages():
    rows = load_corpus(MESSAGES)
    for lang in ("en", "zh"):
        part = [r for r in rows if r["lang"] == lang]
        assert sum(r["label"] == "rule" for r in part) == 25 and sum(r["label"] == "none" for r in part) == 25
        assert all(len(split_sentences(r["text"])) >= 3 for r in part)  # each meets the long-message bar
    assert len({r["text"] for r in rows}) == len(rows)


def test_recorded_results_are_those_of_the_shipped_weights(tmp_path):
    recorded = json.loads(RESULTS.read_text())
    now = evaluate(default_classifier(), data=tmp_path / "absent")["results"]
    for name in ("train/en", "train/zh", "test/en", "test/zh", "holdout/en", "holdout/zh", "messages/en", "messages/zh",
                 "test/zh-tw", "holdout/zh-tw", "messages/zh-tw"):
        assert recorded["results"][name] == now[name], name


@pytest.mark.slow
@needs_model
def test_recorded_minilm_results_are_those_of_the_shipped_weights(tmp_path):
    recorded = json.loads(RESULTS.read_text())["minilm"]["results"]
    now = evaluate(MiniLMRuleClassifier(), data=tmp_path / "absent")["results"]
    for name in ("train/en", "train/zh", "test/en", "test/zh", "holdout/en", "holdout/zh", "messages/en", "messages/zh"):
        assert recorded[name] == now[name], name


@pytest.mark.parametrize(("lang", "recall", "precision"), [("en", 0.91, 0.75), ("zh", 0.90, 0.90)])
def test_held_back_test_split_recall_and_precision_do_not_regress(lang, recall, precision, tmp_path):
    r = evaluate(default_classifier(), data=tmp_path / "absent")["results"][f"test/{lang}"]
    # the n-gram model alone (memos' detector for Chinese, and for English where the embedding
    # model is not on disk), recorded (recall / precision): en 0.925 / 0.765, zh 0.923 / 0.930
    # (the test split holds chatty rules, chit-chat and rules stated as a state, "I have a
    # sesame allergy", since en-3687 / zh-4049, and one-off requests that invoke a rule, "Find
    # running shoes in my size and budget", since en-3895 / zh-4337, which the n-grams judge worst)
    assert r["recall"] >= recall
    assert r["precision"] >= precision


def test_chinese_sentences_are_scored_with_the_chinese_model_too():
    model = load_model()
    both, joint = RuleClassifier(model), RuleClassifier({k: v for k, v in model.items() if k != "rule_zh"})
    zh, en = "出差只坐高铁，不坐飞机。", "Book economy class only."
    assert both.score(en) == joint.score(en)  # English is scored by the joint model alone
    part = model["rule_zh"]
    z_zh = part["bias"] + sum(part["weights"].get(k, 0.0) for k in features(bare(zh)))
    z_joint = math.log(joint.score(zh) / (1 - joint.score(zh)))
    expected = 1 / (1 + math.exp(-(part["mix"] * z_zh + (1 - part["mix"]) * z_joint)))
    assert both.score(zh) == pytest.approx(expected, abs=1e-9) and both.score(zh) != joint.score(zh)
    # hard negatives of our own: a relative's job, a plan, a past limit, someone else's diet
    for text in ("我表哥在上海工作。", "我将要参加下周的读书会。", "我们最多玩了三个小时。", "我妈妈不吃辣。"):
        assert not both.judge([text])[0].is_rule, text
    for text in ("以后订酒店都要含早餐。", "给我回复一律用中文。", zh):
        assert both.judge([text])[0].is_rule, text


def test_each_language_is_judged_at_its_own_threshold():
    model = load_model()
    c = default_classifier()
    assert c.thresholds == model["thresholds"] and c.threshold == model["thresholds"]["en"]
    zh, en = "机票一律订经济舱。", "Book economy class only."
    assert c.threshold_for(zh) == c.thresholds["zh"] and c.threshold_for(en) == c.thresholds["en"]
    strict_zh = RuleClassifier({**model, "thresholds": {"en": c.score(en) / 2, "zh": (c.score(zh) + 1) / 2}})
    assert strict_zh.judge([zh])[0].kind == "none" and strict_zh.judge([en])[0].is_rule
    # an explicit threshold replaces both
    assert not any(j.is_rule for j in RuleClassifier(threshold=(max(c.score(zh), c.score(en)) + 1) / 2).judge([zh, en]))


@pytest.mark.slow
@needs_model
def test_minilm_judges_english_better_than_the_ngrams_alone_on_the_test_split(tmp_path):
    minilm = MiniLMRuleClassifier()
    both = evaluate(minilm, data=tmp_path / "absent")["results"]
    alone = evaluate(default_classifier(), data=tmp_path / "absent")["results"]
    # recorded (recall / precision / F1): 0.977 / 0.882 / 0.927 against 0.931 / 0.791 / 0.855
    assert both["test/en"]["recall"] >= 0.95 and both["test/en"]["f1"] >= alone["test/en"]["f1"] + 0.05
    # on sentences written after the weights were fitted: 0.987 / 0.951 / 0.969 against 0.962 / 0.916 / 0.938
    assert both["holdout/en"]["recall"] > alone["holdout/en"]["recall"] and both["holdout/en"]["f1"] > alone["holdout/en"]["f1"]
    assert both["test/zh"] == alone["test/zh"]
    chinese = minilm.judge(["机票一律订经济舱。"])[0]
    assert chinese.is_rule and chinese.score == round(default_classifier().score("机票一律订经济舱。"), 4)


@needs_model
def test_minilm_refuses_another_model(tmp_path):
    other = tmp_path / "other-model"
    other.mkdir()
    for f in EMBEDDING_DIR.iterdir():
        (other / f.name).symlink_to(f)
    with pytest.raises(ValueError, match="all-MiniLM-L6-v2"):
        MiniLMRuleClassifier(other)


def test_judgements_carry_kind_score_and_who_judged():
    det = default_detector()
    rule, chat = det.judge(["I'm allergic to peanuts.", "Haha, that's so true."])
    assert rule.is_rule and rule.kind in ("constraint", "preference") and rule.by == "classifier"
    assert not chat.is_rule and chat.kind == "none"
    assert 0.0 <= chat.score < det.threshold <= rule.score <= 1.0
    assert [j.sentence for j in det.rules("Hi! Book economy class only.")] == ["Book economy class only."]
    # three sentences make a long message, where a rule must reach the higher bar: without the
    # embedding model the n-gram model scores this one 0.83 against 0.85 and does not pin it
    # (a known miss: greetings count as sentences)
    judged = det.judge(split_sentences("Hi! Book economy class only. Thanks."))[1]
    assert judged.is_rule == (judged.score >= det.long_message_threshold)


def test_a_sentence_without_words_states_no_rule():
    # a counter, an emoji or a date is split off as a sentence of its own; fine-tuned MiniLM
    # scored the counter "（30）" 0.43, above its threshold, and pinned a chatty message
    wordless = ["（30）", "(12)", "#5", "\U0001f600", "...", "2024-05-01", "3 / 4"]
    for det in (default_detector(), default_classifier()):
        assert [j.score for j in det.judge(wordless)] == [0.0] * len(wordless)
        assert det.rules("刚才看了一集电视剧。（30）") == []
        assert [j.sentence for j in det.rules("以后别放香菜。（31）")] == ["以后别放香菜。"]
    assert has_words("OK") and has_words("香") and not has_words("I 2")


@needs_model
def test_a_link_an_email_or_a_path_pasted_alone_states_no_rule():
    # fine-tuned MiniLM read a bare link as a rule (http://localhost:8080/admin 0.55, a Windows
    # path 0.92, ana@example.com 0.61) and each was pinned as a constraint
    pasted = ["https://example.com/a/b", "http://localhost:8080/admin", "ana@example.com",
              "C:\\Users\\ana\\Documents\\report.docx", "/home/ana/notes.txt", "<https://github.com/org/repo/issues/12>"]
    minilm = MiniLMRuleClassifier()
    assert [j.score for j in minilm.judge(pasted)] == [0.0] * len(pasted)
    assert not has_words("km/h") and has_words("Don't") and has_words("e-mail") and has_words("“Metric.”")
    assert [j.sentence for j in minilm.rules("Always cc boss@corp.com on invoices.")] == ["Always cc boss@corp.com on invoices."]
    # Chinese around an email is Chinese: the English model does not judge it (it read the email
    # and scored 0.56, a rule)
    assert minilm.score("我的邮箱是 wang.li@example.cn。") == default_classifier().score("我的邮箱是 wang.li@example.cn。")


def test_a_rule_in_quotation_marks_is_judged_as_the_rule():
    # pasted in quotes, "I dislike floral patterns." scored 0.32 with MiniLM (0.94 without), under
    # its threshold of 0.35
    quoted = ['"I dislike floral patterns."', "“Book economy class only.”", "「机票一律订经济舱。」"]
    for det in (default_detector(), default_classifier()):
        for text in quoted:
            assert det.score(text) == pytest.approx(det.score(unquoted(text)), abs=1e-4), text
            assert det.judge([text])[0].is_rule, text
    assert unquoted('"a" and "b"') == '"a" and "b"' and unquoted('I said "no".') == 'I said "no".'
    assert unquoted("« Pas de porc. »") == "Pas de porc."


def test_a_rule_without_its_full_stop_is_judged_as_with_it():
    # chatty users leave the full stop out, and 5 of the corpus's 1,345 English rules have none;
    # fitted with code and wrapped lines among the negatives (which mostly have none), the models
    # read a missing stop as "no rule": "im allergic to shellfish" 0.35 against 0.52 with the
    # stop (n-grams), "use metric units" 0.57 against 0.89
    for det in (default_detector(), default_classifier()):
        for text, stop in [("im allergic to shellfish", "."), ("use metric units", "."), ("no emojis in your replies", "..."),
                           ("以后都用中文回答我", "。")]:
            assert det.score(text) == pytest.approx(det.score(text + stop), abs=1e-4), text
        assert all(j.is_rule for j in det.judge(["use metric units", "no emojis in your replies", "以后都用中文回答我"]))
    assert bare("“No pork.”") == "No pork" and bare("No pork !") == "No pork !" and bare("Really?") == "Really?"
    assert bare("Wait …") == "Wait" and bare("...") == "..."


def test_threshold_moves_the_decision_and_is_checked():
    s = "Window seats only, please."
    p = default_classifier().score(s)
    assert RuleClassifier(threshold=(p + 1) / 2).judge([s])[0].kind == "none"
    assert RuleClassifier(threshold=p / 2).judge([s])[0].is_rule
    with pytest.raises(ValueError):
        RuleClassifier(threshold=1.5)


def test_a_past_form_inside_a_relative_clause_does_not_make_a_rule_a_story():
    c = default_classifier()
    rules = ["Please skip any wine that was aged in plastic.", "I don't want hotels which were built before 1990.",
             "Don't show me listings that had no photos.", "I'd rather they didn't seat us near the kitchen."]
    stories = ["We loved the wine that was aged in oak.", "She said that the flight was full.",
               "I found a hotel which was built in 1890.", "That was the best pasta I ever had.",
               "I have to admit, that trip was fun."]
    assert [s for s in rules if c.score(s) < c.threshold] == []
    assert [s for s in stories if c.score(s) >= c.threshold] == []
    # the tense cues are read on the main clause; a demonstrative "that" opens no clause
    assert "en:past" not in features(rules[0]) and "en:past_clause" in features(rules[0])
    assert "en:past" in features(stories[3]) and "en:past_clause" not in features(stories[4])


def test_a_personal_detail_with_an_identifier_is_a_fact_not_a_rule():
    c = default_classifier()
    details = ["My booking reference is BK-1111.", "My loyalty number is 55-XY-901.", "My visa number is V-88120.",
               "The gate code is 7731.", "我的取件码是8812。", "我的房间号是1208。"]
    assert [s for s in details if c.score(s) >= c.threshold] == []
    assert c.score("Keep my booking reference handy.") >= c.threshold


def test_features_see_chinese_without_a_segmenter():
    f = features("机票一律订经济舱。")
    assert "c:一律" in f and "zh:standing" in f
    assert features("I paid $1,250 on 2024-05-01.")  # digits are folded, nothing raises


@needs_data
def test_benchmark_drawn_sentences_are_read_by_reference():
    rows = load_benchmark_sentences()
    assert {r["source"] for r in rows} == {"prefeval", "locomo", "memdaily"}
    assert all(r["text"].strip() for r in rows)
    r = evaluate()["results"]
    assert r["benchmark/prefeval"]["recall"] >= 0.95


def test_the_rule_model_setting_is_checked(monkeypatch):
    import memos.text.classifiers.detector as detector

    monkeypatch.setattr(detector, "_DEFAULT", None)
    monkeypatch.setenv("MEMOS_RULE_MODEL", "bert")
    with pytest.raises(ValueError, match="MEMOS_RULE_MODEL must be 'auto', 'minilm' or 'ngrams'"):
        detector.default_detector()
    monkeypatch.setenv("MEMOS_RULE_MODEL", "ngrams")
    assert detector.default_detector() is default_classifier()


def test_by_default_minilm_judges_only_when_the_model_is_on_disk(monkeypatch, tmp_path):
    import memos.text.classifiers.detector as detector

    monkeypatch.setattr(detector, "_DEFAULT", None)
    monkeypatch.delenv("MEMOS_RULE_MODEL", raising=False)
    monkeypatch.delenv("MEMOS_EMBEDDING_MODEL_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no model in Chroma's cache either
    assert detector.default_detector() is default_classifier()
    assert not (tmp_path / ".cache").exists()  # and nothing was downloaded
    if HAVE_MODEL:
        monkeypatch.setattr(detector, "_DEFAULT", None)
        monkeypatch.setenv("MEMOS_EMBEDDING_MODEL_DIR", str(EMBEDDING_DIR))
        assert isinstance(detector.default_detector(), MiniLMRuleClassifier)


@needs_model
def test_minilm_is_used_when_asked_and_pins_what_it_judges(monkeypatch, make_memory):
    import memos.text.classifiers.detector as detector

    monkeypatch.setattr(detector, "_DEFAULT", None)
    monkeypatch.setenv("MEMOS_RULE_MODEL", "minilm")
    assert isinstance(detector.default_detector(), MiniLMRuleClassifier)
    mem = make_memory(budget=2048)
    mem.add({"role": "user", "content": "Skip red-eye flights entirely."})
    # stories the n-gram model alone takes for rules (0.72 and 0.82)
    mem.add({"role": "user", "content": "The listing that I saw had no photos."})
    mem.add({"role": "user", "content": "I never finished that book you recommended."})
    pinned = [f.value for f in mem.facts() if f.pinned]
    assert pinned == ["Skip red-eye flights entirely."]


# A user who chats with the assistant as with a friend (in none of the rule files): three
# rules among thirty messages of news, stories, encouragement and plans
CHATTY_EN = [
    "Morning! I finally got the kayak out on the river this weekend.",
    "It was freezing, but honestly the quiet out there was worth every goosebump.",
    "My nephew tagged along and kept trying to race the ducks, haha.",
    "Work has been a whirlwind lately, we launched the new app on Tuesday.",
    "I'm so proud of the team, everyone stayed late to get it over the line.",
    "Never underestimate what a few pizzas can do for morale!",
    "Anyway, I'm thinking of picking up the violin again after ten years.",
    "My old teacher always said to practise scales before anything fun.",
    "You only live once, right? Might as well make some noise.",
    "Oh, and I'm allergic to sesame, so keep it out of any recipe you suggest.",
    "We had a lovely dinner at my sister's place last night, she made lasagne.",
    "Her kids never sit still for more than five minutes, it's chaos in the best way.",
    "I can't wait for the holidays, we're all heading to the coast.",
    "Don't you just love the smell of rain on a hot pavement?",
    "I've been reading a mystery novel that keeps me up way too late.",
    "The twist in chapter twelve had me gasping out loud on the train.",
    "My friend swears that audiobooks count as reading, and I kind of agree.",
    "Going forward, write your answers in British English, please.",
    "The garden is finally blooming, the tulips came out all at once.",
    "Remember to enjoy the little things, that's what my grandpa used to say.",
]
CHATTY_ZH = [
    "今天终于把阳台收拾干净了，感觉整个人都轻松了。",
    "我侄子周末来玩，非要跟我比赛吃包子。",
    "最近公司上线了新系统，大家都忙疯了。",
    "说真的，团队里每个人都特别拼，我挺感动的。",
    "我在想要不要重新学钢琴，都放下十年了。",
    "以前老师总说先练音阶再弹曲子。",
    "以后给我推荐菜谱都别放芝麻，我过敏。",
    "昨晚在我姐家吃饭，她做的红烧肉太香了。",
    "她家孩子一刻都坐不住，不过挺热闹的。",
    "我真等不及放假了，我们全家要去海边。",
]
CHATTY_RULES = [CHATTY_EN[9], CHATTY_EN[17], CHATTY_ZH[6]]


def use_rule_model(model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``model`` ('minilm' or 'ngrams') the rule model memos loads next (skip without the
    embedding model for 'minilm')."""
    import memos.text.classifiers.detector as detector

    if model == "minilm" and not HAVE_MODEL:
        pytest.skip("needs the embedding model (MEMOS_EMBEDDING_MODEL_DIR)")
    monkeypatch.setattr(detector, "_DEFAULT", None)
    monkeypatch.setenv("MEMOS_RULE_MODEL", model)


# Chinese writes no capitals: a name is a surname and given characters (two, as most have), and
# a sentence it opens, before its verb, is about that person ("Sarah loves hiking.")
NAMED_SUBJECTS = ["李梓涵喜欢健身。", "王志宏每天都去游泳。", "欧阳娜娜从来不吃香菜。", "陈建国只喝绿茶。",
                  "赵晓峰平时爱骑摩托车。", "孙志宏在深圳工作。", "刘子轩现在不喝咖啡。"]
# names elsewhere, words that open with a surname's character, and a directive beside a name
NOT_NAMED_SUBJECTS = ["周末不要安排会议。", "高铁票一律订二等座。", "王总的邮件都要抄送我。", "给李老师的回复都用敬语。",
                      "张伟明喜欢简洁的汇报，以后给他的报告都写短一点。", "马上要出差的话，酒店都订含早餐的。",
                      "方便的话都用微信联系我。", "Li Ming likes hiking.", "我喜欢健身。"]


@pytest.mark.parametrize("sentence", NAMED_SUBJECTS)
def test_a_chinese_sentence_about_a_named_person_states_no_rule_of_the_users(sentence):
    assert named_subject(sentence)
    assert not default_classifier().judge([sentence])[0].is_rule


@pytest.mark.parametrize("sentence", NOT_NAMED_SUBJECTS)
def test_a_name_elsewhere_or_a_surnames_character_opening_a_word_is_no_named_subject(sentence):
    assert not named_subject(sentence)


@pytest.mark.parametrize("model", ["minilm", "ngrams"])
def test_a_named_person_neither_lifts_nor_changes_the_users_rule(model, monkeypatch, make_memory):
    use_rule_model(model, monkeypatch)
    mem = make_memory(session="named", budget=4096)
    rules = ["我不吃辣。", "每周健身三次。"]
    # before: the first lifted "我不吃辣。" (0.86 as a revocation), the second changed the other rule
    for text in [*rules, "李梓涵现在能吃辣了。", "王志宏每周健身改成四次。"]:
        mem.add([{"role": "user", "content": text}, {"role": "assistant", "content": "好的。"}])
    assert [f.value for f in mem.facts() if f.pinned] == rules


def test_no_rule_of_the_corpus_opens_with_a_named_subject():
    assert [r["text"] for r in load_corpus() if r["label"] != "none" and named_subject(r["text"])] == []


@pytest.mark.parametrize("model", ["minilm", "ngrams"])
def test_a_chatty_user_gets_their_rules_pinned_and_little_else(model, monkeypatch, make_memory):
    use_rule_model(model, monkeypatch)
    mem = make_memory(budget=4096)
    for text in CHATTY_EN + CHATTY_ZH:
        mem.add({"role": "user", "content": text})
        mem.add({"role": "assistant", "content": "That sounds lovely, tell me more."})
    pinned = [f.value for f in mem.facts() if f.pinned]
    assert set(CHATTY_RULES) <= set(pinned)
    others = [p for p in pinned if p not in CHATTY_RULES]
    # the n-grams alone pin two ("I can't wait for the holidays, ...", and since code and
    # wrapped lines joined the negatives at en-4428, "Anyway, I'm thinking of picking up the
    # violin again after ten years.", 0.43 -> 0.50). The weights before a general assistant's
    # requests (en-4010 on) pinned "Never underestimate what a few pizzas can do for morale!"
    # with MiniLM and two with the n-grams; those before the chatty hard negatives (en-3687 on),
    # one with MiniLM and three with the n-grams
    assert len(others) <= (0 if model == "minilm" else 2), others


@pytest.mark.slow
def test_the_revocation_sets_are_their_own_and_their_recorded_results_are_those_of_the_code(tmp_path):
    from benchmarks.revocations import evaluate as evaluate_revocations
    from benchmarks.revocations import load_lifts, load_revocations

    rows = load_revocations()
    assert len({r["id"] for r in rows}) == len({r["text"] for r in rows}) == len(rows)
    assert not {r["text"] for r in rows} & {r["text"] for r in load_corpus()}  # no sentence in both files
    for lang in ("en", "zh"):
        for split in ("train", "test", "holdout"):
            assert {r["label"] for r in rows if r["lang"] == lang and r["split"] == split} == {"revoke", "none"}
    lifts = load_lifts()  # each revocation of the file with the rule it lifts, once
    by_id = {r["id"]: r for r in rows}
    assert len({p["revocation"] for p in lifts}) == len(lifts)
    assert all(by_id[p["revocation"]]["label"] == "revoke" and p["rule"].strip() for p in lifts)
    doc = json.loads((RESULTS.parent / "revocations.json").read_text())
    names = ("train/en", "train/zh", "test/en", "test/zh", "holdout/en", "holdout/zh", "rule_corpus/en",
             "rule_corpus/zh", "lifts/test/en", "lifts/test/zh", "lifts/holdout/en", "lifts/holdout/zh")
    now = evaluate_revocations(data=tmp_path / "absent")["results"]  # the n-gram model alone
    for name in names:
        assert doc["results"][name] == now[name], name
    if HAVE_MODEL:  # what memos uses where the MiniLM rule model loads
        from memos.text.classifiers.revocations import MiniLMRevocationClassifier

        minilm = MiniLMRevocationClassifier(MiniLMRuleClassifier(EMBEDDING_DIR))
        now = evaluate_revocations(minilm, data=tmp_path / "absent")["results"]
        for name in names:
            assert doc["minilm"]["results"][name] == now[name], name


@pytest.mark.parametrize("model", ["minilm", "ngrams"])
def test_a_revocation_that_says_what_holds_instead_lifts_the_rule(model, monkeypatch, make_memory):
    # neither sentence is in a corpus; the weights fitted before the compound sentences scored
    # the revocation below the Chinese threshold
    use_rule_model(model, monkeypatch)
    rule = "会议纪要都用表格整理。"
    mem = make_memory(session="kept", budget=4096)
    mem.add([{"role": "user", "content": rule}, {"role": "assistant", "content": "好的。"}])
    mem.add({"role": "user", "content": "不用谢，会议纪要照旧用表格。"})  # thanks, and the rule as before
    assert rule in [f.value for f in mem.facts() if f.pinned]
    mem.add({"role": "user", "content": "会议纪要不用做成表格了，写成要点就行。"})
    assert rule not in [f.value for f in mem.facts() if f.pinned]


@pytest.mark.parametrize("model", ["minilm", "ngrams"])
def test_forgetting_what_was_said_about_a_rule_lifts_it(model, monkeypatch, make_memory):
    # in no file: the weights fitted before the train sentences that discard what was said
    # ("Forget that I said …", "Scratch the … rule", "… was a joke") scored it 0.43 (MiniLM)
    use_rule_model(model, monkeypatch)
    mem = make_memory(session="forgotten", budget=4096)
    for text in ("I'm allergic to peanuts.", "Book aisle seats only.", "Forget what I said about peanuts, that was my son."):
        mem.add([{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}])
    assert [f.value for f in mem.facts() if f.pinned] == ["Book aisle seats only."]


@pytest.mark.parametrize(("model", "rule", "instead"), [
    ("minilm", "Call me Dr. Okafor.", "You can stop calling me Dr. Okafor, just Ada is fine."),
    ("ngrams", "Always book me a window seat.", "Forget the window-seat thing, put me on the aisle from now on."),
])
def test_what_holds_instead_of_a_lifted_rule_is_kept(model, rule, instead, monkeypatch, make_memory):
    # each revocation is judged more surely a revocation than a rule by its model: before
    # its second clause counted, it lifted the rule and the new one was lost
    use_rule_model(model, monkeypatch)
    mem = make_memory(session="instead", budget=4096)
    mem.add([{"role": "user", "content": rule}, {"role": "assistant", "content": "Noted."}])
    mem.add({"role": "user", "content": instead})
    pinned = [f.value for f in mem.facts() if f.pinned]
    assert rule not in pinned and instead in pinned
    plain = make_memory(session="plain", user="other", budget=4096)  # a revocation alone sets nothing
    plain.add([{"role": "user", "content": "Never book red-eye flights."}, {"role": "assistant", "content": "Noted."}])
    plain.add({"role": "user", "content": "Red-eye flights are fine for me now."})
    assert [f.value for f in plain.facts() if f.pinned] == []


@pytest.mark.parametrize(("model", "message", "lift", "word"), [
    ("minilm", "Hi! I'm Ana. I'm vegetarian, and please never book me on flights before 9am.",
     "Actually, I changed my mind: early flights are fine now.", "flights before 9am"),
    ("ngrams", "你好！我是小林。我不吃辣。", "我现在可以吃辣了。", "不吃辣"),
    ("minilm", "你好！我是小林。我不吃辣。", "我现在可以吃辣了。", "不吃辣"),
])
def test_a_lifted_rule_said_beside_other_sentences_leaves_the_pinned_section(model, message, lift, word, monkeypatch,
                                                                             make_memory):
    # the rule is stored with its whole message; the sentence that states it was not known as
    # a fact, so once the rule was lifted its message was pinned again, and the pinned section
    # showed the lifted rule as "still in force"
    use_rule_model(model, monkeypatch)
    mem = make_memory(session="beside", budget=1024)

    def pinned() -> str:
        return next((m["content"] for m in mem.context() if "[memory: pinned]" in str(m.get("content"))), "")

    mem.add([{"role": "user", "content": message}, {"role": "assistant", "content": "Noted."}])
    assert word in pinned()
    mem.add([{"role": "user", "content": lift}, {"role": "assistant", "content": "OK."}])
    for i in range(40):  # the messages leave the hot tier
        mem.add([{"role": "user", "content": f"Tell me about museum {i}."},
                 {"role": "assistant", "content": "Museums are nice. " * 30}])
    assert message in [f.value for f in mem.facts(include_history=True) if f.status == "invalidated"]
    assert word not in pinned()


@needs_model
def test_a_request_that_restates_a_rule_leaves_it_in_force(monkeypatch, make_memory):
    # the n-gram revocation weights fitted before the restating requests took both requests
    # for revocations (0.79 and 0.82: they name the rule's words, one says "again"; 0.55 and
    # 0.58 now); neither sentence is in a corpus
    import memos.text.classifiers.detector as detector
    from memos.text.classifiers.revocations import MiniLMRevocationClassifier, default_revocation_classifier

    monkeypatch.setattr(detector, "_DEFAULT", None)
    monkeypatch.setenv("MEMOS_RULE_MODEL", "auto")
    assert isinstance(default_revocation_classifier(), MiniLMRevocationClassifier)
    for rule, request in [("Always avoid toll roads when you plan my drives.", "Map out the drive to Faro avoiding tolls."),
                          ("Never book red-eye flights.", "Search flights again, no red-eyes.")]:
        mem = make_memory(session=request[:6], budget=4096)
        mem.add([{"role": "user", "content": rule}, {"role": "assistant", "content": "Noted."}])
        mem.add({"role": "user", "content": request})
        assert rule in [f.value for f in mem.facts() if f.pinned], request
    mem = make_memory(session="lifted", budget=4096)  # a revocation in the same words still lifts it
    mem.add([{"role": "user", "content": "Never book red-eye flights."}, {"role": "assistant", "content": "Noted."}])
    mem.add({"role": "user", "content": "Red-eye flights are fine for me now."})
    assert "Never book red-eye flights." not in [f.value for f in mem.facts() if f.pinned]


@pytest.mark.parametrize("model", ["minilm", "ngrams"])
def test_a_user_who_asks_about_topics_pins_nothing_but_the_rule(model, monkeypatch, make_memory):
    # a chatty user of a general assistant; with the weights before the corpus had that
    # register, every one of these questions was pinned as a constraint (MiniLM 0.68-0.85,
    # n-grams 0.52) and the rule shared the pinned section with sixty of them
    use_rule_model(model, monkeypatch)
    mem = make_memory(session="topics", budget=4096)
    rule = "Always answer with the sources at the end."
    for i in range(8):
        if i == 3:
            mem.add([{"role": "user", "content": rule}, {"role": "assistant", "content": "Will do."}])
        mem.add([{"role": "user", "content": f"Tell me something about topic {i + 40}, it is pretty interesting and I "
                                             "want details."},
                 {"role": "assistant", "content": f"Topic {i + 40} covers a lot of ground."}])
    mem.add([{"role": "user", "content": "给我讲讲敦煌壁画，我很想知道细节。"}, {"role": "assistant", "content": "好的。"}])
    assert [f.value for f in mem.facts() if f.pinned] == [rule]


@pytest.mark.parametrize("model", ["minilm", "ngrams"])
def test_code_a_user_pastes_in_a_fence_states_no_rule(model, monkeypatch, make_memory):
    # a user of a coding assistant pastes code; its lines are data, not rules ("if not number
    # in memo:" scores 0.97 with MiniLM and 0.94 with the n-grams), while the rule they state
    # beside it is pinned and an id in the code is still found
    use_rule_model(model, monkeypatch)
    code = "if not number in memo:\n    return None\nmetadata = {}\norder = 'ORD-55120'"
    assert default_detector().judge(["if not number in memo:"])[0].is_rule  # what the fence keeps out
    mem = make_memory(session="code", budget=4096)
    rule = "Always add type hints to the code you write for me."
    mem.add([{"role": "user", "content": f"Here is my function:\n```python\n{code}\n```\n{rule}"},
             {"role": "assistant", "content": "Thanks, I will."}])
    facts = mem.facts()
    pinned = [f.value for f in facts if f.pinned]
    assert pinned == [f"Here is my function: {rule}"]  # a short message's rule is kept whole, less its code
    assert "ORD-55120" in [f.key for f in facts if f.kind == "identifier"]


@pytest.mark.parametrize("model", ["minilm", "ngrams"])
def test_code_and_documents_pasted_without_a_fence_state_no_rule(model, monkeypatch, make_memory):
    # most pasted code has no fence, and a paper pasted from a PDF comes with its line breaks;
    # the corpus has code, logs, lists and wrapped fragments as negatives (en-4428 on, zh-4793
    # on), none of these lines among them. The weights before pinned five of these lines with
    # MiniLM and two with the n-grams; MiniLM still pins the comment "// at most fifty per page"
    use_rule_model(model, monkeypatch)
    code = ("if not user.allergies: return menu\nconst MAX_ITEMS = 50; // at most fifty per page\n"
            "SELECT id FROM bookings WHERE refundable = 1;\nbananas, rice, lentils, tofu\n"
            "2025-01-04 10:01:22 WARN retrying request, attempt 3 of 5")
    paper = ("we find that models trained only on short contexts never\nlearn to use the middle of long inputs, "
             "and must therefore\nbe evaluated on at least three lengths, as all of the\nearlier work did not.")
    mem = make_memory(session="paste", budget=4096)
    rule = "From now on, keep summaries under 100 words."
    mem.add([{"role": "user", "content": f"Why does this fail?\n{code}"}, {"role": "assistant", "content": "Let me see."},
             {"role": "user", "content": f"Can you summarise this part of the paper?\n{paper}\n{rule}"},
             {"role": "assistant", "content": "Sure."}])
    pinned = [f.value for f in mem.facts() if f.pinned]
    assert rule in pinned and len(pinned) <= (2 if model == "minilm" else 1), pinned


def test_the_revocation_head_was_fitted_on_the_shipped_rule_weights():
    # the head reads the rule model's vectors: refitted rule weights without a refitted head
    # took English test revocations' precision from 0.86 to 0.77
    import numpy as np

    from benchmarks.revocations_minilm import rule_weights_sha256
    from memos.text.classifiers.revocations import REVOCATIONS_MINILM_FILE

    fitted_on = str(np.load(REVOCATIONS_MINILM_FILE)["encoder_sha256"])
    assert fitted_on == rule_weights_sha256(), \
        "refit the head: python -m benchmarks.revocations_minilm --model-dir DIR"


LISTS = Path(__file__).parent / "data" / "rules" / "lists.json"


@pytest.mark.parametrize("model", ["minilm", "ngrams"])
def test_the_items_of_a_list_of_rules_are_pinned_with_its_heading(model, monkeypatch, make_memory):
    # tests/data/rules/lists.json: lists of rules and lists that are none (what we did, a
    # shopping list, reasons, today's plan), English and Chinese, each item labelled; written
    # for this test and fitted on by nothing. Read alone, "- window seat" is no sentence, and an
    # item of a message of more than two sentences had to reach 0.85: 6 of 25 items were pinned
    use_rule_model(model, monkeypatch)
    counts: dict[str, list[int]] = {}
    for case in json.loads(LISTS.read_text(encoding="utf-8")):
        mem = make_memory(session=case["id"], budget=4096)
        mem.add([{"role": "user", "content": case["text"]}, {"role": "assistant", "content": "Noted."}])
        pinned = [f.value for f in mem.facts() if f.pinned]
        heading, *lines = case["text"].split("\n")
        assert heading not in pinned  # a heading by itself says nothing
        c = counts.setdefault(case["lang"], [0, 0, 0])
        for line, label in zip(lines, case["items"], strict=True):
            item = re.sub(r"^(?:[-*]|\d+\.|[一二三四五六七八九十]+、)\s*", "", line)
            shown = [p for p in pinned if p.endswith(item)]
            assert all(p.startswith(heading.rstrip(":：")) for p in shown)  # read with its heading
            c[0] += bool(shown) and label
            c[1] += bool(shown) and not label
            c[2] += not shown and label
    for lang, (tp, fp, fn) in counts.items():  # recorded in docs/rules-and-facts.md
        assert tp / (tp + fp) >= 0.9 and tp / (tp + fn) >= 0.9, (lang, tp, fp, fn)


@pytest.mark.parametrize("model", ["minilm", "ngrams"])
def test_judge_each_judges_each_text_as_a_message_of_its_own(model, monkeypatch):
    import memos.text.classifiers.detector as detector

    use_rule_model(model, monkeypatch)
    detector = detector.default_detector()
    texts = ["My rules: no pork", "no pork", "Things I did: at most 3 hours of sleep", "我的要求，只订高铁", "window seat"]
    assert detector.judge_each(texts) == [detector.judge([t])[0] for t in texts]
    assert [j.is_rule for j in detector.judge(texts)] != [j.is_rule for j in detector.judge_each(texts)]  # no 0.85 bar


@pytest.mark.parametrize("model", ["minilm", "ngrams"])
def test_each_item_of_a_short_list_is_a_rule_of_its_own(model, monkeypatch, make_memory):
    # a short message's rules each hold the whole message; an item holds its heading alone,
    # so a revocation of one item leaves the others
    use_rule_model(model, monkeypatch)
    mem = make_memory(budget=4096)
    text = "My diet rules:\n- never serve me pork\n- no alcohol, ever"
    mem.add([{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}])
    assert [f.value for f in mem.facts() if f.pinned] == ["My diet rules: never serve me pork",
                                                          "My diet rules: no alcohol, ever"]
    mem.add([{"role": "user", "content": "I eat pork again now."}, {"role": "assistant", "content": "Noted."}])
    assert [f.value for f in mem.facts() if f.pinned] == ["My diet rules: no alcohol, ever"]


def test_a_list_item_keeps_its_number_and_is_read_with_its_heading():
    from memos.text.sentences import headings, in_context

    text = "My rules:\n1. Only trains.\n2) no red-eyes\n- 1.5 litres of water a day\nThanks!\nAlso:\n一、不坐红眼航班"
    sentences = split_sentences(text)
    assert sentences == ["My rules:", "1. Only trains.", "2) no red-eyes", "- 1.5 litres of water a day", "Thanks!",
                         "Also:", "一、不坐红眼航班"]
    heads = headings(sentences)
    assert heads == [None, "My rules:", "My rules:", "My rules:", None, None, "Also:"]
    assert [in_context(s, h) for s, h in zip(sentences, heads, strict=True)][1:4] == [
        "My rules: Only trains.", "My rules: no red-eyes", "My rules: 1.5 litres of water a day"]
    assert in_context("一、不坐红眼航班", "出差的规矩：") == "出差的规矩，不坐红眼航班"
    assert split_sentences("We need 2. Then 3.") == ["We need 2.", "Then 3."]  # a number that ends a sentence
    for text in ("**Requirements:**\n- no global state", "## Requirements\n1. no global state"):  # Markdown
        sentences = split_sentences(text)
        assert in_context(sentences[1], headings(sentences)[1]) == "Requirements: no global state"


def test_traditional_chinese_is_judged_as_its_simplified_form():
    chinese = [r for r in load_corpus() if r["lang"] == "zh"]
    # Simplified text is read as it is: every Chinese sentence the weights were fitted and measured on
    assert all(simplified(r["text"]) == r["text"] for r in chinese)
    assert simplified("以後訂機票一律訂經濟艙。") == "以后订机票一律订经济舱。"
    assert simplified("Book economy class only.") == "Book economy class only."
    clf = default_classifier()
    traditional = opencc.OpenCC("s2t")
    test = [r["text"] for r in chinese if r["split"] == "test"]
    pairs = [(t, traditional.convert(t)) for t in test]
    assert sum(s != t for s, t in pairs) > 0.9 * len(pairs)  # most sentences have a character that differs
    same = [(s, t) for s, t in pairs if simplified(t) == s]
    assert len(same) > 0.98 * len(pairs)
    assert all(clf.score(t) == clf.score(s) for s, t in same)
    assert named_subject("陳麗華喜歡健身。") and named_subject("陈丽华喜欢健身。")  # someone else's, in either script


@pytest.mark.parametrize("sentence", ["週末に京都へ行く予定です。", "豚肉は食べません。", "앞으로는 항상 존댓말로 대답해 주세요.",
                                      "Впредь всегда отвечай по-русски.", "من الآن فصاعدا أجبني بالعربية دائما."])
def test_a_sentence_in_a_language_the_models_do_not_know_states_no_rule(sentence):
    # scored by the Chinese or the English model, its score was noise: the first took 0.47 (a rule at 0.38)
    assert not in_a_language_read(sentence)
    assert default_detector().judge([sentence])[0].score == 0.0 and not default_classifier().rules(sentence)


def test_chinese_with_a_brand_in_katakana_and_english_with_accents_are_still_read():
    for sentence in ["我只买ユニクロ的衣服。", "以后订酒店一律不要超过800块。", "Always book me a table at Café Müller.", "Book economy class only."]:
        assert in_a_language_read(sentence), sentence
    assert default_classifier().rules("我只买ユニクロ的衣服。")


class _ClearedByAnotherThread(dict):
    """A cache that another thread empties right after each write (it had grown past its size)."""

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        self.clear()

    def update(self, *args, **kwargs):
        super().update(*args, **kwargs)
        self.clear()


@needs_model
def test_minilm_scores_survive_the_cache_being_cleared_by_another_thread():
    # the summariser and the rule extractor score on different threads; a KeyError came out of scores()
    sentences = ["Book economy class only.", "I went to the beach yesterday.", "出差只坐高铁。"]
    expected = MiniLMRuleClassifier().scores(sentences)
    racing = MiniLMRuleClassifier()
    racing._cache = _ClearedByAnotherThread()
    racing._vectors = _ClearedByAnotherThread()
    # (a sentence scored alone or in a batch differs in the eighth decimal: padding)
    assert racing.scores(sentences) == pytest.approx(expected, abs=1e-6)
    assert racing.scores(sentences[:1]) == pytest.approx(expected[:1], abs=1e-6)
