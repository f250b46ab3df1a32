"""memos as an MCP server over stdio (``memos mcp``), with the official ``mcp`` package.

One server process serves one user's memory (and optionally one agent's, one session's)::

    memos mcp --store ~/.memos/memos.db --user ana

- **Tools:** ``archive``, ``retrieve``, ``pin``, ``facts`` and ``forget`` (names prefixed
  with ``--tool-prefix`` when given), their input schemas generated from the same pydantic
  models that validate the calls. A bad call (wrong types, unknown fields, an unknown
  fact id or tool) comes back as a tool error the model can read; it never ends the server.
- **Resources:** ``memos://rules`` (the user's rules, one per line, as every prompt holds
  them) and ``memos://facts`` (the current facts with their ids, JSON).

A desktop assistant or an IDE starts it as a command, e.g. in its ``mcpServers``
configuration: ``{"command": "memos", "args": ["mcp", "--store", "...", "--user", "ana"]}``.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from . import require

require("mcp", "mcp")

import anyio  # noqa: E402
import mcp_types as types  # noqa: E402
from mcp import MCPError  # noqa: E402
from mcp.server import Server  # noqa: E402
from mcp.server.stdio import stdio_server  # noqa: E402
from mcp_types.jsonrpc import INVALID_PARAMS  # noqa: E402

from .. import __version__  # noqa: E402
from ..adapters.tools import REGISTRY, check_prefix, run_tool  # noqa: E402
from ..session.memory import Memory  # noqa: E402

__all__ = ["RESOURCES", "build_server", "serve"]

RESOURCES = {
    "memos://rules": ("rules", "The user's rules and preferences, as every prompt holds them.", "text/plain"),
    "memos://facts": ("facts", "What memory knows about the user: current facts with their ids.", "application/json"),
}


def build_server(memory: Memory, *, prefix: str = "") -> Server[Any]:
    """An MCP server exposing ``memory``'s tools and resources (see the module)."""
    check_prefix(prefix)
    lock = threading.Lock()  # memos is synchronous: one call at a time, on a worker thread

    async def locked(fn: Any, *args: Any) -> Any:
        def run() -> Any:
            with lock:
                return fn(*args)

        return await anyio.to_thread.run_sync(run)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=prefix + t.name, description=t.description, input_schema=t.input_schema())
            for t in REGISTRY.values()])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        result = await locked(lambda: run_tool(memory, params.name, params.arguments or {}, prefixes=(prefix,)))
        return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(result, ensure_ascii=False))],
                                    is_error=result.get("status") == "error")

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[
            types.Resource(uri=uri, name=name, description=about, mime_type=mime)
            for uri, (name, about, mime) in RESOURCES.items()])

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri not in RESOURCES:
            raise MCPError(INVALID_PARAMS, f"unknown resource {uri!r}; memos has {sorted(RESOURCES)}")
        text = await locked(_resource_text, memory, uri)
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type=RESOURCES[uri][2],
                                                                             text=text)])

    return Server("memos", version=__version__, on_list_tools=list_tools, on_call_tool=call_tool,
                  on_list_resources=list_resources, on_read_resource=read_resource)


def _resource_text(memory: Memory, uri: str) -> str:
    if uri == "memos://rules":
        return "\n".join(f.value for f in memory.facts() if f.pinned)
    return json.dumps([{"id": f.id, "kind": f.kind, "key": f.key, "value": f.value, "pinned": f.pinned}
                       for f in memory.facts()], ensure_ascii=False)


def serve(memory: Memory, *, prefix: str = "") -> None:
    """Serve ``memory`` over stdin/stdout until the client closes the connection."""
    server = build_server(memory, prefix=prefix)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
