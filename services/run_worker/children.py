"""Child agents: a run hands a task to a worker sub-agent (``dispatch_worker``) and gets its answer.

A worker is an agent of type ``sub`` (purpose ``worker``) named by the dispatching run
and owned by its agent; each dispatch is a child run of that worker in the same session. Its nodes
carry the worker's agent id and never move the session's active node, so they form the worker's own
context tree: dispatching to the same worker again continues after its answer that ended last
(kept in the worker's metadata as ``last_answer_node_id``), ``new_branch`` starts a new branch at
the root of its tree (a worker run reads only the path of its dispatch branch).

A child run executes inside the dispatching tool call, on the parent's worker process and
concurrently with the parent's other tool calls (child runs may run concurrently,
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
``worker_lost`` (``child_endings.end_orphans``), claiming each first so that a worker that was
only stopped cannot write for it again. A child gets no tool that starts children (those are in
``child_tools``), so child runs do not nest.

Children run with their parent's configuration (model, budgets, tool policy, enabled tools and
system prompt) and the session's skills (listed, loadable with ``load_skill``), without the tools
that start children — except a worker dispatched with
``assistant``, which runs with that named agent's (:mod:`named_workers`).

A session in orchestrator mode (its root agent is of type ``orchestrator``) works
through children: its root agent's runs get the orchestration prompt
(``child_tools.ORCHESTRATOR_PROMPT``) and only the tools that start children and the task tools;
its workers get the session's tools.

``fork_agent`` starts the other kind of child (an agent of type ``fork``): a one-off agent whose context
is the parent's conversation up to the turn that forks, branching off the parent's tree there
(``agents.fork_from_node_id``); it runs, ends and answers exactly like a worker's run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from agent_core.bus.contracts.storage import (
    CreateAgent,
    CreateRun,
    ListAgents,
)
from agent_core.context import ContextBuilder
from agent_core.errors import ErrorPayload, ToolError
from agent_core.hooks import AgentKind, RunHooks
from agent_core.ids import new_id
from agent_core.observability.runs import run_started
from agent_core.provider.base import ProviderAdapter
from agent_core.runqueue import RunEventWriter, SessionQueue
from agent_core.runtime import AgentLoop, Ending, RunningRuns, RunProgress, drive
from agent_core.runtime.ports import ToolRunner
from agent_core.skills import RunSkills
from agent_core.storage_client import StorageClient, raise_for_receipt
from agent_core.tools import ToolContext, ToolOutput, Workspace
from agent_core.types.enums import (
    AgentType,
    EndReason,
    EventType,
    Role,
    RunStatus,
)
from agent_core.types.mappers import to_agent_state
from agent_core.types.protocol import TextBlock
from agent_core.types.runtime import (
    AgentConfig,
    Node,
    RunNodeCreated,
    RunStatusChanged,
    RuntimeEvent,
)
from services.run_worker.adapters import BusRunStore
from services.run_worker.child_endings import announce_end, claim_next_attempt, end_child
from services.run_worker.child_tools import DispatchArgs, ForkArgs, child_result
from services.run_worker.endings import end_run
from services.run_worker.named_workers import ChildSetup, NamedSetup
from services.run_worker.reads import RunReads

__all__ = ["ChildRunner"]

_T = TypeVar("_T")

log = logging.getLogger("soong.run_worker")

_CONTINUE_FROM = "last_answer_node_id"


@dataclass
class _Child:
    """A child run from its creation on: what it takes to end it whatever happens."""

    run_id: str
    agent_id: str
    label: dict[str, Any]
    tool_call_id: str
    task_node_id: str  # the run's start node: its task
    events: _Tee | None = None  # once claimed
    ended: bool = False


class _Tee:
    """A child's runtime events: on its parent's stream and on its own, so that the child's
    events can be followed (and resumed) by themselves too (``GET …/runs/{child}/events``)."""

    def __init__(self, parent: RunEventWriter, own: RunEventWriter) -> None:
        self._parent = parent
        self.own = own

    def emit(self, event: RuntimeEvent) -> None:
        self._parent.emit(event)
        self.own.emit(event)


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
    # A child's tools (none that start children), with the child's hooks and skills.
    tools: Callable[[BusRunStore, RunHooks | None, RunSkills | None], ToolRunner]
    runs: RunningRuns  # where a cancel request finds a run's task
    debug: Workspace | None = None  # debug mode: where tracebacks of failed children are kept
    # A child's hooks by its kind (``worker``, ``fork``): the parent's, bound to the child.
    hooks: Callable[[BusRunStore, AgentKind], RunHooks | None] = lambda _store, _kind: None
    named: NamedSetup | None = None  # resolves ``dispatch_worker``'s ``assistant``
    # A child's skills for the config it runs with: listed and loadable as in any run.
    skills: Callable[[AgentConfig], RunSkills | None] = lambda _config: None
    _workers: dict[str, asyncio.Lock] = field(default_factory=dict)

    async def dispatch(self, args: DispatchArgs, ctx: ToolContext) -> ToolOutput:
        """Run ``args.task`` as a child run of worker ``args.worker``; its answer as the result.

        Raises ``CancelledError`` when the parent is cancelled; every way the child run ends is
        recorded before this returns or raises (see :meth:`_spawn`).
        """
        own = None
        if args.assistant is not None:  # a named agent's config instead of the parent's
            if self.named is None:
                raise ToolError("dispatch_unavailable", "named workers are not available here")
            own = await self.named(args.assistant)
        label = {"worker": args.worker, **(own.label if own else {})}
        # One worker of a name, even when two calls of one turn name a new one.
        async with self._workers.setdefault(args.worker, asyncio.Lock()):
            agent_id, after = await self._worker(args.worker, args.new_branch)
            above = [] if after is None else await self.reads.path(self._session_id, after)
            child = await self._create_run(agent_id, label, ctx.tool_call_id)
        return await self._spawn(child, above, args.task, own)

    async def fork(self, args: ForkArgs, ctx: ToolContext) -> ToolOutput:
        """Run ``args.task`` as a child run of a new fork agent whose context is the parent's
        path before the turn that asked for it (that turn's tool calls have no results yet); the
        fork's nodes branch off there. Raises as :meth:`dispatch` does."""
        if ctx.node_id is None:
            raise ToolError("fork_unavailable", "a fork needs the calling turn's node")
        above = (await self.reads.path(self._session_id, ctx.node_id))[:-1]
        if not above:
            raise ToolError("fork_unavailable", "there is no conversation to fork from")
        label = {"fork_from_node_id": above[-1].node_id}
        agent_id = await self._create_agent(AgentType.FORK, {"purpose": "fork"}, **label)
        child = await self._create_run(agent_id, label, ctx.tool_call_id)
        return await self._spawn(child, above, args.task)

    @property
    def _session_id(self) -> str:
        return self.parent.handle.session_id

    async def _spawn(
        self, child: _Child, above: list[Node], text: str, own: ChildSetup | None = None
    ) -> ToolOutput:
        """Claim the created child, run it (:func:`drive`, as every run), write and tell its end
        and answer the parent. Whatever interrupts this (the parent cancelled or timed out, a
        write that failed, a bug) the child is ended before the exception goes on: when its
        parent is cancelled it ends ``cancelled`` with what it did so far, otherwise
        :func:`end_child` ends it from outside. A child run never stays in flight behind a
        parent that carries on or ends."""
        parent_cancelled = False
        try:
            store, events = await self._claim(child)
            await self.parent.append_event(
                EventType.CHILD_RUN_STARTED,
                tool_call_id=child.tool_call_id,
                payload={"child_run_id": child.run_id, "agent_id": child.agent_id, **child.label},
            )
            progress = RunProgress(store.handle)
            try:
                ending = await drive(
                    progress,
                    lambda p: self._work(child, store, events, above, text, p, own),
                    self.runs,
                    cancel_requested=lambda: self.queue.is_cancelled(child.run_id),
                )
            except asyncio.CancelledError:
                # The parent is cancelled (or timed out, or its worker stops): the child ends
                # with it, then the cancellation goes on.
                ending, parent_cancelled = progress.cancelled(), True
            loop = progress.loop
            hooks = loop.hooks if loop is not None else None
            model = loop.config.model if loop is not None else None
            ending = await _shielded(self._finished(child, store, ending, hooks, model))
        except BaseException as exc:
            if not child.ended:
                await _shielded(self._abandon(child, exc))
            raise
        if parent_cancelled:
            raise asyncio.CancelledError  # the parent's cancellation goes on, its child ended
        return child_result(store.handle, ending)

    async def _work(
        self,
        child: _Child,
        store: BusRunStore,
        events: _Tee,
        above: list[Node],
        text: str,
        p: RunProgress,
        own: ChildSetup | None = None,
    ) -> Ending:
        """The child's task under the path ``above``, then its loop (run by :func:`drive`),
        with the parent's configuration or ``own`` (a named worker's)."""
        handle = store.handle
        p.path = list(above)
        task = Node(
            node_id=child.task_node_id,
            parent_id=above[-1].node_id if above else None,
            agent_id=child.agent_id,
            run_id=child.run_id,
            role=Role.USER,
            content=[TextBlock(text=text)],
        )
        stored = await store.append_node(task)
        p.path.append(stored)
        events.emit(
            RunNodeCreated(
                run_id=child.run_id,
                session_id=handle.session_id,
                agent_id=child.agent_id,
                node=stored,
            )
        )
        config = own.config if own else self.config
        kind: AgentKind = "sub" if "worker" in child.label else "fork"
        hooks = self.hooks(store, kind)
        skills = self.skills(config)
        loop = AgentLoop(
            handle=handle,
            config=config,
            model=own.model if own else self.model,
            store=store,
            events=events,
            tools=(own.tools if own else self.tools)(store, hooks, skills),
            builder=ContextBuilder(skills=skills.listing if skills else None),
            hooks=hooks,
        )
        return await p.run_loop(loop, p.path, timeout_s=config.budget.max_wall_clock_s)

    async def _abandon(self, child: _Child, exc: BaseException) -> None:
        """End a child whose dispatch was interrupted (see :meth:`_spawn`); never raises."""
        if isinstance(exc, asyncio.CancelledError):
            status, reason, error = RunStatus.CANCELLED, EndReason.ABORTED_TOOLS, None
        else:
            status, reason = RunStatus.FAILED, EndReason.FAILED
            error = ErrorPayload(
                type="run_error",
                code="child_interrupted",
                message=f"the child run could not go on ({type(exc).__name__})",
            )
        try:
            await end_child(
                self.storage,
                self.queue,
                self.reads,
                child.run_id,
                child.agent_id,
                (status, reason, error),
                session_id=self._session_id,
                events=self.events,
                parent=self.parent,
                label=child.label,
                tool_call_id=child.tool_call_id,
                own=None if child.events is None else child.events.own,
            )
        except Exception:
            log.exception("child run %s could not be ended; a takeover will", child.run_id)

    async def _worker(self, name: str, new_branch: bool) -> tuple[str, str | None]:
        """The worker's agent id (created on first use) and the node its task goes under."""
        parent = self.parent.handle
        records = await self.reads.read(ListAgents(session_id=parent.session_id)) or []
        for agent in map(to_agent_state, records):
            metadata = agent.metadata
            if (
                agent.parent_agent_id == parent.agent_id
                and agent.agent_type is AgentType.SUB
                and metadata.get("name") == name
            ):
                after = metadata.get(_CONTINUE_FROM)
                return agent.agent_id, None if new_branch or not after else str(after)
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

    async def _claim(self, child: _Child) -> tuple[BusRunStore, _Tee]:
        """Claim the child's first attempt (this process runs it); its store and its events."""
        session_id = self._session_id
        claim, handle = await claim_next_attempt(
            self.storage, self.queue, session_id, child.run_id, child.agent_id
        )
        raise_for_receipt(claim)
        run_started(handle, kind="child")
        own = RunEventWriter(self.queue.bus, self.queue.names, session_id, child.run_id)
        own.start()
        events = child.events = _Tee(self.events, own)
        events.emit(
            RunStatusChanged(
                run_id=child.run_id,
                session_id=session_id,
                agent_id=child.agent_id,
                status=RunStatus.RUNNING,
                previous=RunStatus.QUEUED,
                attempt=handle.attempt,
            )
        )
        return BusRunStore(self.storage, handle, set_active=False), events

    async def _finished(
        self,
        child: _Child,
        store: BusRunStore,
        ending: Ending,
        hooks: RunHooks | None,
        model: str | None = None,
    ) -> Ending:
        """Run the child's end hooks (RunEnd, SubagentStop), write its end, then tell it; the
        end as recorded."""
        if hooks is not None:
            await hooks.run_end(ending.end)
        ending = await end_run(
            self.storage,
            self.reads,
            store.handle,
            ending,
            fence=store.fence,
            set_active=False,
            debug=self.debug,
            model=model,
        )
        child.ended = True
        worker = child.label.get("worker")
        metadata = None
        end = ending.end
        if worker is not None and end.status is RunStatus.COMPLETED and end.last_node_id:
            # The next dispatch to this worker continues after the answer that ended last.
            metadata = {**_worker_metadata(worker), _CONTINUE_FROM: end.last_node_id}
        await announce_end(
            self.storage,
            store.handle,
            ending,
            events=self.events,
            parent=self.parent,
            label=child.label,
            tool_call_id=child.tool_call_id,
            metadata=metadata,
            own=None if child.events is None else child.events.own,
        )
        return ending


async def _shielded(work: Awaitable[_T]) -> _T:
    """Finish ``work`` even when the caller is being cancelled (it is how a child ends); its
    result."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await task  # cancelled once more while ending the child: still end it, then go on
        raise


def _worker_metadata(name: str) -> dict[str, Any]:
    return {"purpose": "worker", "name": name}
