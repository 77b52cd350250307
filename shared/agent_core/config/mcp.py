"""The ``[mcp.servers.<name>]`` tables of ``config.toml``: MCP servers the operator runs.

Pure data (pydantic only): the gateway and every service load these settings, and none of them
but the run-worker imports the MCP SDK.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["SERVER_NAME", "McpServerSettings", "McpSettings"]

# Server names become part of tool names (``mcp__<server>__<tool>``), which providers restrict to
# ``[A-Za-z0-9_-]{1,64}``; a double underscore would make the namespace ambiguous, and 24
# characters leave room for the tool's own name.
SERVER_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_)){0,23}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$")
_TOOL_PATTERN = re.compile(r"^[A-Za-z0-9_\-./:*?]{1,128}$")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class McpServerSettings(_Section):
    """One MCP server.

    ``transport = "stdio"``: the run-worker starts ``command`` (an argv list, no shell) with
    ``env`` added to a minimal environment (the SDK's: PATH, HOME, USER, … — never the worker's
    own variables, so provider keys do not leak) in ``cwd``. ``transport = "http"``: streamable
    HTTP at ``url``, sending ``headers`` plus ``headers_from_env`` (header name → the variable
    holding its value, so tokens stay out of the file).

    ``allow`` / ``deny``: the server's own tool names, ``*`` and ``?`` as wildcards; a tool is
    offered when ``allow`` is unset or matches it, and ``deny`` does not. ``connect_timeout_s``
    bounds starting and the first listing; ``call_timeout_s`` bounds one tool call.
    """

    transport: Literal["stdio", "http"]
    command: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    cwd: Path | None = None
    url: str | None = Field(default=None, pattern=r"^https?://\S+$")
    headers: dict[str, str] = Field(default_factory=dict)
    headers_from_env: dict[str, str] = Field(default_factory=dict)
    connect_timeout_s: float = Field(default=15.0, gt=0, le=600)
    call_timeout_s: float = Field(default=60.0, gt=0, le=3600)
    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()
    enabled: bool = True

    @model_validator(mode="after")
    def _transport_fields(self) -> McpServerSettings:
        if self.transport == "stdio":
            if not self.command or not self.command[0]:
                raise ValueError("a stdio server needs command = [program, args…]")
            if self.url or self.headers or self.headers_from_env:
                raise ValueError("url and headers are for transport = 'http', not stdio")
            if self.cwd is not None and not self.cwd.is_absolute():
                raise ValueError(f"cwd: {self.cwd} is not an absolute path")
            for name in self.env:
                if not _ENV_NAME.match(name):
                    raise ValueError(f"env: {name!r} is not a variable name")
        else:
            if not self.url:
                raise ValueError("an http server needs url = 'http(s)://…'")
            if self.command or self.env or self.cwd is not None:
                raise ValueError("command, env and cwd are for transport = 'stdio', not http")
            for name in [*self.headers, *self.headers_from_env]:
                if not _HEADER_NAME.match(name):
                    raise ValueError(f"headers: {name!r} is not a header name")
            for var in self.headers_from_env.values():
                if not _ENV_NAME.match(var):
                    raise ValueError(f"headers_from_env: {var!r} is not a variable name")
        for pattern in [*(self.allow or ()), *self.deny]:
            if not _TOOL_PATTERN.match(pattern):
                raise ValueError(f"allow/deny: {pattern!r} is not a tool name or pattern")
        return self


class McpSettings(_Section):
    """``[mcp.servers.<name>]``: the MCP servers whose tools agents may use."""

    servers: dict[str, McpServerSettings] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _names(self) -> McpSettings:
        for name in self.servers:
            if not SERVER_NAME.match(name):
                raise ValueError(
                    f"mcp.servers: {name!r} is not a usable server name (letters, digits, '-' "
                    "and single '_', at most 24 characters)"
                )
        return self
