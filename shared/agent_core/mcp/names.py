"""How an MCP server's tools are named to the model, and which of them are offered.

A tool ``t`` of server ``s`` is ``mcp__s__t``. Providers accept tool names matching
``[A-Za-z0-9_-]{1,64}`` (OpenAI's rule, the strictest), while MCP tool names may hold other
characters and be longer: such a name is cleaned and cut, and a short hash of the original keeps
two tools that clean to the same text apart.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from collections.abc import Sequence

from agent_core.config.mcp import McpServerSettings

__all__ = ["PREFIX", "admitted", "enabled_for_agent", "server_prefix", "server_wanted", "tool_name"]

PREFIX = "mcp__"
_MAX = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def server_prefix(server: str) -> str:
    """``mcp__<server>__``: the start of every tool name of ``server``."""
    return f"{PREFIX}{server}__"


def tool_name(server: str, tool: str) -> str:
    """The name the model sees for ``tool`` of ``server`` (at most 64 safe characters)."""
    prefix = server_prefix(server)
    clean = _UNSAFE.sub("_", tool)
    if clean == tool and len(prefix) + len(clean) <= _MAX and clean:
        return prefix + clean
    digest = hashlib.blake2b(tool.encode(), digest_size=3).hexdigest()
    room = _MAX - len(prefix) - len(digest) - 1
    return f"{prefix}{clean[:room]}_{digest}"


def admitted(settings: McpServerSettings, tool: str) -> bool:
    """Whether the server's allow/deny lists let ``tool`` (its own name) through."""
    if any(fnmatch.fnmatchcase(tool, p) for p in settings.deny):
        return False
    return settings.allow is None or any(fnmatch.fnmatchcase(tool, p) for p in settings.allow)


def enabled_for_agent(enabled: Sequence[str] | None, server: str, name: str) -> bool:
    """Whether an agent's ``enabled_tools`` admits the MCP tool ``name`` of ``server``: all
    tools when ``None``; else the tool's own entry, or ``mcp__<server>__*`` for all of them."""
    if enabled is None:
        return True
    return name in enabled or f"{server_prefix(server)}*" in enabled


def server_wanted(enabled: Sequence[str] | None, server: str) -> bool:
    """Whether ``enabled_tools`` could admit any tool of ``server`` (the server is started only
    for agents that may use it)."""
    if enabled is None:
        return True
    prefix = server_prefix(server)
    return any(entry.startswith(prefix) for entry in enabled)
