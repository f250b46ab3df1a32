"""The memory tools: schemas, dispatch, and error results the model can read."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memos import Memory
from memos.adapters.tools import REGISTRY, TOOLS
from memos.core.sections import RECALL_HEADER
from tests.conftest import user

pytestmark = [pytest.mark.postgres, pytest.mark.chroma_server]  # rerun by .ci/run on a PostgreSQL / Chroma server


def call(name: str, args, call_id: str = "call_1") -> dict:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}


RETRIEVE_NULLS = {"top_k": None, "since": None, "until": None, "kind": None, "page": None}


@pytest.fixture(scope="module")
def mem(tmp_path_factory):
    m = Memory("tools", store=str(tmp_path_factory.mktemp("tools") / "t.db"))
    m.add(user("My frequent flyer number is FF-99127."))
    m.archive("The wifi password at the cabin is pine-cone-42.", tags=["cabin"])
    m.flush()
    yield m
    m.close()


def test_schemas_are_strict_openai_function_tools(mem):
    tools = mem.tools()
    assert [t["function"]["name"] for t in tools] == ["archive", "retrieve", "pin"]
    for t in tools:
        fn = t["function"]
        params = fn["parameters"]
        assert t["type"] == "function" and fn["strict"] is True and fn["description"]
        assert params["additionalProperties"] is False
        assert sorted(params["required"]) == sorted(params["properties"])
    assert tools == list(TOOLS) and tools is not TOOLS


def test_retrieve_round_trip_promotes_hits_into_the_next_context(mem):
    msg = mem.handle_tool_call(call("retrieve", {"query": "cabin wifi password", **RETRIEVE_NULLS}))
    assert msg["role"] == "tool" and msg["tool_call_id"] == "call_1"
    body = json.loads(msg["content"])
    assert body["status"] == "ok" and any("pine-cone-42" in r["text"] for r in body["results"])
    recalled = [m["content"] for m in mem.context() if str(m.get("content", "")).startswith(RECALL_HEADER)]
    assert recalled and "pine-cone-42" in recalled[0]


def test_archive_and_pin_round_trips(mem):
    body = json.loads(mem.handle_tool_call(call("archive", {"content": "Gate code 7781#", "message_ids": None, "tags": ["home"]}))["content"])
    assert body["status"] == "ok" and mem._archival.get(body["archived_id"]).text == "Gate code 7781#"
    first = mem.history()[0]
    body = json.loads(mem.handle_tool_call(call("archive", {"content": None, "message_ids": [first.id], "tags": None}))["content"])
    assert body["status"] == "ok" and "FF-99127" in mem._archival.get(body["archived_id"]).text
    body = json.loads(mem.handle_tool_call(call("pin", {"text": "Always answer in Portuguese."}))["content"])
    assert body["status"] == "ok"
    assert any(f.id == body["pinned_fact_id"] and f.pinned for f in mem.facts())


@pytest.mark.parametrize(
    ("name", "args", "fragment"),
    [
        ("retrieve", "{not json", "not valid JSON"),
        ("retrieve", "[1, 2]", "must be a JSON object"),
        ("retrieve", {"query": 5}, "query: Input should be a valid string"),
        ("retrieve", {"query": "   "}, "query must not be empty"),
        ("retrieve", {"query": "x", "top_k": 0}, "top_k: Input should be greater than or equal to 1"),
        ("retrieve", {"query": "x", "top_k": 500}, "top_k: Input should be less than or equal to 20"),
        ("retrieve", {"query": "x", "colour": "red"}, "colour: unknown field"),
        ("retrieve", {"query": "x", "since": "last tuesday"}, "since must be an ISO 8601 time"),
        ("retrieve", {"query": "x", "kind": "poem"}, "kind: Input should be"),
        ("retrieve", {}, "query: Field required"),
        ("archive", {"content": None, "message_ids": None, "tags": None}, "give content or message_ids"),
        ("archive", {"content": None, "message_ids": ["nope"], "tags": None}, "unknown message id(s)"),
        ("archive", {"content": "  ", "message_ids": None, "tags": None}, "content must not be empty"),
        ("pin", {"text": ""}, "text: String should have at least 1 character"),
        ("delete_everything", {}, "unknown tool 'delete_everything'"),
    ],
)
def test_bad_calls_come_back_as_readable_errors(mem, name, args, fragment):
    msg = mem.handle_tool_call(call(name, args, "call_bad"))
    body = json.loads(msg["content"])
    assert msg["tool_call_id"] == "call_bad" and body["status"] == "error"
    assert fragment in body["error"]


def test_sdk_tool_call_objects_are_accepted(mem):
    from openai.types.chat import ChatCompletionMessageToolCall

    tc = ChatCompletionMessageToolCall.model_validate(call("retrieve", {"query": "flyer number", **RETRIEVE_NULLS}, "sdk_1"))
    msg = mem.handle_tool_call(tc)
    assert msg["tool_call_id"] == "sdk_1" and json.loads(msg["content"])["status"] == "ok"
    # another SDK's plain objects (attributes, no model_dump) are read the same way
    plain = SimpleNamespace(id="plain_1", function=SimpleNamespace(name="retrieve", arguments="{not json"))
    msg = mem.handle_tool_call(plain)
    assert msg["tool_call_id"] == "plain_1" and "not valid JSON" in json.loads(msg["content"])["error"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=40),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
field_names = st.sampled_from(["query", "top_k", "since", "until", "kind", "page", "content", "message_ids", "tags", "text",
                               "fact_id", "reason", "x"])
arguments = st.one_of(
    st.text(max_size=80),
    st.dictionaries(field_names, json_values, max_size=6).map(json.dumps),
    json_values.map(lambda v: json.dumps(v, allow_nan=True)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(["archive", "retrieve", "pin", "facts", "forget", "other", ""]), args=arguments,
       call_id=st.one_of(st.none(), st.text(max_size=8)))
def test_no_exception_escapes_handle_tool_call(mem, name, args, call_id):
    msg = mem.handle_tool_call({"id": call_id, "type": "function", "function": {"name": name, "arguments": args}})
    assert msg["role"] == "tool" and isinstance(msg["tool_call_id"], str)
    body = json.loads(msg["content"])
    assert body["status"] in ("ok", "error")
    if body["status"] == "error":
        assert isinstance(body["error"], str) and body["error"]


def test_one_tool_name_may_be_a_string_and_an_unknown_one_is_named(mem):
    assert [t["function"]["name"] for t in mem.tools("memory_", names="retrieve")] == ["memory_retrieve"]
    with pytest.raises(ValueError, match=r"unknown memory tools \['recall'\]"):
        mem.tools(names=["retrieve", "recall"])


def test_schemas_carry_the_limits_the_arguments_are_validated_against(mem):
    by_name = {t["function"]["name"]: t["function"]["parameters"]["properties"] for t in mem.tools(names=REGISTRY)}
    assert set(by_name) == {"archive", "retrieve", "pin", "facts", "forget"}
    assert by_name["pin"]["text"]["maxLength"] == 500
    assert by_name["retrieve"]["query"]["maxLength"] == 2000
    top_k = next(a for a in by_name["retrieve"]["top_k"]["anyOf"] if a.get("type") == "integer")
    assert (top_k["minimum"], top_k["maximum"]) == (1, 20)
    # one character over the schema's limit is refused with the field named; at the limit it is not
    long_pin = json.loads(mem.handle_tool_call(call("pin", {"text": "x" * 501}))["content"])
    assert long_pin["status"] == "error" and "text: String should have at most 500 characters" in long_pin["error"]
    body = json.loads(mem.handle_tool_call(call("retrieve", {"query": "q" * 2000, **RETRIEVE_NULLS}))["content"])
    assert body["status"] == "ok"


def test_prefixed_tool_names_route_and_bare_names_do_not(tmp_path):
    from memos import MemosSettings

    with Memory("prefixed", store=str(tmp_path / "p.db"), settings=MemosSettings(tool_prefix="memory_")) as m:
        assert [t["function"]["name"] for t in m.tools()] == ["memory_archive", "memory_retrieve", "memory_pin"]
        body = json.loads(m.handle_tool_call(call("memory_pin", {"text": "Always answer in Portuguese."}))["content"])
        assert body["status"] == "ok" and m.is_memory_tool("memory_retrieve")
        bare = json.loads(m.handle_tool_call(call("pin", {"text": "Never book Ryanair."}))["content"])
        assert bare["status"] == "error" and "unknown tool 'pin'" in bare["error"] and not m.is_memory_tool("pin")
        assert [t["function"]["name"] for t in m.tools(prefix="mx-")][0] == "mx-archive"
        assert json.loads(m.handle_tool_call(call("mx-pin", {"text": "Book aisle seats."}))["content"])["status"] == "ok"
        assert {f.value for f in m.facts() if f.pinned} >= {"Always answer in Portuguese.", "Book aisle seats."}
        with pytest.raises(ValueError, match="tool prefix"):
            m.tools(prefix="memory tools ")
    with pytest.raises(ValueError, match="tool_prefix"):
        MemosSettings(tool_prefix="bad prefix")


def test_facts_and_forget_tools(tmp_path):
    with Memory("facts-tools", store=str(tmp_path / "f.db")) as m:
        m.add(user("My passport number is X1234567 and I never fly Ryanair."))
        facts = json.loads(m.handle_tool_call(call("facts", {"query": None, "kind": None}))["content"])["facts"]
        passport = next(f for f in facts if "X1234567" in f["value"])
        missing = json.loads(m.handle_tool_call(call("forget", {"fact_id": 999999, "reason": None}))["content"])
        assert missing["status"] == "error" and "no fact with id 999999" in missing["error"]
        zero = json.loads(m.handle_tool_call(call("forget", {"fact_id": 0}))["content"])
        assert zero["status"] == "error" and "fact_id" in zero["error"]
        done = json.loads(m.handle_tool_call(call("forget", {"fact_id": passport["id"], "reason": "asked"}))["content"])
        assert done["status"] == "ok" and done["forgotten_fact_id"] == passport["id"]
        assert "X1234567" not in json.dumps(m.context())
        after = json.loads(m.handle_tool_call(call("facts", {"query": "passport"}))["content"])["facts"]
        assert all("X1234567" not in f["value"] for f in after)


@pytest.mark.usefixtures("mem")
def test_retrieve_scores_say_how_strong_a_hit_is(mem):
    from tests.conftest import HAVE_MODEL

    strong = json.loads(mem.handle_tool_call(call("retrieve", {"query": "cabin wifi password"}))["content"])["results"][0]
    weak = json.loads(mem.handle_tool_call(call("retrieve", {"query": "xylophone orchestra tuning"}))["content"])
    assert "pine-cone-42" in strong["text"] and 0.9 <= strong["score"] <= 1.0
    assert all(0.0 <= r["score"] <= 1.0 for r in weak["results"])
    assert all(r["score"] < strong["score"] for r in weak["results"])
    if HAVE_MODEL:
        assert set(strong["found_by"]) == {"dense", "keyword"} and strong["similarity"] > 0.5
        assert all(r.get("similarity", 0.0) < 0.3 for r in weak["results"])


def test_retrieve_lists_facts_and_archive_hits_by_the_score_they_show(make_memory):
    mem = make_memory()
    mem.add(user("My seat preference is aisle. My loyalty number is LY-55012."))
    for note in ("Seat 14C was an aisle seat on the Lisbon flight.", "The aisle seats on the night train were sold out.",
                 "Loyalty points expire in March.", "The loyalty desk is next to gate 12."):
        mem.archive(note)
    mem.flush()
    out = json.loads(mem.handle_tool_call(call("retrieve", {"query": "aisle seat loyalty number", "top_k": 8}))["content"])
    scores = [r["score"] for r in out["results"]]
    assert {r["source"] for r in out["results"]} == {"fact", "archive"}
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 <= s <= 1.0 for s in scores)


@pytest.mark.parametrize("prefix", ["", "memory_"])
def test_what_memos_own_tools_return_is_not_read_for_facts_or_the_summary(tmp_path, prefix):
    # a retrieve result quotes stored messages and facts under memos' own ids ("unit:…", "fact:307")
    # and times; read for facts, each call added half a dozen of those as identifiers
    from memos import MemosSettings

    with Memory("own", store=str(tmp_path / "o.db"), budget=1024, settings=MemosSettings(tool_prefix=prefix)) as m:
        m.add(user("My order ORD-12345 ships to 14 Rua Augusta."))
        summaries = []
        for i in range(12):
            m.add(user(f"What was my order number again? ({i})"))
            asked = call(f"{prefix}retrieve", {"query": "order number"}, f"r{i}")
            m.add({"role": "assistant", "content": None, "tool_calls": [asked]})
            m.add(m.handle_tool_call(asked))
            app = call("weather", {}, f"w{i}")
            m.add({"role": "assistant", "content": None, "tool_calls": [app]})
            m.add({"role": "tool", "tool_call_id": f"w{i}",
                   "content": json.dumps({"forecast_id": f"WX-{1000 + i}", "summary": "sunny " * 30})})
            m.add({"role": "assistant", "content": f"It is ORD-12345, and it will be sunny ({i})."})
            m.context()
            m.wait()
            summaries.append(m.summary())
        assert m.stats().demotions > 0
        facts = m.facts()
        assert not [f.key for f in facts if "retrieve" in f.value or f.key.startswith(("unit:", "fact:", "chain:"))]
        assert any(summaries) and not [s for s in summaries if "retrieve returned" in s or '"fact:' in s]
        keys = {f.key for f in facts}
        assert "ORD-12345" in keys and len({k for k in keys if k.startswith("WX-")}) >= 6  # the app's own tools still are
        assert any('"WX-1000"' in h.text for h in m.retrieve("WX-1000", 3))  # and what was demoted stays searchable


def test_calls_to_memos_own_tools_are_not_archived_again_and_stay_in_the_log(tmp_path):
    # a retrieve result quotes what is archived already: found again, a copy of a copy filled the
    # recalled section with JSON; the log keeps it, and archive(message_ids=...) still reaches it
    from sqlmodel import Session, select

    from memos.tiers.archival import WITHOUT_TOKENS, ArchiveItem

    with Memory("traffic", store=str(tmp_path / "t.db"), budget=1024) as m:
        m.add(user("My order ORD-12345 ships to 14 Rua Augusta."))
        results = []
        for i in range(12):
            m.add(user(f"Where does my order ship? ({i})"))
            asked = call("retrieve", {"query": "order shipping address"}, f"r{i}")
            pinned = call("pin", {"text": f"Always quote the order id ({i})."}, f"p{i}")
            m.add({"role": "assistant", "content": None, "tool_calls": [asked, pinned]})
            results += m.add([m.handle_tool_call(asked), m.handle_tool_call(pinned)])
            app = call("track", {"order": "ORD-12345"}, f"t{i}")
            m.add({"role": "assistant", "content": "Let me check the carrier.", "tool_calls": [app]})
            m.add({"role": "tool", "tool_call_id": f"t{i}", "content": json.dumps({"status": f"in transit, hub {i}",
                                                                                   "eta": f"day {i}"})})
            m.add({"role": "assistant", "content": f"It ships to 14 Rua Augusta; in transit at hub {i}."})
            m.context()
            m.wait()
        assert m.stats().demotions > 0
        with Session(m.store.engine) as s:
            texts = [r.text for r in s.exec(select(ArchiveItem).options(*WITHOUT_TOKENS)).all()]
        assert not [t for t in texts if "called retrieve" in t or "called pin" in t or '"status": "ok"' in t]
        assert sum("in transit, hub" in t for t in texts) >= 12  # the app's tool results are archived
        assert sum("Let me check the carrier." in t for t in texts) >= 12
        hits = m.retrieve("order shipping address ORD-12345", 20)
        assert hits and not [h.text for h in hits if '"status": "ok"' in h.text or "called retrieve" in h.text]
        logged = {msg.id for msg in m.history()}
        assert {r.id for r in results} <= logged  # nothing lost: the log keeps every result
        note = m.archive(message_ids=[results[0].id])
        assert any('"status": "ok"' in h.text for h in m._archival.search("order shipping address", 20, kinds=["excerpt"]))
        assert note.startswith("excerpt:")
