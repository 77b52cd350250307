"""Executing one queued run: claim (fenced), recover or start, loop, and record how it ended."""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from typing import Any

from agent_core.bus.contracts.memory import Interaction, InteractionTurn, MemoryReply, RenderMemory
from agent_core.bus.contracts.storage import (
    ClaimRun,
    GetActivePath,
    GetRun,
    GetSession,
    GetTree,
    RunFence,
    UpdateRun,
)
from agent_core.bus.publish import publish
from agent_core.config import Settings
from agent_core.errors import AgentCoreError, ErrorPayload, StorageError, redact, redact_obj
from agent_core.ids import new_id
from agent_core.provider import ProviderRegistry, ProviderSettings
from agent_core.provider.base import ProviderAdapter
from agent_core.runqueue import (
    InFlight,
    QueuedRun,
    RunEventWriter,
    SessionQueue,
    cancel_queued_run,
)
from agent_core.runtime import AgentLoop, RunOutcome, resume_point
from agent_core.service import ServiceContext
from agent_core.storage_client import StorageClient
from agent_core.tasks.client import TaskClient
from agent_core.tasks.tools import task_tools
from agent_core.tools import (
    PermissionGate,
    PermissionRules,
    ToolExecutor,
    ToolRegistry,
    Workspace,
)
from agent_core.types.enums import (
    EndReason,
    EventLevel,
    EventType,
    NodeType,
    PermissionPolicy,
    Role,
    RunStatus,
)
from agent_core.types.mappers import to_node, to_run_state
from agent_core.types.protocol import TextBlock, ToolCallBlock, ToolDefinition, ToolResultBlock
from agent_core.types.runtime import (
    AgentConfig,
    Node,
    RunFinished,
    RunHandle,
    RunNodeCreated,
    RunStatusChanged,
)
from agent_core.types.storage import NodeRecord, RunRecord
from services.run_worker.adapters import (
    BusRunStore,
    RedisPermissionBroker,
    StorageArtifactSink,
    WorkerToolRunner,
)

__all__ = ["RunExecutor"]

log = logging.getLogger("soong.run_worker")

_FINAL_EVENT = {
    RunStatus.COMPLETED: EventType.RUN_COMPLETED,
    RunStatus.FAILED: EventType.RUN_FAILED,
    RunStatus.CANCELLED: EventType.RUN_CANCELLED,
    RunStatus.ABORTED: EventType.RUN_ABORTED,
}


@dataclass(frozen=True, slots=True)
class _Prefetch:
    """What the executor reads while claiming a run (one round trip for all of it)."""

    cancelled: bool
    session: dict[str, Any]
    path: list[Node] | None
    above: list[dict[str, Any]]
    memory: str


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
        self.settings: Settings = ctx.settings
        self.storage = storage
        self.queue = queue
        self.providers = providers
        self.tools = tools
        self.task_client = TaskClient(
            ctx.rpc, ctx.names, timeout_s=ctx.settings.bus.request_timeout_s
        )
        self.running: dict[str, asyncio.Task[RunOutcome]] = {}
        self._cancel_requested: set[str] = set()
        self._adapters: dict[tuple[str, str | None, str | None], ProviderAdapter] = {}
        self._tool_definitions: dict[tuple[str, ...] | None, list[ToolDefinition]] = {}

    # -- cancellation ------------------------------------------------------------------------------

    def cancel(self, run_id: str) -> bool:
        """Cancel a run this process is executing; ``False`` if it is not here."""
        task = self.running.get(run_id)
        if task is None:
            return False
        self._cancel_requested.add(run_id)
        task.cancel()
        return True

    # -- one run -------------------------------------------------------------------------------

    async def execute(self, item: InFlight) -> bool:
        """Execute (or recover) ``item``; return ``False`` if a newer attempt superseded ours.

        ``True`` means the run is terminal in storage (by us, or it already was).
        """
        run = item.run
        if await self.queue.is_cancelled(run.run_id):
            # Cancelled while queued: recorded without claiming, never executed.
            if not await cancel_queued_run(
                self.storage,
                self.queue,
                session_id=run.session_id,
                run_id=run.run_id,
                agent_id=run.agent_id,
            ):
                await self._close_stream_of_terminal_run(run.session_id, run.run_id)
            return True
        attempt = await self.queue.next_attempt(run.run_id)
        handle = RunHandle(
            run_id=run.run_id, session_id=run.session_id, agent_id=run.agent_id, attempt=attempt
        )
        fence = RunFence(run_id=run.run_id, attempt=attempt)
        # The claim and the reads it does not depend on travel together: one round trip.
        claim, cancelled, session, path, above, memory = await asyncio.gather(
            self.storage.send(
                ClaimRun(command_id=new_id("cmd"), session_id=run.session_id, fence=fence)
            ),
            self.queue.is_cancelled(run.run_id),
            self._query(GetSession(session_id=run.session_id)),
            self._path_or_none(run.session_id, run.start_node_id),
            # Where a new message would go: the explicit parent, else the active node now.
            self._query(GetActivePath(session_id=run.session_id, node_id=run.parent_node_id)),
            self._memory_text(run, attempt),
        )
        prefetch = _Prefetch(cancelled, session, path, above or [], memory)
        if not claim.ok:
            # Terminal already (cancelled while queued, finished before a crash) or superseded.
            code = claim.error.code if claim.error else "refused"
            log.info("run %s not claimable: %s", run.run_id, code)
            if code in ("stale_attempt", "unclaimed_attempt"):
                return False
            await self._close_stream_of_terminal_run(run.session_id, run.run_id)
            return True
        events = RunEventWriter(self.ctx.redis, self.ctx.names, run.session_id, run.run_id)
        events.start()
        events.emit(
            RunStatusChanged(
                run_id=run.run_id,
                session_id=run.session_id,
                agent_id=run.agent_id,
                status=RunStatus.RUNNING,
                previous=RunStatus.QUEUED if attempt == 1 else RunStatus.RUNNING,
                attempt=attempt,
            )
        )
        store = BusRunStore(self.storage, handle, set_active=run.kind == "main")
        try:
            outcome = await self._run(item, handle, store, events, prefetch)
            await self._finish(handle, store, events, outcome, item)
        except _Fenced:
            log.warning("run %s attempt %d was superseded; stopping", run.run_id, attempt)
            await events.abort()
            return False
        return True

    async def _run(
        self,
        item: InFlight,
        handle: RunHandle,
        store: BusRunStore,
        events: RunEventWriter,
        prefetch: _Prefetch,
    ) -> RunOutcome:
        run = item.run
        session, path = prefetch.session, prefetch.path
        if prefetch.cancelled:  # cancelled while queued: never executed
            return RunOutcome(RunStatus.CANCELLED, EndReason.COMPLETED)
        try:
            config = self._config(run.config_overrides)
        except Exception as exc:
            return _failed("invalid_config", f"agent configuration is invalid: {exc}")
        if path is None and run.parent_node_id and not prefetch.above:
            return _failed("invalid_parent", "the message's parent node is not in this session")
        if path is None:  # the message becomes a node now, after whatever ran before it
            path = await self._place_message(run, prefetch.above, store)
            events.emit(
                RunNodeCreated(
                    run_id=run.run_id,
                    session_id=run.session_id,
                    agent_id=run.agent_id,
                    node=path[-1],
                )
            )
        turns_done = 0
        if handle.attempt > 1:
            last = await self._last_node_of(run.session_id, run.run_id)
            if last is not None:
                path = await self._path(run.session_id, last)
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
            memory = self._memory_node(prefetch.memory, handle, path[-1])
            if memory is not None:
                path.append(await self._fenced(store.append_node(memory)))
                events.emit(
                    RunNodeCreated(
                        run_id=run.run_id,
                        session_id=run.session_id,
                        agent_id=run.agent_id,
                        node=path[-1],
                    )
                )
        model = self._adapter(config)
        workspace = Workspace(
            self.settings.home,
            str(session["account_id"]),
            run.session_id,
            allow_platform_work=config.allow_platform_writes,
        )
        await asyncio.to_thread(workspace.ensure)
        # Per run: the shared built-in tools plus task tools bound to this session's project.
        registry = ToolRegistry(
            [*self.tools, *task_tools(self.task_client, cwd=str(session["cwd"]))]
        )
        executor = ToolExecutor(
            registry,
            workspace=workspace,
            run_id=run.run_id,
            agent_id=run.agent_id,
            permissions=PermissionGate(
                _rules(config), RedisPermissionBroker(self.ctx.redis, self.ctx.names, events, store)
            ),
            artifacts=StorageArtifactSink(self.storage, handle, str(workspace.root)),
        )
        loop = AgentLoop(
            handle=handle,
            config=config,
            model=model,
            store=store,
            events=events,
            tools=WorkerToolRunner(executor, self._definitions(config.enabled_tools)),
        )
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
            reason = (
                EndReason.ABORTED_TOOLS if loop.phase == "tools" else EndReason.ABORTED_STREAMING
            )
            if loop.phase == "streaming" and loop.partial_text:
                await self._fenced(
                    store.append_node(
                        Node(
                            node_id=new_id("node"),
                            parent_id=loop.last_node_id,
                            agent_id=run.agent_id,
                            run_id=run.run_id,
                            role=Role.ASSISTANT,
                            content=[TextBlock(text=loop.partial_text)],
                            metadata={"interrupted": True},
                        )
                    )
                )
            return RunOutcome(
                RunStatus.CANCELLED,
                reason,
                usage=loop.usage,
                turns=loop.turns,
                last_node_id=loop.last_node_id,
            )
        except StorageError as exc:
            if exc.code in ("stale_attempt", "unclaimed_attempt"):
                raise _Fenced from exc
            return _failed(exc.code, exc.message, last_node_id=loop.last_node_id)
        except AgentCoreError as exc:
            return RunOutcome(
                RunStatus.FAILED,
                EndReason.FAILED,
                usage=loop.usage,
                turns=loop.turns,
                last_node_id=loop.last_node_id,
                error=exc.to_payload(),
            )
        finally:
            self.running.pop(run.run_id, None)
            self._cancel_requested.discard(run.run_id)

    async def _finish(
        self,
        handle: RunHandle,
        store: BusRunStore,
        events: RunEventWriter,
        outcome: RunOutcome,
        item: InFlight,
    ) -> None:
        # The run record and its final timeline event commit together (one batch, one fsync).
        receipt, _ = await asyncio.gather(
            self.storage.send(
                UpdateRun(
                    command_id=new_id("cmd"),
                    session_id=handle.session_id,
                    run_id=handle.run_id,
                    fence=store.fence,
                    status=outcome.status,
                    end_reason=outcome.end_reason,
                    turn_count=outcome.turns,
                    usage=outcome.usage,
                    error=outcome.error,
                    end_node_id=outcome.last_node_id,
                )
            ),
            self._fenced(
                store.append_event(
                    _FINAL_EVENT[outcome.status],
                    level=EventLevel.ERROR
                    if outcome.status is RunStatus.FAILED
                    else EventLevel.INFO,
                    node_id=outcome.last_node_id,
                    payload={
                        "status": outcome.status.value,
                        "end_reason": outcome.end_reason.value,
                        "turns": outcome.turns,
                        **({"error": outcome.error.model_dump()} if outcome.error else {}),
                    },
                )
            ),
        )
        if not receipt.ok:
            code = receipt.error.code if receipt.error else "refused"
            if code in ("stale_attempt", "unclaimed_attempt"):
                raise _Fenced
            log.error("run %s: final update refused: %s", handle.run_id, code)
        events.emit(
            RunFinished(
                run_id=handle.run_id,
                session_id=handle.session_id,
                agent_id=handle.agent_id,
                status=outcome.status,
                end_reason=outcome.end_reason,
                usage=outcome.usage,
                error=outcome.error,
                last_node_id=outcome.last_node_id,
            )
        )
        await events.close()
        if (
            self.settings.memory.enabled
            and item.run.kind == "main"
            and outcome.status is RunStatus.COMPLETED
        ):
            await self._hand_off(item, outcome)

    async def _close_stream_of_terminal_run(self, session_id: str, run_id: str) -> None:
        """A worker can die after the run's final update and before its ``run_finished`` event:
        the next holder finds the run terminal and writes the missing event from the record, so
        that every stream ends and no SSE client waits forever."""
        record = await self._query(GetRun(run_id=run_id, session_id=session_id))
        if record is None or record["status"] not in {s.value for s in _FINAL_EVENT}:
            return
        events = RunEventWriter(self.ctx.redis, self.ctx.names, session_id, run_id)
        if await events.last_type() == "run_finished":
            return
        state = to_run_state(RunRecord.model_validate(record))
        events.start()
        events.emit(
            RunFinished(
                run_id=run_id,
                session_id=session_id,
                agent_id=state.agent_id,
                status=state.status,
                end_reason=state.end_reason,
                usage=state.usage,
                error=state.error,
                last_node_id=state.last_node_id,
            )
        )
        await events.close()

    # -- helpers ---------------------------------------------------------------------------------

    async def _fenced(self, awaitable: Any) -> Any:
        try:
            return await awaitable
        except StorageError as exc:
            if exc.code in ("stale_attempt", "unclaimed_attempt"):
                raise _Fenced from exc
            raise

    async def _query(self, query: Any) -> Any:
        reply = await self.storage.query(query)
        if not reply.ok:
            err = reply.error
            raise StorageError(
                err.code if err else "query_failed", err.message if err else "query failed"
            )
        return reply.data

    async def _path(self, session_id: str, node_id: str) -> list[Node]:
        path = await self._path_or_none(session_id, node_id)
        if path is None:
            raise StorageError("not_found", "node not found", details={"node_id": node_id})
        return path

    async def _path_or_none(self, session_id: str, node_id: str) -> list[Node] | None:
        rows = await self._query(GetActivePath(session_id=session_id, node_id=node_id))
        if rows is None:  # the storage-writer answers a missing node with no data
            return None
        return [to_node(NodeRecord.model_validate(r)) for r in rows]

    async def _place_message(
        self, run: QueuedRun, above_rows: list[dict[str, Any]], store: BusRunStore
    ) -> list[Node]:
        above = [to_node(NodeRecord.model_validate(r)) for r in above_rows]
        parent = above[-1].node_id if above else None
        node = Node(
            node_id=run.start_node_id,
            parent_id=parent,
            agent_id=run.agent_id,
            run_id=run.run_id,
            role=Role.USER,
            content=run.content or [TextBlock(text="")],
        )
        return [*above, await self._fenced(store.append_node(node))]

    async def _last_node_of(self, session_id: str, run_id: str) -> str | None:
        tree = await self._query(GetTree(session_id=session_id))
        own = [n for n in tree if n.get("run_id") == run_id]
        return str(own[-1]["node_id"]) if own else None

    def _definitions(self, enabled: list[str] | None) -> list[ToolDefinition]:
        # JSON Schemas of tools are computed once per set of enabled tools, not once per run.
        key = None if enabled is None else tuple(sorted(enabled))
        cached = self._tool_definitions.get(key)
        if cached is None:
            # Definitions do not depend on the project directory: any cwd describes them.
            template = ToolRegistry([*self.tools, *task_tools(self.task_client, cwd="/")])
            cached = WorkerToolRunner.definitions_for(template, enabled)
            self._tool_definitions[key] = cached
        return cached

    def _config(self, overrides: dict[str, Any]) -> AgentConfig:
        m = self.settings.model
        base: dict[str, Any] = {
            "provider": m.provider,
            "model": m.name,
            "base_url": m.base_url,
            "api_key_env": m.api_key_env,
            "max_output_tokens": m.max_output_tokens,
            "tool_policy": {"default": PermissionPolicy.ALLOW.value},
        }
        return AgentConfig.model_validate({**base, **overrides})

    def _adapter(self, config: AgentConfig) -> ProviderAdapter:
        key = (config.provider, config.base_url, config.api_key_env)
        adapter = self._adapters.get(key)
        if adapter is None:
            api_key = os.environ.get(config.api_key_env) if config.api_key_env else None
            adapter = self.providers.create(
                ProviderSettings(
                    provider=config.provider,
                    base_url=config.base_url,
                    api_key=api_key,
                    timeout_s=self.settings.model.timeout_s,
                    provider_options=config.provider_options,
                )
            )
            self._adapters[key] = adapter
        return adapter

    async def _memory_text(self, run: QueuedRun, attempt: int) -> str:
        """The rendered memory for a main run's first attempt ('' when none or unavailable)."""
        if not self.settings.memory.enabled or run.kind != "main" or attempt != 1:
            return ""
        skills = run.config_overrides.get("enabled_skills") or []
        try:
            reply = await self.ctx.rpc.request(
                RenderMemory(account_id=run.account_id, skills=list(skills)),
                stream=self.ctx.names.memory_queries,
                reply=MemoryReply,
                timeout_s=2.0,
            )
        except Exception as exc:  # memory is an aid: a run never waits long on it or fails for it
            log.warning("memory unavailable for %s: %s", run.account_id, type(exc).__name__)
            return ""
        return reply.data if reply.ok and isinstance(reply.data, str) else ""

    @staticmethod
    def _memory_node(text: str, handle: RunHandle, parent: Node) -> Node | None:
        if not text.strip():
            return None
        return Node(
            node_id=new_id("node"),
            parent_id=parent.node_id,
            agent_id=handle.agent_id,
            run_id=handle.run_id,
            role=Role.SYSTEM,
            node_type=NodeType.MEMORY_CONTEXT,
            content=[TextBlock(text=text)],
            metadata={"source": "memory"},
        )

    async def _hand_off(self, item: InFlight, outcome: RunOutcome) -> None:
        """Publish the interaction to memory-extraction (redacted); never fails the run."""
        try:
            path = await self._path(
                item.run.session_id, outcome.last_node_id or item.run.start_node_id
            )
            own = [n for n in path if n.run_id == item.run.run_id]
            calls = {b.id: b for n in own for b in n.content if isinstance(b, ToolCallBlock)}
            turns = [t for n in own for t in _turns(n, calls)]
            skills = item.run.config_overrides.get("enabled_skills") or []
            message = Interaction(
                interaction_id=new_id("evt"),
                account_id=item.run.account_id,
                session_id=item.run.session_id,
                run_id=item.run.run_id,
                turns=turns,
                skills=[str(s) for s in skills],
            )
            await publish(self.ctx.redis, self.ctx.names.memory_interactions, message)
        except Exception as exc:
            log.warning("memory hand-off of %s failed: %s", item.run.run_id, redact(str(exc)))


def _turns(node: Node, calls: dict[str, ToolCallBlock]) -> list[InteractionTurn]:
    """The memory view of one node: plain text, tool results with the call that made them."""
    if node.role is Role.USER or node.role is Role.ASSISTANT:
        text = "".join(b.text for b in node.content if isinstance(b, TextBlock))
        return [InteractionTurn(role=node.role.value, content=redact(text))] if text else []
    if node.role is Role.TOOL:
        return [
            InteractionTurn(
                role="tool",
                content=redact(
                    "".join(c.text for c in b.content if isinstance(c, TextBlock))[:2000]
                ),
                is_error=b.is_error,
                tool_name=calls[b.tool_call_id].name if b.tool_call_id in calls else None,
                arguments=redact_obj(calls[b.tool_call_id].arguments)
                if b.tool_call_id in calls
                else None,
            )
            for b in node.content
            if isinstance(b, ToolResultBlock)
        ]
    return []


def _rules(config: AgentConfig) -> PermissionRules:
    policy = config.tool_policy
    per_tool: dict[str, PermissionPolicy] = {}
    for name in policy.allow:
        per_tool[name] = PermissionPolicy.ALLOW
    for name in policy.ask:
        per_tool[name] = PermissionPolicy.ASK
    for name in policy.deny:
        per_tool[name] = PermissionPolicy.DENY
    return PermissionRules(default=policy.default, per_tool=per_tool)


def _failed(
    code: str,
    message: str,
    *,
    details: dict[str, Any] | None = None,
    last_node_id: str | None = None,
) -> RunOutcome:
    error = ErrorPayload(type="run_error", code=code, message=message, details=details or {})
    return RunOutcome(RunStatus.FAILED, EndReason.FAILED, error=error, last_node_id=last_node_id)
