"""Task tools against the real task-wal service: the task_wal tests' fixtures, plus executors."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from agent_core.bus import BusNames
from agent_core.service import ServiceContext
from agent_core.tasks.client import TaskClient
from agent_core.tasks.tools import task_tools
from agent_core.tools import (
    MemoryArtifactSink,
    PermissionGate,
    PermissionRules,
    ToolExecutor,
    ToolRegistry,
    Workspace,
)
from tests.integration.task_wal import conftest as task_wal_fixtures
from tests.integration.task_wal.conftest import scope_of, task_settings

# The task_wal tests' fixtures, reused as they are (pytest finds them by these names).
client = task_wal_fixtures.client
project = task_wal_fixtures.project
session_id = task_wal_fixtures.session_id
task_wal = task_wal_fixtures.task_wal

MakeExecutor = Callable[..., ToolExecutor]


@pytest.fixture
def make_executor(
    client: TaskClient, project: Path, session_id: str, tmp_path: Path
) -> MakeExecutor:
    """``make_executor(agent_id=..., via=client)``: the task tools of one run, as the worker builds them."""

    def build(*, agent_id: str = "agent_alice", via: TaskClient | None = None) -> ToolExecutor:
        workspace = Workspace(tmp_path / "home", "acct_1", session_id)
        return ToolExecutor(
            ToolRegistry(task_tools(via or client, scope=scope_of(project))),
            workspace=workspace,
            run_id="run_1",
            agent_id=agent_id,
            permissions=PermissionGate(PermissionRules()),
            artifacts=MemoryArtifactSink(),
        )

    return build


@pytest.fixture
async def impatient_client(
    redis_url: str, names: BusNames, tmp_path: Path
) -> AsyncIterator[TaskClient]:
    """A client that gives up after one short wait (for the no-answer case)."""
    ctx = ServiceContext(task_settings(redis_url, names, tmp_path / "home"), "tester", "1")
    await ctx.rpc.start()
    try:
        yield TaskClient(ctx.rpc, ctx.names, timeout_s=0.3, attempts=1)
    finally:
        await ctx.rpc.stop()
        await ctx.bus.aclose()
