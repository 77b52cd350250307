"""Child agents: a run hands a task to a worker sub-agent (``dispatch_worker``) and gets its answer.

A worker is an agent of type ``sub`` (purpose ``worker``, seed 000) named by the dispatching run
and owned by its agent; each dispatch is a child run of that worker in the same session. Its nodes
carry the worker's agent id and never move the session's active node, so they form the worker's own
context tree: dispatching to the same worker again continues after its answer that ended last
(kept in the worker's metadata as ``last_answer_node_id``), ``new_branch`` starts a new branch at
the root of its tree (seed 000: a worker run reads only the path of its dispatch branch).

A child run executes inside the dispatching tool call, on the parent's worker process and
concurrently with the parent's other tool calls (ARCHITECTURE §5: child runs may run concurrently,
main runs may not). Its writes are fenced by its own attempt; its runtime events go to the parent
run's stream (one ordered stream covers a run and the child runs it started; a child's end is a
``run_status_changed`` there, ``run_finished`` stays the parent's) and to its own stream (which
ends with its ``run_finished``), its start and end to the parent's timeline
(``child_run_started`` / ``child_run_finished``).

Every child run ends, and its end is recorded before the dispatching tool call returns or
raises: with its answer (recorded with the answer node); ``failed``; ``cancelled`` with
``aborted_*`` when it is cancelled alone (the parent gets an error result and goes on), when its
parent is cancelled or its dispatch times out, or when its worker process shuts down; ``failed`` /
``child_interrupted`` when its dispatch is interrupted otherwise (a write that failed). A parent
taken over after its worker died ends the child runs that were in flight there ``failed`` /
``worker_lost`` (:func:`end_orphans`), claiming each first so that a worker that was only stopped
cannot write for it again. A child gets no tool that starts children, so child runs do not nest.

Children run with their parent's configuration (model, budgets, tool policy, enabled tools and
system prompt), without the tools that start children.

A session in orchestrator mode (seed 000: its root agent is of type ``orchestrator``) works
through children: its root agent's runs get the orchestration prompt (:data:`ORCHESTRATOR_PROMPT`)
and only the tools that start children and the task tools; its workers get the session's tools.

``fork_agent`` starts the other kind of child (seed 000's ``fork``): a one-off agent whose context
is the parent's conversation up to the turn that forks, branching off the parent's tree there
(``agents.fork_from_node_id``); it runs, ends and answers exactly like a worker's run.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from agent_core.bus.contracts.storage import (
    ClaimRun,
    CreateAgent,
    CreateRun,
    ListAgents,
    ListRuns,
    RunFence,
    UpdateAgent,
)
from agent_core.errors import AgentCoreError, ErrorPayload, StorageError, ToolError
from agent_core.ids import new_id
from agent_core.provider.base import ProviderAdapter
from agent_core.runqueue import RunEventWriter, SessionQueue
from agent_core.runtime import AgentLoop, RunOutcome
from agent_core.runtime.ports import ToolRunner
from agent_core.storage_client import StorageClient, raise_for_receipt
from agent_core.tools import Tool, ToolArgs, ToolContext, ToolOutput
from agent_core.types.enums import (
    AgentStatus,
    AgentType,
    EndReason,
    EventLevel,
    EventType,
    NodeType,
    Role,
    RunStatus,
)
from agent_core.types.protocol import TextBlock
from agent_core.types.runtime import (
    AgentConfig,
    ChildAgentResult,
    Node,
    RunFinished,
    RunHandle,
    RunNodeCreated,
    RunStatusChanged,
    RuntimeEvent,
)
from services.run_worker.adapters import BusRunStore
from services.run_worker.endings import FENCED_CODES, record_end
from services.run_worker.reads import RunReads

log = logging.getLogger("soong.run_worker")

__all__ = [
    "DISPATCH_TOOL",
    "FORK_TOOL",
    "ChildRunner",
    "DispatchArgs",
    "DispatchWorker",
    "ForkAgent",
    "ForkArgs",
    "ORCHESTRATOR_PROMPT",
    "child_tools",
    "end_child",
    "end_orphans",
    "orchestrator_config",
]

DISPATCH_TOOL = "dispatch_worker"
FORK_TOOL = "fork_agent"
# Where a worker's next dispatch continues: the node of its answer that ended last.
_CONTINUE_FROM = "last_answer_node_id"
_ACTIVE = (RunStatus.QUEUED.value, RunStatus.PENDING.value, RunStatus.RUNNING.value)
_AGENT_STATUS = {
    RunStatus.COMPLETED: AgentStatus.COMPLETED,
    RunStatus.FAILED: AgentStatus.FAILED,
    RunStatus.ABORTED: AgentStatus.FAILED,
    RunStatus.CANCELLED: AgentStatus.CANCELLED,
}


class DispatchArgs(ToolArgs):
    """What the model gives ``dispatch_worker``."""

    worker: str = Field(
        pattern=r"^[A-Za-z0-9_-]{1,64}$",
        description="The worker's name. Dispatching to the same name again continues that "
        "worker's context (it remembers its earlier tasks and answers).",
    )
    task: str = Field(
        min_length=1,
        max_length=100_000,
        description="The task, with everything the worker needs: it does not see this "
        "conversation.",
    )
    new_branch: bool = Field(
        default=False,
        description="Start the worker on a fresh branch of its context instead of after its "
        "last answer.",
    )


class DispatchWorker(Tool[DispatchArgs]):
    """``dispatch_worker``: run a task on a worker sub-agent and return its final answer."""

    name = DISPATCH_TOOL
    description = (
        "Hand a self-contained task to a worker sub-agent and wait for its final answer. The "
        "worker has the same tools as you except this one and fork_agent. Tasks dispatched in "
        "the same turn run concurrently."
    )
    input_model = DispatchArgs
    # A child run is bounded by its own budgets (turns, tokens, wall clock); this only caps a
    # dispatch whose config sets none.
    timeout_s = 3600.0

    def __init__(self, children: ChildRunner | None = None) -> None:
        self._children = children

    async def run(self, args: DispatchArgs, ctx: ToolContext) -> ToolOutput:
        if self._children is None:
            raise ToolError("dispatch_unavailable", "worker sub-agents are not available here")
        return await self._children.dispatch(args, ctx)


class ForkArgs(ToolArgs):
    """What the model gives ``fork_agent``."""

    task: str = Field(
        min_length=1,
        max_length=100_000,
        description="What the fork should do; it knows this conversation up to now.",
    )


class ForkAgent(Tool[ForkArgs]):
    """``fork_agent``: run a task on a copy of the agent that knows the conversation so far."""

    name = FORK_TOOL
    description = (
        "Hand a task to a fork of yourself: it knows this conversation up to now (not this "
        "turn), works on its own branch with the same tools as you except this one and "
        "dispatch_worker, and returns its final answer — so its exploring stays out of your "
        "context. Forks started in the same turn run concurrently."
    )
    input_model = ForkArgs
    timeout_s = DispatchWorker.timeout_s

    def __init__(self, children: ChildRunner | None = None) -> None:
        self._children = children

    async def run(self, args: ForkArgs, ctx: ToolContext) -> ToolOutput:
        if self._children is None:
            raise ToolError("fork_unavailable", "forks are not available here")
        return await self._children.fork(args, ctx)


ORCHESTRATOR_PROMPT = (
    "You are the orchestrator of this session: you do not do the work yourself. Break the "
    "request into self-contained tasks and hand each to a worker with dispatch_worker (tasks "
    "dispatched in the same turn run concurrently; a worker you name again remembers its earlier "
    "tasks). Keep track of the work with the task tools, check what the workers return, dispatch "
    "again where something is missing, and answer the user with the combined result."
)


def orchestrator_config(config: AgentConfig) -> AgentConfig:
    """An orchestrator's config: the session's, with the orchestration prompt first (its
    workers keep the session's prompt)."""
    prompt = "\n\n".join(p for p in (ORCHESTRATOR_PROMPT, config.system_prompt) if p)
    return config.model_copy(update={"system_prompt": prompt})


def child_tools(children: ChildRunner | None) -> list[Tool[Any]]:
    """The tools that start child runs, bound to ``children`` (``None``: for definitions)."""
    return [DispatchWorker(children), ForkAgent(children)]


@dataclass
class _Child:
    """A child run from its creation on: what it takes to end it whatever happens."""

    run_id: str
    agent_id: str
    label: dict[str, Any]
    tool_call_id: str | None
    task_node_id: str  # the run's start node: its task
    store: BusRunStore | None = None  # once claimed
    own: RunEventWriter | None = None  # its own stream, once claimed
    ended: bool = False


class _Tee:
    """A child's runtime events: on its parent's stream and on its own, so that the child's
    events can be followed (and resumed) by themselves too (``GET …/runs/{child}/events``)."""

    def __init__(self, parent: RunEventWriter, own: RunEventWriter) -> None:
        self._parent = parent
        self._own = own

    def emit(self, event: RuntimeEvent) -> None:
        self._parent.emit(event)
        self._own.emit(event)


@dataclass
class ChildRunner:
    """Starts, runs and ends the child runs of one parent attempt."""

    storage: StorageClient
    queue: SessionQueue
    reads: RunReads
    parent: BusRunStore
    events: RunEventWriter  # the parent run's stream
    config: AgentConfig
    model: ProviderAdapter
    tools: Callable[[BusRunStore], ToolRunner]  # a child's tools (none that start children)
    running: dict[str, asyncio.Task[RunOutcome]]  # where a cancel request finds a run's task
    _workers: dict[str, asyncio.Lock] = field(default_factory=dict)

    async def dispatch(self, args: DispatchArgs, ctx: ToolContext) -> ToolOutput:
        """Run ``args.task`` as a child run of worker ``args.worker``; its answer as the result.

        Raises ``CancelledError`` when the parent is cancelled; every way the child run ends is
        recorded before this returns or raises (see :meth:`_spawn`).
        """
        label = {"worker": args.worker}
        # One worker of a name, even when two calls of one turn name a new one.
        async with self._workers.setdefault(args.worker, asyncio.Lock()):
            agent_id, after = await self._worker(args.worker, args.new_branch)
            child = await self._create_run(agent_id, label, ctx.tool_call_id)
        session_id = self.parent.handle.session_id

        async def above() -> list[Node]:
            return [] if after is None else await self.reads.path(session_id, after)

        return await self._spawn(child, above, args.task)

    async def fork(self, args: ForkArgs, ctx: ToolContext) -> ToolOutput:
        """Run ``args.task`` as a child run of a new fork agent whose context is the parent's
        path before the turn that asked for it (that turn's tool calls have no results yet); the
        fork's nodes branch off there. Raises as :meth:`dispatch` does."""
        if ctx.node_id is None:
            raise ToolError("fork_unavailable", "a fork needs the calling turn's node")
        parent = self.parent.handle
        path = (await self.reads.path(parent.session_id, ctx.node_id))[:-1]
        if not path:
            raise ToolError("fork_unavailable", "there is no conversation to fork from")
        label = {"fork_from_node_id": path[-1].node_id}
        agent_id = await self._create_agent(AgentType.FORK, {"purpose": "fork"}, **label)
        child = await self._create_run(agent_id, label, ctx.tool_call_id)

        async def above() -> list[Node]:
            return path

        return await self._spawn(child, above, args.task)

    async def _spawn(
        self, child: _Child, above: Callable[[], Awaitable[list[Node]]], text: str
    ) -> ToolOutput:
        """Claim the created child, put its task under ``above()``, run it, record its end and
        answer the parent. Whatever interrupts this (the parent cancelled or timed out, a write
        that failed, a bug) the child is ended before the exception goes on (:func:`end_child`):
        a child run never stays in flight behind a parent that carries on or ends."""
        try:
            store = child.store = await self._claim(child)
            await self.parent.append_event(
                EventType.CHILD_RUN_STARTED,
                tool_call_id=child.tool_call_id,
                payload={"child_run_id": child.run_id, "agent_id": child.agent_id, **child.label},
            )
            path = await above()
            task = Node(
                node_id=child.task_node_id,
                parent_id=path[-1].node_id if path else None,
                agent_id=child.agent_id,
                run_id=child.run_id,
                role=Role.USER,
                content=[TextBlock(text=text)],
            )
            stored = await store.append_node(task)
            self._sink(child).emit(
                RunNodeCreated(
                    run_id=child.run_id,
                    session_id=store.handle.session_id,
                    agent_id=child.agent_id,
                    node=stored,
                )
            )
            outcome, parent_cancelled = await self._run(store, self._sink(child), [*path, stored])
            await self._finished(child, store, outcome)
        except BaseException as exc:
            if not child.ended:
                await _shielded(self._abandon(child, exc))
            raise
        if parent_cancelled:
            raise asyncio.CancelledError  # the parent's cancellation goes on, its child ended
        return _as_tool_output(store.handle, outcome)

    def _sink(self, child: _Child) -> _Tee:
        assert child.own is not None  # started by the claim
        return _Tee(self.events, child.own)

    async def _abandon(self, child: _Child, exc: BaseException) -> None:
        """End a child whose dispatch was interrupted (see :meth:`_spawn`); never raises."""
        if isinstance(exc, asyncio.CancelledError):
            outcome = RunOutcome(RunStatus.CANCELLED, EndReason.ABORTED_TOOLS)
        else:
            error = ErrorPayload(
                type="run_error",
                code="child_interrupted",
                message=f"the child run could not go on ({type(exc).__name__})",
            )
            outcome = RunOutcome(RunStatus.FAILED, EndReason.FAILED, error=error)
        try:
            await end_child(
                self.storage,
                self.queue,
                self.reads,
                child.run_id,
                child.agent_id,
                outcome,
                session_id=self.parent.handle.session_id,
                events=self.events,
                parent=self.parent,
                label={**child.label, "tool_call_id": child.tool_call_id},
                own=child.own,
            )
        except Exception:
            log.exception("child run %s could not be ended; a takeover will", child.run_id)

    async def _worker(self, name: str, new_branch: bool) -> tuple[str, str | None]:
        """The worker's agent id (created on first use) and the node its task goes under."""
        parent = self.parent.handle
        agents = await self.reads.query(ListAgents(session_id=parent.session_id)) or []
        for agent in agents:
            metadata = json.loads(agent.get("metadata_json") or "{}")
            if (
                agent["parent_agent_id"] == parent.agent_id
                and agent["agent_type"] == AgentType.SUB.value
                and metadata.get("name") == name
            ):
                after = metadata.get(_CONTINUE_FROM)
                return agent["agent_id"], None if new_branch or not after else str(after)
        return await self._create_agent(AgentType.SUB, _worker_metadata(name)), None

    async def _create_agent(
        self,
        agent_type: AgentType,
        metadata: dict[str, Any],
        *,
        fork_from_node_id: str | None = None,
    ) -> str:
        """A new child agent of the parent's agent, created by the parent's run."""
        parent = self.parent.handle
        agent_id = new_id("agent")
        raise_for_receipt(
            await self.storage.send(
                CreateAgent(
                    command_id=new_id("cmd"),
                    session_id=parent.session_id,
                    agent_id=agent_id,
                    agent_type=agent_type,
                    parent_agent_id=parent.agent_id,
                    created_by_run_id=parent.run_id,
                    fork_from_node_id=fork_from_node_id,
                    metadata=metadata,
                )
            )
        )
        return agent_id

    async def _create_run(self, agent_id: str, label: dict[str, Any], tool_call_id: str) -> _Child:
        """Record the child run (queued): from here on it must end, whatever happens."""
        parent = self.parent.handle
        run_id, task_node_id = new_id("run"), new_id("node")
        raise_for_receipt(
            await self.storage.send(
                CreateRun(
                    command_id=new_id("cmd"),
                    session_id=parent.session_id,
                    run_id=run_id,
                    agent_id=agent_id,
                    start_node_id=task_node_id,
                    metadata={
                        "kind": "child",
                        "parent_run_id": parent.run_id,
                        "tool_call_id": tool_call_id,
                        **label,
                    },
                )
            )
        )
        return _Child(run_id, agent_id, label, tool_call_id, task_node_id)

    async def _claim(self, child: _Child) -> BusRunStore:
        """Claim the child's first attempt (this process runs it)."""
        session_id = self.parent.handle.session_id
        number = await self.queue.next_attempt(child.run_id)
        fence = RunFence(run_id=child.run_id, attempt=number)
        raise_for_receipt(
            await self.storage.send(
                ClaimRun(command_id=new_id("cmd"), session_id=session_id, fence=fence)
            )
        )
        handle = RunHandle(
            run_id=child.run_id, session_id=session_id, agent_id=child.agent_id, attempt=number
        )
        child.own = RunEventWriter(self.queue.redis, self.queue.names, session_id, child.run_id)
        child.own.start()
        self._sink(child).emit(
            RunStatusChanged(
                run_id=child.run_id,
                session_id=session_id,
                agent_id=child.agent_id,
                status=RunStatus.RUNNING,
                previous=RunStatus.QUEUED,
                attempt=number,
            )
        )
        return BusRunStore(self.storage, handle, set_active=False)

    async def _run(
        self, store: BusRunStore, events: _Tee, path: list[Node]
    ) -> tuple[RunOutcome, bool]:
        """The child's loop, as a task a cancel request for the child alone can stop; how it
        ended, and whether that was the parent being cancelled (or timing out)."""
        child = store.handle
        loop = AgentLoop(
            handle=child,
            config=self.config,
            model=self.model,
            store=store,
            events=events,
            tools=self.tools(store),
        )
        task = asyncio.create_task(loop.run(path), name=f"run:{child.run_id}")
        self.running[child.run_id] = task
        try:
            # A cancel requested before the task could be found (its flag stays set).
            if await self.queue.is_cancelled(child.run_id):
                task.cancel()
            outcome = await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            parent_cancelled = current is not None and current.cancelling() > 0
            if task.done() and not task.cancelled():
                return task.result(), parent_cancelled  # it ended just before the cancel
            if not task.done():  # the cancel came before the child's task was awaited
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            # Cancelled, alone or with its parent: either way the child ends now.
            reason = (
                EndReason.ABORTED_TOOLS if loop.phase == "tools" else EndReason.ABORTED_STREAMING
            )
            outcome = RunOutcome(
                RunStatus.CANCELLED,
                reason,
                usage=loop.usage,
                turns=loop.turns,
                last_node_id=loop.last_node_id,
            )
            return outcome, parent_cancelled
        except StorageError as exc:
            if exc.code in FENCED_CODES:
                raise  # a takeover owns the child: stop writing for it
            outcome = _failed(exc.to_payload(), loop)
        except AgentCoreError as exc:
            outcome = _failed(exc.to_payload(), loop)
        finally:
            self.running.pop(child.run_id, None)
        return outcome, False

    async def _finished(self, child: _Child, store: BusRunStore, outcome: RunOutcome) -> None:
        """Record the child's end (unless its answer did), then announce it."""
        if not outcome.recorded:
            outcome = await record_end(self.storage, self.reads, store, outcome)
        child.ended = True
        worker = child.label.get("worker")
        metadata = None
        if worker is not None and outcome.status is RunStatus.COMPLETED and outcome.last_node_id:
            # The next dispatch to this worker continues after the answer that ended last.
            metadata = {**_worker_metadata(worker), _CONTINUE_FROM: outcome.last_node_id}
        await _announce_end(
            self.storage,
            store.handle,
            outcome,
            events=self.events,
            parent=self.parent,
            label={**child.label, "tool_call_id": child.tool_call_id},
            metadata=metadata,
            own=child.own,
        )


async def end_child(
    storage: StorageClient,
    queue: SessionQueue,
    reads: RunReads,
    run_id: str,
    agent_id: str,
    outcome: RunOutcome,
    *,
    session_id: str,
    events: RunEventWriter | None,
    parent: BusRunStore | None,
    label: dict[str, Any],
    own: RunEventWriter | None = None,
) -> bool:
    """End a child run from outside its loop with ``outcome``: claim it with a new attempt (so
    whoever was running it can write for it no more), record the end at its last stored node,
    announce it. ``False`` when it could not be claimed (it had ended, or a newer takeover has it).
    ``own``: the child's stream writer, when this process has one (else a new one ends it).
    """
    number = await queue.next_attempt(run_id)
    fence = RunFence(run_id=run_id, attempt=number)
    claim = await storage.send(
        ClaimRun(command_id=new_id("cmd"), session_id=session_id, fence=fence)
    )
    if not claim.ok:
        return False
    handle = RunHandle(run_id=run_id, session_id=session_id, agent_id=agent_id, attempt=number)
    outcome.last_node_id = await reads.last_node_of(session_id, run_id)
    store = BusRunStore(storage, handle, set_active=False)
    outcome = await record_end(storage, reads, store, outcome)
    if own is None:
        own = RunEventWriter(queue.redis, queue.names, session_id, run_id)
        own.start()
    await _announce_end(
        storage, handle, outcome, events=events, parent=parent, label=label, own=own
    )
    return True


async def end_orphans(
    storage: StorageClient,
    queue: SessionQueue,
    reads: RunReads,
    session_id: str,
    parent_run_id: str,
    *,
    events: RunEventWriter | None = None,
    parent: BusRunStore | None = None,
) -> list[str]:
    """End the child runs of ``parent_run_id`` still in flight: they ran in a worker that is
    gone (or stopped) — ``failed`` / ``worker_lost``. Returns the ids of those ended."""
    runs = await reads.query(ListRuns(session_id=session_id)) or []
    ended: list[str] = []
    for run in runs:
        metadata = json.loads(run.get("metadata_json") or "{}")
        if (
            metadata.get("kind") != "child"
            or metadata.get("parent_run_id") != parent_run_id
            or run["status"] not in _ACTIVE
        ):
            continue
        error = ErrorPayload(
            type="run_error",
            code="worker_lost",
            message="the worker running this child run was lost",
        )
        outcome = RunOutcome(RunStatus.FAILED, EndReason.FAILED, error=error)
        label = {k: v for k, v in metadata.items() if k in ("worker", "fork_from_node_id")}
        label["tool_call_id"] = metadata.get("tool_call_id")
        if await end_child(
            storage,
            queue,
            reads,
            run["run_id"],
            run["agent_id"],
            outcome,
            session_id=session_id,
            events=events,
            parent=parent,
            label=label,
        ):
            ended.append(run["run_id"])
    return ended


async def _announce_end(
    storage: StorageClient,
    child: RunHandle,
    outcome: RunOutcome,
    *,
    events: RunEventWriter | None,
    parent: BusRunStore | None,
    label: dict[str, Any],
    metadata: dict[str, Any] | None = None,
    own: RunEventWriter | None = None,
) -> None:
    """A child's end, told: on the parent's stream (a status change), on the child's own
    stream (its ``run_finished``, which ends that stream), as the child agent's result (and
    ``metadata``, when given), and on the parent's timeline (``child_run_finished``, when the
    parent's attempt can still write)."""
    if events is not None:
        events.emit(_child_ended(child, outcome))
    if own is not None:
        own.emit(_run_finished(child, outcome))
    result = ChildAgentResult(
        agent_id=child.agent_id,
        run_id=child.run_id,
        status=outcome.status,
        end_reason=outcome.end_reason,
        text=outcome.final_text,
        usage=outcome.usage,
        turns=outcome.turns,
        error=outcome.error,
    )
    writes: list[Awaitable[Any]] = [
        storage.send(
            UpdateAgent(
                command_id=new_id("cmd"),
                session_id=child.session_id,
                agent_id=child.agent_id,
                status=_AGENT_STATUS.get(outcome.status, AgentStatus.IDLE),
                result=result.model_dump(mode="json"),
                metadata=metadata,
            )
        )
    ]
    if parent is not None:
        tool_call_id = label.get("tool_call_id")
        writes.append(
            parent.append_event(
                EventType.CHILD_RUN_FINISHED,
                level=EventLevel.INFO
                if outcome.status is RunStatus.COMPLETED
                else EventLevel.WARNING,
                tool_call_id=tool_call_id if isinstance(tool_call_id, str) else None,
                payload={
                    "child_run_id": child.run_id,
                    "agent_id": child.agent_id,
                    **{k: v for k, v in label.items() if k != "tool_call_id"},
                    "status": outcome.status.value,
                    "end_reason": outcome.end_reason.value,
                },
            )
        )
    if own is not None:
        writes.append(own.close())
    await asyncio.gather(*writes)


def _run_finished(child: RunHandle, outcome: RunOutcome) -> RunFinished:
    return RunFinished(
        run_id=child.run_id,
        session_id=child.session_id,
        agent_id=child.agent_id,
        status=outcome.status,
        end_reason=outcome.end_reason,
        usage=outcome.usage,
        error=outcome.error,
        last_node_id=outcome.last_node_id,
    )


async def _shielded(work: Awaitable[None]) -> None:
    """Finish ``work`` even when the caller is being cancelled (it is how a child ends)."""
    task = asyncio.ensure_future(work)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        await task  # cancelled once more while ending the child: still end it, then go on
        raise


def _worker_metadata(name: str) -> dict[str, Any]:
    return {"purpose": "worker", "name": name}


def _child_ended(child: RunHandle, outcome: RunOutcome) -> RunStatusChanged:
    """A child's end on its parent's stream: a status change, since ``run_finished`` ends the
    stream for its readers (the child's record has the rest: ``GET /v1/runs/{id}``)."""
    return RunStatusChanged(
        run_id=child.run_id,
        session_id=child.session_id,
        agent_id=child.agent_id,
        status=outcome.status,
        previous=RunStatus.RUNNING,
        attempt=child.attempt,
    )


def _failed(error: ErrorPayload, loop: AgentLoop) -> RunOutcome:
    return RunOutcome(
        RunStatus.FAILED,
        EndReason.FAILED,
        usage=loop.usage,
        turns=loop.turns,
        last_node_id=loop.last_node_id,
        error=error,
    )


def _as_tool_output(child: RunHandle, outcome: RunOutcome) -> ToolOutput:
    """The worker's answer for the parent's model; the tool node becomes a ``child_result``."""
    metadata = {
        "node_type": NodeType.CHILD_RESULT.value,
        "child_run_id": child.run_id,
        "agent_id": child.agent_id,
    }
    if outcome.status is RunStatus.COMPLETED:
        return ToolOutput(
            outcome.final_text or "(the child agent gave no answer)", metadata=metadata
        )
    why = outcome.error.message if outcome.error else outcome.end_reason.value
    metadata["error_code"] = outcome.error.code if outcome.error else outcome.status.value
    return ToolOutput(
        f"The child agent's run ended {outcome.status.value}: {why}",
        is_error=True,
        metadata=metadata,
    )
