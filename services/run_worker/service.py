"""run-worker: drains session FIFOs and runs agent loops (any number of instances)."""

from __future__ import annotations

import asyncio

from agent_core.bus import GROUP_RUN_WORKERS
from agent_core.bus.contracts.runs import RUNS_MESSAGE
from agent_core.errors import ConfigError
from agent_core.files import open_file_store
from agent_core.plugins import install_plugins, load_plugins
from agent_core.provider import DEMO_PROVIDER, ProviderRegistry
from agent_core.runqueue import SessionQueue
from agent_core.runtime import LookupTool
from agent_core.runtime.demo import DemoModel, PublishTool
from agent_core.service import ServiceContext, ServiceParts
from agent_core.storage_client import StorageClient
from agent_core.tools import ToolRegistry, builtin_tools
from agent_core.tools.sandbox.setup import CodeSandbox, prepare_sandbox
from services.run_worker.executor import RunExecutor
from services.run_worker.reconcile import Reconciler
from services.run_worker.worker import RunWorker

__all__ = ["build"]


def _add_command_tools(ctx: ServiceContext, sandbox: CodeSandbox, tools: ToolRegistry) -> None:
    """The operator's ``[tools.<name>]``, run through the code sandbox (none without one); a
    name a built-in tool has is a configuration error that stops the worker at start-up."""
    declared = ctx.settings.tools
    if not declared:
        return
    if sandbox.runner is None:
        ctx.log.warning(
            "command tools %s are not offered: they run in the code sandbox, which is not "
            "available on this worker (see the sandbox's start-up message)",
            ", ".join(sorted(declared)),
        )
        return
    from agent_core.tools.command import command_tools

    for tool in command_tools(declared, sandbox.runner, sandbox.limits):
        if tools.get(tool.name) is not None:
            raise ConfigError(
                "duplicate_tool",
                f"tools.{tool.name}: a built-in tool has this name; choose another",
                details={"key": f"tools.{tool.name}"},
            )
        tools.register(tool)


async def build(ctx: ServiceContext) -> ServiceParts:
    """Wire the runs consumer, the sweeper and the cancel listener to one :class:`RunWorker`,
    and the reconciler of stranded runs beside them."""
    providers = ProviderRegistry()
    # Code tools only where the sandbox works (or the operator turned it off, loudly).
    sandbox = await prepare_sandbox(ctx.settings)
    tools = ToolRegistry(
        builtin_tools(sandbox.runner, limits=sandbox.limits, run_command=sandbox.run_command)
    )
    if ctx.settings.model.provider == DEMO_PROVIDER:
        # Demo / benchmark mode (`soong-agent up --fake-provider`): a scripted in-process model.
        providers.register_provider(DEMO_PROVIDER, lambda _: DemoModel())
        tools.register(LookupTool())
        tools.register(PublishTool())  # the demo's tool that asks a person first
    _add_command_tools(ctx, sandbox, tools)
    # Plug-ins after the built-ins, so a built-in always keeps its name; a bad one is logged by
    # name and skipped.
    install_plugins(load_plugins(ctx.settings), providers, tools)
    # No retry budget: a run acknowledged to its client waits out an outage of the writer (its
    # commands are idempotent, so repeats are harmless) and is carried out once the writer is back.
    storage = StorageClient(
        ctx.rpc, ctx.names, timeout_s=ctx.settings.bus.request_timeout_s, attempts=None
    )
    queue = SessionQueue(ctx.bus, ctx.names)
    mcp = None
    if any(s.enabled for s in ctx.settings.mcp.servers.values()):
        # MCP servers: owned by this process, started on first use, stopped with it.
        from agent_core.mcp.tools import McpServers

        mcp = McpServers(ctx.settings.mcp)
    # A missing bucket, refused credentials or an unreachable store: a ConfigError at start-up.
    files = await open_file_store(ctx.settings)
    executor = RunExecutor(ctx, storage, queue, providers, tools, mcp, files=files)
    worker = RunWorker(ctx, queue, executor)
    reconciler = Reconciler(
        storage,
        queue,
        ctx.names,
        idle_s=ctx.settings.run_worker.stranded_after_s,
        interval_s=ctx.settings.run_worker.reconcile_interval_s,
    )
    nudges = ctx.consumer(
        ctx.names.runs,
        GROUP_RUN_WORKERS,
        RUNS_MESSAGE,
        handler=worker.on_nudge,
        # Handling a nudge only takes a lease; the run itself is tracked by the FIFO.
        options=ctx.default_options(max_records=16, min_idle_ms=10_000),
    )

    async def prepare() -> None:
        # The default model's adapter, built now: a provider that is unknown or cannot be built
        # stops the worker at start-up with the configuration error (it never takes a run).
        await asyncio.to_thread(executor.setup.prepare)

    return ServiceParts(
        consumers=[nudges],
        tasks=[worker.sweep, worker.listen_for_cancels, reconciler.run],
        on_start=[prepare],
        on_stop=[
            worker.shutdown,
            *([mcp.close] if mcp else []),
            *([sandbox.runner.close] if sandbox.runner else []),
        ],
    )
