"""Each guard rule alone, and their composition."""

from __future__ import annotations

import pytest

from memos import ALLOW_ALL, ConstraintGuard, PinGuard, RecencyGuard, ToolChainGuard, Verdict
from memos.core.messages import Message
from memos.paging.guards import GuardContext, extract_constraints, is_constraint
from memos.tiers.hot import Unit, group_units
from tests.conftest import tool_chain, user


def msgs(*datas, pinned=()):
    return [Message(id=f"m{i}", seq=i, data=d, tokens=10, pinned=i in pinned) for i, d in enumerate(datas)]


def verdicts(guard, units):
    return [guard(u, GuardContext(units, i)) for i, u in enumerate(units)]


def test_group_units_keeps_tool_chains_whole_and_marks_in_flight():
    chain = tool_chain("a", n=2)
    units = group_units(msgs(user("q"), *chain, user("next"), chain[0] | {"tool_calls": [dict(c, id="b" + c["id"]) for c in chain[0]["tool_calls"]]}))
    assert [len(u.messages) for u in units] == [1, 3, 1, 1]
    assert [u.in_flight for u in units] == [False, False, False, True]


def test_tool_chain_guard_keeps_only_in_flight_chains():
    done = tool_chain("a", n=1)
    open_chain = tool_chain("b", n=2)[:2]  # one of two calls answered
    units = group_units(msgs(*done, *open_chain))
    assert verdicts(ToolChainGuard(), units) == [Verdict.EVICT, Verdict.KEEP]


def test_recency_guard_keeps_the_newest_units():
    units = group_units(msgs(*(user(str(i)) for i in range(5))))
    assert verdicts(RecencyGuard(2), units) == [Verdict.EVICT] * 3 + [Verdict.KEEP] * 2
    with pytest.raises(ValueError):
        RecencyGuard(0)


def test_pin_guard_pins_units_with_a_pinned_message():
    units = group_units(msgs(user("a"), user("b"), pinned={1}))
    assert verdicts(PinGuard(), units) == [Verdict.EVICT, Verdict.PIN]


@pytest.mark.parametrize("text", ["I never eat pork.", "Don't book anything before 9am.", "I'm allergic to peanuts.",
                                  "我不吃辣，所有带辣椒的推荐都不要", "预算不超过500元"])
def test_constraint_guard_pins_a_unit_whose_user_message_states_a_rule(text):
    assert is_constraint(text)
    units = group_units(msgs(user(text)))
    assert verdicts(ConstraintGuard(), units) == [Verdict.PIN]


@pytest.mark.parametrize("text", ["What's the weather tomorrow?", "Thanks, that was great.", "今天天气很好"])
def test_constraint_guard_lets_plain_messages_go(text):
    assert not is_constraint(text)
    assert verdicts(ConstraintGuard(), group_units(msgs(user(text)))) == [Verdict.EVICT]


def test_constraint_guard_ignores_assistant_messages_by_default():
    units = group_units(msgs({"role": "assistant", "content": "Never book anything with Ryanair."}))
    assert verdicts(ConstraintGuard(), units) == [Verdict.EVICT]
    assert verdicts(ConstraintGuard(roles=("assistant",)), units) == [Verdict.PIN]
    assert verdicts(ConstraintGuard(roles="assistant"), units) == [Verdict.PIN]  # one role, not its letters
    with pytest.raises(ValueError, match="roles must be among"):
        ConstraintGuard(roles=["assistent"])


def test_extract_constraints_returns_only_constraint_sentences():
    text = "Hi there! I don't eat spicy food. My order is ORD-12345. Thanks a lot!"
    assert extract_constraints(text) == ["I don't eat spicy food."]


def test_composition_takes_the_strictest_or_most_lenient_verdict():
    units = group_units(msgs(user("Never book me on night flights."), user("b"), user("c")))
    both = ConstraintGuard() & RecencyGuard(1)
    assert verdicts(both, units) == [Verdict.PIN, Verdict.EVICT, Verdict.KEEP]
    either = ConstraintGuard() | ALLOW_ALL
    assert verdicts(either, units) == [Verdict.EVICT] * 3


def test_plain_callables_work_as_guards():
    def keep_long(unit: Unit, ctx: GuardContext) -> Verdict:
        return Verdict.KEEP if "long" in unit.messages[0].text else Verdict.EVICT

    units = group_units(msgs(user("short"), user("a long one")))
    assert verdicts(ALLOW_ALL & keep_long, units) == [Verdict.EVICT, Verdict.KEEP]
    with pytest.raises(TypeError):
        ALLOW_ALL & 3  # type: ignore[operator]
