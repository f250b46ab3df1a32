"""memos where agents are built: the OpenAI Agents SDK (:mod:`.openai_agents`), MCP
(:mod:`.mcp_server`) and LangGraph (:mod:`.langgraph`). Each module needs its framework
installed (``pip install -e '.[agents]'``, ``'.[mcp]'``, ``'.[langgraph]'``) and says so
when it is missing."""

from __future__ import annotations

__all__ = ["require"]


def require(module: str, extra: str) -> None:
    """Raise an ``ImportError`` naming the extra to install when ``module`` is missing."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise ImportError(f"this integration needs the {module!r} package: pip install -e '.[{extra}]' "
                          f"(in the memos checkout) or pip install {extra_package(extra)}")


def extra_package(extra: str) -> str:
    """The PyPI package an extra stands for."""
    return {"agents": "openai-agents", "mcp": "mcp", "langgraph": "langgraph"}.get(extra, extra)
