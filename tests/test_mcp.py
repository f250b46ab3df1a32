"""``memos mcp``, driven by the official MCP Python client over stdio."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from mcp import Client, MCPError, StdioServerParameters

from memos import Memory

ROOT = Path(__file__).resolve().parents[1]


def _text(result) -> dict:
    return json.loads(result.content[0].text)


def test_every_tool_and_resource_over_stdio_and_bad_calls_are_tool_errors(tmp_path):
    store = str(tmp_path / "mcp.db")
    with Memory("earlier", user="ana", store=store) as mem:  # what the user told another chat
        mem.add({"role": "user", "content": "My passport number is X7654321."})
    params = StdioServerParameters(command=sys.executable, cwd=str(ROOT), env=dict(os.environ),
                                   args=["-m", "memos", "mcp", "--store", store, "--user", "ana"])

    async def scenario() -> None:
        async with Client(params) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == {"archive", "retrieve", "pin", "facts", "forget"}
            assert tools["pin"].input_schema["properties"]["text"]["maxLength"] == 500

            pinned = await client.call_tool("pin", {"text": "Never book anything with Ryanair."})
            assert not pinned.is_error and _text(pinned)["pinned_fact_id"]
            archived = await client.call_tool("archive", {"content": "The cabin gate code is 7781#.", "tags": ["home"]})
            assert not archived.is_error
            found = await client.call_tool("retrieve", {"query": "cabin gate code"})
            assert not found.is_error and any("7781#" in r["text"] for r in _text(found)["results"])
            past = await client.call_tool("retrieve", {"query": "passport number"})
            assert any("X7654321" in r["text"] for r in _text(past)["results"])  # from the user's other chat

            rules = await client.read_resource("memos://rules")
            assert "Never book anything with Ryanair." in rules.contents[0].text
            facts = json.loads((await client.read_resource("memos://facts")).contents[0].text)
            passport = next(f for f in facts if "X7654321" in f["value"])
            listed = _text(await client.call_tool("facts", {"query": "passport"}))["facts"]
            assert any(f["id"] == passport["id"] for f in listed)
            forgot = await client.call_tool("forget", {"fact_id": passport["id"], "reason": "asked in chat"})
            assert not forgot.is_error
            after = await client.call_tool("retrieve", {"query": "passport number X7654321"})
            assert "X7654321" not in json.dumps(_text(after))

            for name, args, fragment in [("retrieve", {"query": 5}, "query: Input should be a valid string"),
                                         ("retrieve", {"query": "x", "colour": "red"}, "colour: unknown field"),
                                         ("forget", {"fact_id": 10**6}, "no fact with id"),
                                         ("pin", {}, "text: Field required"),
                                         ("drop_tables", {}, "unknown tool 'drop_tables'")]:
                bad = await client.call_tool(name, args)
                assert bad.is_error and fragment in _text(bad)["error"], (name, _text(bad))
            with pytest.raises(MCPError, match="unknown resource"):
                await client.read_resource("memos://secrets")
            assert len((await client.list_tools()).tools) == 5  # still serving

    asyncio.run(scenario())
    with Memory("later", user="ana", store=store) as mem:
        assert "Never book anything with Ryanair." in json.dumps(mem.context())  # pinned for the user's next chat
    with Memory("other", user="bob", store=store) as mem:
        assert "Ryanair" not in json.dumps(mem.context()) and not mem.retrieve("cabin gate code")


def test_prefixed_tool_names(tmp_path):
    params = StdioServerParameters(command=sys.executable, cwd=str(ROOT), env=dict(os.environ),
                                   args=["-m", "memos", "mcp", "--store", str(tmp_path / "p.db"), "--tool-prefix",
                                         "memory_"])

    async def scenario() -> None:
        async with Client(params) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == {"memory_archive", "memory_retrieve", "memory_pin", "memory_facts", "memory_forget"}
            assert not (await client.call_tool("memory_pin", {"text": "Use metric units."})).is_error
            assert (await client.call_tool("pin", {"text": "Use metric units."})).is_error

    asyncio.run(scenario())
