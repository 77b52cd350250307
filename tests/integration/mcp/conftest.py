"""Real MCP servers (``tests/fakes/mcp_server.py``) over stdio and streamable HTTP, and an
executor that runs their tools the way a run-worker does."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_core.ids import new_session_id
from agent_core.mcp import McpServerSettings, McpSettings
from agent_core.mcp.tools import McpServers
from agent_core.tools import (
    MemoryArtifactSink,
    PermissionGate,
    PermissionRules,
    Tool,
    ToolExecutor,
    ToolRegistry,
    Workspace,
)
from agent_core.types.protocol import ToolCall, ToolResult
from tests.conftest import REPO
from tests.fakes.mcp_server import COMMAND, http_server

FAKE = COMMAND


def stdio_settings(**extra: Any) -> McpServerSettings:
    """The fake server over stdio, started in the repository (so ``tests`` imports)."""
    fields: dict[str, Any] = {"transport": "stdio", "command": FAKE, "cwd": REPO}
    return McpServerSettings.model_validate({**fields, **extra})


@pytest.fixture
def http_url() -> Iterator[str]:
    """The fake server over streamable HTTP on a loopback port; stopped after the test."""
    with http_server() as url:
        yield url


@dataclass
class Rig:
    """Servers plus an executor over the tools a run would get."""

    servers: McpServers
    sink: MemoryArtifactSink
    workspace: Workspace
    tools: list[Tool[Any]]
    calls: int = 0

    async def offer(self, enabled: list[str] | None = None) -> list[str]:
        """List the tools again (as a new run does); their names."""
        self.tools = await self.servers.tools_for(enabled)
        return sorted(t.name for t in self.tools)

    async def call(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        rules: PermissionRules | None = None,
    ) -> ToolResult:
        """One call through the same executor as built-in tools (allowed unless ``rules``)."""
        self.calls += 1
        executor = ToolExecutor(
            ToolRegistry(self.tools),
            workspace=self.workspace,
            run_id="run_test",
            agent_id="agent_test",
            permissions=PermissionGate(rules or PermissionRules()),
            artifacts=self.sink,
        )
        return await executor.execute(
            ToolCall(id=f"call_{self.calls}", name=name, arguments=arguments or {})
        )


def text_of(result: ToolResult) -> str:
    return "".join(getattr(b, "text", "") for b in result.content)


@pytest.fixture
async def make_rig(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    made: list[McpServers] = []

    async def make(servers: dict[str, McpServerSettings], **kw: Any) -> Rig:
        mcp = McpServers(McpSettings(servers=servers), **kw)
        made.append(mcp)
        workspace = Workspace(tmp_path, "acct1", new_session_id())
        workspace.ensure()
        rig = Rig(mcp, MemoryArtifactSink(), workspace, [])
        await rig.offer()
        return rig

    yield make
    for mcp in made:
        await mcp.close()
