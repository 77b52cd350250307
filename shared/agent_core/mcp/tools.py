"""MCP tools as the runtime's own :class:`Tool`: the same executor path as built-in tools.

Each tool of each server becomes one :class:`McpTool` named ``mcp__<server>__<tool>``, so its
calls get the same validation entry point, permission check (its namespaced name in the agent's
tool policy), timeout, events, output cap and artifact for a long result as any other tool.
:class:`McpServers` holds the worker's server clients and gives a run the tools its agent may use.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, TextIO

import mcp_types as types
from pydantic import ConfigDict

from agent_core.config.mcp import McpSettings
from agent_core.errors import ToolError
from agent_core.mcp.client import McpServerClient
from agent_core.mcp.names import enabled_for_agent, server_wanted, tool_name
from agent_core.tools.base import Tool, ToolArgs, ToolContext, ToolOutput
from agent_core.types.protocol import ToolDefinition

__all__ = ["McpArgs", "McpServers", "McpTool", "result_text"]

log = logging.getLogger("soong.mcp")

# What one result may hold in memory before the executor cuts it for the model and saves it whole
# as an artifact: a server answering with gigabytes must not take the worker with it.
MAX_RESULT_BYTES = 8 * 1024 * 1024
_DESCRIPTION_MAX = 4000


class McpArgs(ToolArgs):
    """Any JSON object: the server validates arguments against its own schema."""

    model_config = ConfigDict(extra="allow")


class McpTool(Tool[McpArgs]):
    """One tool of one MCP server (a subclass per tool, made by :func:`_tool_class`)."""

    input_model = McpArgs
    server: ClassVar[str]
    remote_name: ClassVar[str]
    schema: ClassVar[dict[str, Any]]

    def __init__(self, client: McpServerClient) -> None:
        self.client = client

    def definition(self) -> ToolDefinition:
        """The server's own input schema, under the namespaced name."""
        return ToolDefinition(
            name=self.name, description=self.description, input_schema=self.schema
        )

    async def run(self, args: McpArgs, ctx: ToolContext) -> ToolOutput:
        """Call the server; an ``is_error`` result stays an error result (``mcp_tool_error``)."""
        result = await self.client.call(self.remote_name, dict(args.model_extra or {}))
        text = result_text(result)
        meta: dict[str, Any] = {"mcp": {"server": self.server, "tool": self.remote_name}}
        if result.is_error:
            meta["error_code"] = "mcp_tool_error"
            return ToolOutput(text or f"{self.remote_name} failed", True, meta)
        return ToolOutput(text, False, meta)


def _tool_class(server: str, client: McpServerClient, spec: types.Tool) -> type[McpTool]:
    schema = dict(spec.input_schema)
    schema.pop("title", None)
    schema.setdefault("type", "object")
    hints = spec.annotations
    read_only = bool(hints and hints.read_only_hint)
    description = (spec.description or spec.title or spec.name)[:_DESCRIPTION_MAX]
    attrs: dict[str, Any] = {
        "name": tool_name(server, spec.name),
        "description": f"[MCP server {server}] {description}",
        "server": server,
        "remote_name": spec.name,
        "schema": schema,
        # The executor's limit backs up the client's own (which cancels the call on the server).
        "timeout_s": client.settings.call_timeout_s + 5.0,
        # Hints from a server the operator chose to run: read-only tools are not asked about
        # under an ``ask`` policy, and they (or idempotent ones) may run again after a lost worker.
        "writes": not read_only,
        "repeatable": read_only or bool(hints and hints.idempotent_hint),
    }
    return type(f"McpTool_{attrs['name']}", (McpTool,), attrs)


def result_text(result: types.CallToolResult) -> str:
    """The text the model gets: text blocks as they are, other blocks described in one line,
    the structured result as JSON when there is no text; at most :data:`MAX_RESULT_BYTES`."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            size = len(block.data) * 3 // 4
            parts.append(f"[{block.type} {block.mime_type}, {size} bytes, not shown]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource {block.uri}]")
        elif isinstance(block, types.EmbeddedResource):
            inner = block.resource
            if isinstance(inner, types.TextResourceContents):
                parts.append(inner.text)
            else:
                parts.append(f"[resource {inner.uri}, binary, not shown]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    text = "\n".join(parts)
    data = text.encode("utf-8")
    if len(data) > MAX_RESULT_BYTES:
        dropped = len(data) - MAX_RESULT_BYTES
        text = data[:MAX_RESULT_BYTES].decode("utf-8", "ignore")
        text += f"\n[MCP result cut: {dropped} more bytes were not kept]"
    return text


class McpServers:
    """The worker's MCP servers (enabled ones), started on first use and stopped with it."""

    def __init__(
        self,
        settings: McpSettings,
        *,
        environ: Mapping[str, str] | None = None,
        errlog: TextIO | None = None,
    ) -> None:
        self.clients = {
            name: McpServerClient(name, server, environ=environ, errlog=errlog)
            for name, server in sorted(settings.servers.items())
            if server.enabled
        }
        self._classes: dict[str, tuple[int, dict[str, type[McpTool]]]] = {}
        self._reported: dict[str, str] = {}

    def __bool__(self) -> bool:
        return bool(self.clients)

    async def tools_for(self, enabled: Sequence[str] | None) -> list[Tool[Any]]:
        """The MCP tools an agent with ``enabled_tools = enabled`` may use, starting the servers
        it may use that are not running. A server that cannot start adds no tools (logged once
        per reason); one that ran before keeps its last list, and its calls say it is down."""
        wanted = [c for name, c in self.clients.items() if server_wanted(enabled, name)]
        lists = await asyncio.gather(*(c.tools() for c in wanted), return_exceptions=True)
        out: list[Tool[Any]] = []
        for client, listed in zip(wanted, lists, strict=True):
            if isinstance(listed, asyncio.CancelledError):
                raise listed
            if isinstance(listed, BaseException):
                self._report(client.name, listed)
                continue
            self._reported.pop(client.name, None)
            for spec in listed:
                cls = self._class(client, spec)
                if enabled_for_agent(enabled, client.name, cls.name):
                    out.append(cls(client))
        return out

    async def close(self) -> None:
        """Stop every server (the worker is stopping)."""
        await asyncio.gather(*(c.close() for c in self.clients.values()))

    def _class(self, client: McpServerClient, spec: types.Tool) -> type[McpTool]:
        # Classes are made once per listing of a server: a refreshed list makes new ones.
        version, classes = self._classes.get(client.name, (-1, {}))
        if version != client.version:
            classes = {}
            self._classes[client.name] = (client.version, classes)
        cls = classes.get(spec.name)
        if cls is None:
            cls = classes[spec.name] = _tool_class(client.name, client, spec)
        return cls

    def _report(self, server: str, exc: BaseException) -> None:
        why = exc.message if isinstance(exc, ToolError) else type(exc).__name__
        if self._reported.get(server) != why:
            self._reported[server] = why
            log.warning("mcp server %s offers no tools to this run: %s", server, why)
