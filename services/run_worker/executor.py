"""Executing one queued run: claim (fenced), recover or start, loop, and record how it ended."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from agent_core.errors import AgentCoreError, ErrorPayload, StorageError
from agent_core.ids import new_id
from agent_core.observability.runs import run_ended, run_started
from agent_core.observability.tracing import tracer
from agent_core.provider import ProviderRegistry
from agent_core.runqueue import (
    InFlight,
    SessionQueue,
    cancel_queued_run,
)
from agent_core.runtime import AgentLoop, RunOutcome, resume_point
from agent_core.service import ServiceContext
from agent_core.storage_client import StorageClient
from agent_core.tasks.client import TaskClient
from agent_core.tools import PermissionGate, ToolExecutor, ToolRegistry, Workspace
from agent_core.types.enums import AgentType, EndReason, Role, RunStatus
from agent_core.types.protocol import TextBlock
from agent_core.types.runtime import (
    AgentConfig,
    Node,
    RunNodeCreated,
)
from services.run_worker.adapters import (
    BusRunStore,
    RedisPermissionBroker,
    StorageArtifactSink,
    WorkerToolRunner,
)
from services.run_worker.agent_setup import AgentSetup
from services.run_worker.child_endings import end_orphans
from services.run_worker.child_tools import child_tools, orchestrator_config
from services.run_worker.children import ChildRunner
from services.run_worker.claim import (
    Attempt,
    Claimer,
    message_node,
    placed_path,
)
from services.run_worker.endings import (
    FENCED_CODES,
    close_stream_of_terminal_run,
    loop_cancelled,
    loop_failed,
    record_end,
    run_finished,
)
from services.run_worker.memory_link import hand_off, memory_node
from services.run_worker.reads import RunReads

__all__ = ["RunExecutor"]

log = logging.getLogger("soong.run_worker")


class _Fenced(Exception):
    """Our attempt was superseded: stop writing, finalize nothing."""


class RunExecutor:
    """Runs queued runs for one worker process."""

    def __init__(
        self,
        ctx: ServiceContext,
        storage: StorageClient,
        queue: SessionQueue,
        providers: ProviderRegistry,
        tools: ToolRegistry,
    ) -> None:
        self.ctx = ctx
        self.storage = storage
        self.queue = queue
        self.reads = RunReads(storage)
        self.claimer = Claimer(ctx, storage, queue, self.reads)
        task_client = TaskClient(ctx.rpc, ctx.names, timeout_s=ctx.settings.bus.request_timeout_s)
        self.setup = AgentSetup(ctx.settings, providers, tools, task_client)
        self.running: dict[str, asyncio.Task[RunOutcome]] = {}

    def cancel(self, run_id: str) -> bool:
        """Cancel a run this process is executing; ``False`` if it is not here."""
        task = self.running.get(run_id)
        if task is None:
            return False
        task.cancel()
        return True

    async def execute(self, item: InFlight) -> bool:
        """Execute (or recover) ``item``; return ``False`` if a newer attempt superseded ours.

        ``True`` means the run is terminal in storage (by us, or it already was).
        """
        run = item.run
        cancelled, number = await self.queue.claim_prelude(run.run_id)
        if cancelled:
            if number > 1:  # it ran before: children it started there ran in that worker
                await end_orphans(self.storage, self.queue, self.reads, run.session_id, run.run_id)
            # Cancelled while queued: recorded without claiming, never executed.
            if not await cancel_queued_run(
                self.storage,
                self.queue,
                session_id=run.session_id,
                run_id=run.run_id,
                agent_id=run.agent_id,
            ):
                await close_stream_of_terminal_run(self.ctx, self.reads, run.session_id, run.run_id)
            return True
        with tracer().start_as_current_span("run.claim", attributes={"run.attempt": number}):
            attempt = await self.claimer.claim(item, number)
        if not isinstance(attempt, Attempt):
            return attempt
        run_started(attempt.handle, kind=run.kind)
        try:
            outcome = await self._run(attempt)
            await self._finish(attempt, outcome)
        except _Fenced:
            log.warning(
                "run %s attempt %d was superseded; stopping", run.run_id, attempt.handle.attempt
            )
            await attempt.events.abort()
            return False
        return True

    async def _run(self, a: Attempt) -> RunOutcome:
        """Decide where the run starts (or whether it already ended), then drive the loop."""
        run, prefetch = a.item.run, a.prefetch
        if a.handle.attempt > 1:
            # Child runs in flight ran in the process that is gone (or stopped): end them first.
            await self._fenced(
                end_orphans(
                    self.storage,
                    self.queue,
                    self.reads,
                    run.session_id,
                    run.run_id,
                    events=a.events,
                    parent=a.store,
                )
            )
        if prefetch.cancelled:  # cancelled while queued: never executed
            if prefetch.placed is not None:  # (a cancel that came while it was being claimed)
                self._announce(a, prefetch.placed)
            return RunOutcome(RunStatus.CANCELLED, EndReason.COMPLETED)
        try:
            config = self.setup.config(run.config_overrides)
        except Exception as exc:
            return _failed("invalid_config", f"agent configuration is invalid: {exc}")
        path = prefetch.path
        if path is None and run.parent_node_id and not prefetch.above:
            return _failed("invalid_parent", "the message's parent node is not in this session")
        if path is None:  # the message becomes a node now, after whatever ran before it
            path = await self._place_message(a)
        turns_done = 0
        if a.handle.attempt > 1:
            last = await self.reads.last_node_of(run.session_id, run.run_id)
            if last is not None:
                path = await self.reads.path(run.session_id, last)
            point = resume_point(path, run.run_id)
            if point.action == "complete":
                return RunOutcome(
                    RunStatus.COMPLETED,
                    EndReason.COMPLETED,
                    turns=point.turns_done,
                    last_node_id=path[-1].node_id,
                    final_text=point.final_text,
                )
            if point.action == "unsafe":
                return _failed(
                    "worker_lost",
                    "the worker running this run was lost while tools were running; "
                    "their results are unknown, so the run was not resumed",
                    last_node_id=path[-1].node_id,
                )
            turns_done = point.turns_done
        elif run.kind == "main":
            memory = memory_node(prefetch.memory, a.handle, path[-1])
            if memory is not None:
                path.append(await self._append(a, memory))
        return await self._drive(a, config, path, turns_done)

    async def _drive(
        self, a: Attempt, config: AgentConfig, path: list[Node], turns_done: int
    ) -> RunOutcome:
        """Run the loop as a task that a cancel request can stop; translate how it ended."""
        run = a.item.run
        loop = self._loop(a, config)
        task = asyncio.create_task(loop.run(path, turns_done=turns_done), name=f"run:{run.run_id}")
        self.running[run.run_id] = task
        try:
            return await asyncio.wait_for(task, timeout=config.budget.max_wall_clock_s)
        except TimeoutError:
            return _failed(
                "budget_exceeded",
                "the run exceeded its wall_clock budget",
                details={"limit": "wall_clock"},
                last_node_id=loop.last_node_id,
            )
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # this worker is shutting down: the run stays in flight for a takeover
            return await self._cancelled(a, loop)
        except StorageError as exc:
            if exc.code in FENCED_CODES:
                raise _Fenced from exc
            return _failed(exc.code, exc.message, last_node_id=loop.last_node_id)
        except AgentCoreError as exc:
            return loop_failed(loop, exc.to_payload())
        finally:
            self.running.pop(run.run_id, None)
            a.nodes[:] = loop.nodes

    def _loop(self, a: Attempt, config: AgentConfig) -> AgentLoop:
        """The attempt's loop: its model, its workspace's tools, and the child runs it may start
        (an orchestrator's loop: the orchestration prompt and tools; its children do the work)."""
        run = a.item.run
        orchestrator = run.agent_type == AgentType.ORCHESTRATOR.value
        workspace = Workspace(
            self.ctx.settings.home,
            run.account_id,
            run.session_id,
            allow_platform_work=config.allow_platform_writes,
        )
        # Inline: three mkdir calls on a local disk (tens of µs) cost less than a thread hop.
        workspace.ensure()
        model = self.setup.adapter(config)
        children = ChildRunner(
            self.storage,
            self.queue,
            self.reads,
            a.store,
            a.events,
            config,
            model,
            tools=lambda store: self._tools(a, config, workspace, store, None),
            running=self.running,
        )
        return AgentLoop(
            handle=a.handle,
            config=orchestrator_config(config) if orchestrator else config,
            model=model,
            store=a.store,
            events=a.events,
            tools=self._tools(a, config, workspace, a.store, children, orchestrator=orchestrator),
        )

    def _tools(
        self,
        a: Attempt,
        config: AgentConfig,
        workspace: Workspace,
        store: BusRunStore,
        children: ChildRunner | None,
        *,
        orchestrator: bool = False,
    ) -> WorkerToolRunner:
        """The tools of the run that writes through ``store`` (the attempt's, or a child's):
        with ``children``, also the tools that start child runs (children start none)."""
        handle = store.handle
        broker = RedisPermissionBroker(self.ctx.redis, self.ctx.names, a.events, store)
        starters = child_tools(children) if children else ()
        definitions = self.setup.definitions(
            config.enabled_tools, children=children is not None, orchestrator=orchestrator
        )
        executor = ToolExecutor(
            self.setup.registry(
                self.setup.project(a.prefetch.cwd, workspace), starters, orchestrator=orchestrator
            ),
            workspace=workspace,
            run_id=handle.run_id,
            agent_id=handle.agent_id,
            permissions=PermissionGate(self.setup.rules(config), broker),
            artifacts=StorageArtifactSink(self.storage, handle, workspace),
            # Exactly what the model was offered: a tool it names but was not given is refused.
            enabled=frozenset(d.name for d in definitions),
        )
        return WorkerToolRunner(executor, definitions)

    async def _cancelled(self, a: Attempt, loop: AgentLoop) -> RunOutcome:
        """A cancel request stopped the loop: keep what was streamed, end ``aborted_*``."""
        if loop.phase == "streaming" and loop.partial_text:
            partial = Node(
                node_id=new_id("node"),
                parent_id=loop.last_node_id,
                agent_id=a.handle.agent_id,
                run_id=a.handle.run_id,
                role=Role.ASSISTANT,
                content=[TextBlock(text=loop.partial_text)],
                metadata={"interrupted": True},
            )
            await self._fenced(a.store.append_node(partial))
        return loop_cancelled(loop)

    async def _finish(self, a: Attempt, outcome: RunOutcome) -> None:
        """Record the outcome (run row + final timeline event), end the stream, hand off."""
        handle = a.handle
        if not outcome.recorded:  # else the answer's node recorded the end with it
            outcome = await self._fenced(record_end(self.storage, self.reads, a.store, outcome))
        run_ended(handle, outcome)
        a.events.emit(run_finished(handle, outcome))
        await a.events.close()
        if self.ctx.settings.memory.enabled and a.item.run.kind == "main":
            await hand_off(self.ctx, self.reads, a.item, outcome, a.nodes)

    async def _place_message(self, a: Attempt) -> list[Node]:
        """The user's message becomes the run's start node, under the place read at claim
        (placed by the claim itself on a first attempt: then only its path is put together)."""
        run = a.item.run
        above, placed = a.prefetch.above, a.prefetch.placed
        if placed is not None:
            self._announce(a, placed)
            path = placed_path(above, placed)
            if path is None:  # the active node moved between the read and the claim
                path = await self.reads.path(run.session_id, placed.node_id)
            return path
        node = message_node(run, above[-1].node_id if above else None)
        return [*above, await self._append(a, node)]

    async def _append(self, a: Attempt, node: Node) -> Node:
        stored: Node = await self._fenced(a.store.append_node(node))
        self._announce(a, stored)
        return stored

    @staticmethod
    def _announce(a: Attempt, node: Node) -> None:
        a.events.emit(
            RunNodeCreated(
                run_id=a.handle.run_id,
                session_id=a.handle.session_id,
                agent_id=a.handle.agent_id,
                node=node,
            )
        )

    @staticmethod
    async def _fenced(awaitable: Any) -> Any:
        try:
            return await awaitable
        except StorageError as exc:
            if exc.code in FENCED_CODES:
                raise _Fenced from exc
            raise


def _failed(
    code: str,
    message: str,
    *,
    details: dict[str, Any] | None = None,
    last_node_id: str | None = None,
) -> RunOutcome:
    error = ErrorPayload(type="run_error", code=code, message=message, details=details or {})
    return RunOutcome(RunStatus.FAILED, EndReason.FAILED, error=error, last_node_id=last_node_id)
