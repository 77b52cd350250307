"""task-wal in-process against the private Valkey, and a client under the test's bus names."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest

from agent_core.bus import BusNames
from agent_core.bus.contracts.tasks import TaskScope
from agent_core.config import Settings, load_settings
from agent_core.ids import new_session_id
from agent_core.service import ServiceContext, run_service
from agent_core.tasks.client import TaskClient
from services.task_wal.service import build

RunningService = Callable[..., AbstractAsyncContextManager[None]]


def scope_of(project: Path) -> TaskScope:
    """The logical scope of a project folder made by the test: a folder of the test's project
    root ``tests`` (``task_settings`` makes the test's temporary folder that root)."""
    return TaskScope(account_id="tests", project=f"tests/{project.name}")


def task_settings(redis_url: str, names: BusNames, home: Path, *, fsync: bool = True) -> Settings:
    """Settings of one test: its namespace, its home, fsync as asked; the test's folder is a
    project root (task-wal keeps lists only in folders the server owns)."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f'[projects]\nroots = {{ tests = "{home.parent}" }}\n')
    settings = load_settings(
        env={
            "SOONG_AGENT_HOME": str(home),
            "SOONG_REDIS_URL": redis_url,
            "SOONG_NAMESPACE": names.namespace,
        }
    )
    return settings.model_copy(update={"tasks": settings.tasks.model_copy(update={"fsync": fsync})})


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The session's cwd (a project directory)."""
    path = tmp_path / "project"
    path.mkdir()
    return path


@pytest.fixture
def session_id() -> str:
    """A fresh session id."""
    return new_session_id()


@pytest.fixture
def task_wal(redis_url: str, names: BusNames, tmp_path: Path) -> RunningService:
    """``async with task_wal(fsync=...)``: the service running in-process until the block ends."""

    @contextlib.asynccontextmanager
    async def running(*, fsync: bool = True) -> AsyncIterator[None]:
        settings = task_settings(redis_url, names, tmp_path / "home", fsync=fsync)
        stop = asyncio.Event()
        task = asyncio.create_task(
            run_service(build, settings, "task_wal", "0", stop=stop, configure_logging=False)
        )
        try:
            yield
        finally:
            stop.set()
            async with asyncio.timeout(30):
                assert await task == 0

    return running


@pytest.fixture
async def client(redis_url: str, names: BusNames, tmp_path: Path) -> AsyncIterator[TaskClient]:
    """A task client with its own reply channel."""
    ctx = ServiceContext(task_settings(redis_url, names, tmp_path / "home"), "tester", "0")
    await ctx.rpc.start()
    try:
        yield TaskClient(ctx.rpc, ctx.names, timeout_s=10)
    finally:
        await ctx.rpc.stop()
        await ctx.bus.aclose()
