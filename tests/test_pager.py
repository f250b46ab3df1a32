"""The pager's pure functions: cut point and soft compaction."""

from __future__ import annotations

from memos import ALLOW_ALL, ConstraintGuard, RecencyGuard, ToolChainGuard
from memos.core.messages import Message
from memos.paging.pager import find_cut_point, find_soft_compactions
from memos.tiers.hot import group_units
from tests.conftest import tool_chain, user


def msgs(*datas, tokens=10):
    return [Message(id=f"m{i}", seq=i, data=d, tokens=tokens) for i, d in enumerate(datas)]


def test_cut_walks_from_the_oldest_until_the_target():
    units = group_units(msgs(*(user(str(i)) for i in range(10))))
    cut = find_cut_point(units, target_tokens=45, guard=ALLOW_ALL)
    assert cut.index == 6 and len(cut.demote) == 6 and cut.hot_tokens == 40
    assert [u.messages[0].id for u in cut.demote] == [f"m{i}" for i in range(6)]


def test_cut_moves_nothing_when_already_under_target():
    units = group_units(msgs(*(user(str(i)) for i in range(3))))
    cut = find_cut_point(units, target_tokens=100, guard=ALLOW_ALL)
    assert cut.empty and cut.hot_tokens == 30


def test_cut_never_splits_a_tool_chain():
    chain = tool_chain("a", n=3)  # 4 messages, 40 tokens, one unit
    units = group_units(msgs(user("q"), *chain, user("after")))
    cut = find_cut_point(units, target_tokens=45, guard=ALLOW_ALL)
    # removing only the first message leaves 50 > 45, so the whole chain goes with it
    assert cut.index == 2 and [len(u.messages) for u in cut.demote] == [1, 4]
    assert cut.hot_tokens == 10


def test_cut_stops_at_a_kept_unit_and_never_passes_it():
    in_flight = tool_chain("b", n=2)[:2]
    units = group_units(msgs(user("0"), *in_flight))
    cut = find_cut_point(units, target_tokens=0, guard=ToolChainGuard())
    assert cut.index == 1 and cut.stopped_by == "kept by a guard"
    units = group_units(msgs(*(user(str(i)) for i in range(6))))
    cut = find_cut_point(units, target_tokens=0, guard=RecencyGuard(2))
    assert cut.index == 4 and cut.hot_tokens == 20


def test_pinned_units_leave_hot_but_are_reported_apart():
    units = group_units(msgs(user("hello"), user("I never eat meat."), user("x"), user("y")))
    cut = find_cut_point(units, target_tokens=15, guard=ConstraintGuard())
    assert [u.messages[0].id for u in cut.pin] == ["m1"]
    assert [u.messages[0].id for u in cut.demote] == ["m0", "m2"]


def test_unit_tokens_callback_sizes_the_units():
    units = group_units(msgs(user("a"), user("b"), user("c")))
    cut = find_cut_point(units, target_tokens=5, guard=ALLOW_ALL, unit_tokens=lambda u: 5)
    assert cut.index == 2


def test_soft_compaction_picks_old_used_tool_results_oldest_first():
    first, second, third = tool_chain("a", n=2), tool_chain("b"), tool_chain("c")
    units = group_units(msgs(*first, user("u"), *second, user("v"), *third))
    ids = find_soft_compactions(units, tokens_to_free=1000, keep_recent_units=2, already=set(), saving=lambda _: 5)
    # the newest two units (user "v" and chain c) are left alone
    assert ids == ["m1", "m2", "m5"]
    ids = find_soft_compactions(units, tokens_to_free=6, keep_recent_units=2, already={"m1"}, saving=lambda _: 5)
    assert ids == ["m2", "m5"]
    assert find_soft_compactions(units, tokens_to_free=50, keep_recent_units=2, already=set(), saving=lambda _: 0) == []
