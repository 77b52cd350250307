"""A run-worker inside the test process (real Valkey, real storage-writer subprocess), so that a
test can reach into its steps: wrap them, make them raise, count what they did."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from pathlib import Path

from agent_core.bus import BusNames
from agent_core.config import load_settings
from agent_core.provider import ProviderRegistry
from agent_core.provider.base import ProviderAdapter
from agent_core.runqueue import SessionQueue
from agent_core.service import ServiceContext
from agent_core.storage_client import StorageClient
from agent_core.tools import Tool, ToolRegistry, builtin_tools
from services.run_worker.executor import RunExecutor
from services.run_worker.worker import RunWorker

CONFIG = """
[memory]
enabled = false

[run_worker]
lease_ttl_ms = 1000
{extra}
"""


@dataclass
class InProcessWorker:
    """One run-worker's executor and lane loop, with its sweeper and cancel listener running."""

    ctx: ServiceContext
    executor: RunExecutor
    worker: RunWorker
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def close(self) -> None:
        self.stop.set()
        await self.worker.shutdown(timeout_s=5)
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.ctx.rpc.stop()
        await self.ctx.bus.aclose()


async def start_worker(
    redis_url: str,
    names: BusNames,
    home: Path,
    model: ProviderAdapter,
    *,
    tools: list[Tool] | None = None,  # type: ignore[type-arg]
    extra_config: str = "",
    debug: bool = False,
) -> InProcessWorker:
    """A worker whose model is ``model`` (provider key ``test``) on the test's bus names."""
    (home / "config.toml").write_text(CONFIG.format(extra=extra_config))
    settings = load_settings(
        env={
            "SOONG_AGENT_HOME": str(home),
            "SOONG_REDIS_URL": redis_url,
            "SOONG_NAMESPACE": names.namespace,
            "SOONG_MODEL_PROVIDER": "test",
            "SOONG_MODEL_NAME": "test-model",
            "SOONG_DEBUG": "true" if debug else "false",
        }
    )
    ctx = ServiceContext(settings, "run_worker", "inproc")
    await ctx.rpc.start()
    providers = ProviderRegistry({"test": lambda _: model})
    registry = ToolRegistry([*builtin_tools(), *(tools or [])])
    storage = StorageClient(ctx.rpc, ctx.names, timeout_s=5.0)
    queue = SessionQueue(ctx.bus, ctx.names)
    executor = RunExecutor(ctx, storage, queue, providers, registry)
    worker = RunWorker(ctx, queue, executor)
    running = InProcessWorker(ctx, executor, worker)
    running.tasks = [
        asyncio.create_task(worker.sweep(running.stop)),
        asyncio.create_task(_quietly(worker.listen_for_cancels(running.stop))),
    ]
    return running


async def _quietly(work: object) -> None:
    with contextlib.suppress(asyncio.CancelledError):
        await work  # type: ignore[misc]
