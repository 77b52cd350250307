"""Executing one queued run: claim it (fenced), drive its attempt, write and tell its end.

Every run a worker takes ends here exactly once (``docs/architecture.md``, "Run lifecycle and
endings"). A run cancelled before any attempt claimed it is ended without a claim. Otherwise the
attempt is claimed and everything it does — ending the child runs a lost attempt left in flight,
placing the message, deciding where a recovered run resumes, building the loop, running it — runs
under :func:`agent_core.runtime.drive`, which turns whatever stops it (its end, a cancel, the
wall-clock budget, any exception) into the run's end; :func:`endings.end_run` writes that end in
one command and :func:`endings.announce` tells it on the run's stream. Attempts are capped
(``run_worker.max_attempts``): a run that keeps losing its worker ends ``failed`` with
``attempts_exhausted``.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agent_core.context import ContextBuilder
from agent_core.context.compaction import Compactor
from agent_core.files import FileStore, build_file_store
from agent_core.hooks import AgentKind, HookSet, RunHooks
from agent_core.observability.runs import run_started
from agent_core.observability.tracing import tracer
from agent_core.provider import ProviderRegistry
from agent_core.runqueue import InFlight, QueuedRun, SessionQueue, cancel_queued_run
from agent_core.runtime import (
    AgentLoop,
    Ending,
    Fenced,
    RunFailure,
    RunningRuns,
    RunProgress,
    drive,
    resume_point,
)
from agent_core.runtime.budget import AccountBudget
from agent_core.service import ServiceContext
from agent_core.skills import LoadSkillTool, RunSkills, SkillCatalog
from agent_core.storage_client import StorageClient
from agent_core.tasks.client import TaskClient
from agent_core.tools import PermissionGate, Tool, ToolExecutor, ToolRegistry, Workspace
from agent_core.types.enums import AgentType, EndReason, RunStatus
from agent_core.types.runtime import AgentConfig, Node, RunEnd, RunNodeCreated, RunPhase
from services.run_worker.adapters import BusRunStore, StorageArtifactSink, WorkerToolRunner
from services.run_worker.agent_setup import AgentSetup
from services.run_worker.budgets import AccountBudgets
from services.run_worker.child_endings import end_orphans
from services.run_worker.child_tools import child_tools, orchestrator_config
from services.run_worker.children import ChildRunner
from services.run_worker.claim import Attempt, Claimer, message_node, placed_path
from services.run_worker.compact_agents import BusCompactAgents
from services.run_worker.endings import announce, close_stream_of_terminal_run, end_run
from services.run_worker.hook_setup import HookSetup
from services.run_worker.media import with_media
from services.run_worker.memory_link import hand_off
from services.run_worker.named_workers import named_setup
from services.run_worker.permissions import RedisPermissionBroker
from services.run_worker.reads import RunReads
from services.run_worker.skills_link import SkillLink
from services.run_worker.workspaces import WorkspaceMirrors

if TYPE_CHECKING:  # the MCP SDK is imported only where servers are configured
    from agent_core.mcp.tools import McpServers

__all__ = ["RunExecutor"]

log = logging.getLogger("soong.run_worker")


class RunExecutor:
    """Runs queued runs for one worker process."""

    def __init__(
        self,
        ctx: ServiceContext,
        storage: StorageClient,
        queue: SessionQueue,
        providers: ProviderRegistry,
        tools: ToolRegistry,
        mcp: McpServers | None = None,
        files: FileStore | None = None,
    ) -> None:
        self.ctx = ctx
        # Session workspaces on this host's disk, mirrored from the file store (s3 engine).
        self.mirrors = WorkspaceMirrors(ctx.settings.home, files or build_file_store(ctx.settings))
        self.mcp = mcp
        self.storage = storage
        self.queue = queue
        self.reads = RunReads(storage)
        self.claimer = Claimer(ctx, storage, queue, self.reads)
        task_client = TaskClient(ctx.rpc, ctx.names, timeout_s=ctx.settings.bus.request_timeout_s)
        self.setup = AgentSetup(ctx.settings, providers, tools, task_client)
        self.hooks = HookSetup(ctx.settings, os.environ)
        self.runs = RunningRuns()
        self.skills = SkillLink(ctx)
        self.budgets = AccountBudgets(ctx.settings, self.reads)
        self.max_attempts = ctx.settings.run_worker.max_attempts

    def cancel(self, run_id: str) -> bool:
        """Cancel a run this process is executing; ``False`` if it is not here (yet)."""
        return self.runs.cancel(run_id)

    async def execute(self, item: InFlight) -> bool:
        """Execute (or recover) ``item``; return ``False`` if a newer attempt superseded ours.

        ``True`` means the run is terminal in storage (by us, or it already was).
        """
        run = item.run
        cancelled, number = await self.queue.claim_prelude(run.run_id)
        if cancelled and number == 1:
            # Cancelled while queued and never claimed: it ends without running.
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
        progress = RunProgress(attempt.handle)
        try:
            ending = await drive(
                progress, lambda p: self._attempt(attempt, p, cancelled), self.runs
            )
            if attempt.handle.attempt > 1 and ending.end.status is RunStatus.CANCELLED:
                # A cancel waiting for the recovered run stops its task before the task has
                # ended the lost attempt's child runs: they end now, before the run does.
                await self._end_orphans_after_cancel(attempt)
            if ending.end.status is RunStatus.CANCELLED and await self.queue.interrupted(
                run.run_id
            ):  # stopped for a newer message, not by a cancel of its own
                aborted = ending.end.model_copy(update={"status": RunStatus.ABORTED})
                ending = dataclasses.replace(ending, end=aborted)
            # What the run wrote is in the store before its end is (the next turn may run on
            # another host).
            await self._sync(attempt)
            hooks = progress.loop.hooks if progress.loop is not None else None
            if hooks is not None:  # RunEnd: before the end is written (the timeline closes)
                await hooks.run_end(ending.end)
            ending = await end_run(
                self.storage,
                self.reads,
                attempt.handle,
                ending,
                fence=attempt.store.fence,
                set_active=attempt.store.set_active,
                debug=self._debug_workspace(run),
                model=progress.loop.config.model if progress.loop is not None else None,
            )
        except Fenced:
            log.warning(
                "run %s attempt %d was superseded; stopping", run.run_id, attempt.handle.attempt
            )
            await attempt.events.abort()
            return False
        announce(attempt.events, attempt.handle, ending)
        await attempt.events.close()
        if self.ctx.settings.memory.enabled and run.kind == "main":  # every end, failed too
            nodes = progress.nodes if ending.node is None else [*progress.nodes, ending.node]
            cwd = attempt.prefetch.cwd
            catalog = functools.partial(self._skill_catalog, run, cwd)
            await hand_off(self.ctx, self.reads, item, ending.end, nodes, catalog)
        return True

    def _skill_catalog(self, run: QueuedRun, cwd: str) -> SkillCatalog | None:
        """The run's skills for memory's hand-off (which skill owns which tool); ``None`` when
        they cannot be read: memory then gets names only, and the run's end is unaffected."""
        try:
            return self.skills.catalog(run, cwd, self.setup.config(run.config_overrides))
        except Exception as exc:
            log.warning("skills of %s unreadable for memory: %s", run.run_id, type(exc).__name__)
            return None

    def _debug_workspace(self, run: QueuedRun) -> Workspace | None:
        """Where debug mode keeps the tracebacks of the run's unexpected failures."""
        if not self.ctx.settings.debug:
            return None
        return Workspace(self.ctx.settings.home, run.account_id, run.session_id)

    async def _attempt(self, a: Attempt, p: RunProgress, cancelled: bool) -> Ending:
        """Everything an attempt does until its loop ends; run by :func:`drive`, so whatever
        raises here ends the run with what ``p`` holds so far."""
        run, prefetch = a.item.run, a.prefetch
        if a.handle.attempt > 1:
            # Child runs in flight ran in the process that is gone (or stopped): end them first.
            await self._end_orphans(a)
        p.path = await self._start_path(a)
        if a.handle.attempt > self.max_attempts:
            lost = a.handle.attempt - 1
            error = RunFailure(
                "attempts_exhausted",
                f"the run lost its worker {lost} times; it is not tried again",
                details={"attempts": lost, "max_attempts": self.max_attempts},
            )
            return p.failed(error.to_payload())
        if cancelled or prefetch.cancelled:  # cancelled while it was being claimed
            return p.cancelled()
        config = self.setup.config(run.config_overrides)
        # The session's files on this host's disk before any tool can need them.
        await self.mirrors.hydrate(
            run.account_id, run.session_id, a.events, self._files_phase(a, config.max_turns)
        )
        if self.ctx.settings.skills.enabled:  # the account's skills, for the scan below
            await self.mirrors.hydrate_skills(
                run.account_id, a.events, self._files_phase(a, config.max_turns)
            )
        account = await self.budgets.of(run.account_id)
        if account is not None and account.exhausted_by():  # nothing left: no model call
            return p.ending(RunStatus.FAILED, EndReason.BUDGET_EXHAUSTED, error=account.error())
        skills = self.skills.run_skills(run, prefetch.cwd, p.path, config)
        mcp = await self._mcp_tools(a, config)
        turns_done = 0
        loop: AgentLoop | None = None
        rerun = False
        if a.handle.attempt > 1:
            loop = self._loop(a, config, skills, mcp, account)
            tools = loop.tools
            repeatable = tools.repeatable if isinstance(tools, WorkerToolRunner) else None
            point = resume_point(p.path, run.run_id, repeatable)
            rerun = point.action == "rerun"
            p.turns = turns_done = point.turns_done
            if point.action == "complete":  # its answer was stored: only its end was not
                end = RunEnd(
                    status=RunStatus.COMPLETED,
                    end_reason=EndReason.COMPLETED,
                    turns=turns_done,
                    last_node_id=p.path[-1].node_id,
                )
                return Ending(end, text=point.final_text)
            if point.action == "unsafe":
                error = RunFailure(
                    "worker_lost",
                    "the worker running this run was lost while tools with side effects were "
                    "running; their results are unknown, so the run was not resumed",
                )
                return p.failed(error.to_payload())
        elif run.kind == "main":  # memory, and the skill a `/<name>` message invokes
            for node in await self.skills.first_nodes(
                run, a.handle, p.path, skills, prefetch.memory
            ):
                p.path.append(await self._append(a, node))
        if loop is None:
            loop = self._loop(a, config, skills, mcp, account)
        timeout_s = config.budget.max_wall_clock_s
        return await p.run_loop(
            loop, p.path, turns_done=turns_done, timeout_s=timeout_s, rerun_calls=rerun
        )

    async def _end_orphans(self, a: Attempt) -> None:
        run = a.item.run
        await end_orphans(
            self.storage,
            self.queue,
            self.reads,
            run.session_id,
            run.run_id,
            events=a.events,
            parent=a.store,
        )

    async def _end_orphans_after_cancel(self, a: Attempt) -> None:
        """:meth:`_end_orphans` for a cancelled recovered run (none are left when its task had
        ended them). Raises :class:`Fenced` only: the run's end goes on whatever else fails."""
        try:
            await self._end_orphans(a)
        except Fenced:
            raise
        except Exception as exc:
            why = type(exc).__name__
            log.warning(
                "run %s: its lost attempt's child runs were not ended (%s)", a.handle.run_id, why
            )

    async def _start_path(self, a: Attempt) -> list[Node]:
        """The path the attempt starts on: to its message (placed now if no attempt did), or —
        for a recovered run — to the run's last stored node."""
        run, prefetch = a.item.run, a.prefetch
        path = prefetch.path
        if path is None and run.node_parent and not prefetch.above:
            raise RunFailure("invalid_parent", "the message's parent node is not in this session")
        if path is None:  # the message becomes a node now, after whatever ran before it
            path = await self._place_message(a)
        if a.handle.attempt > 1:
            last = await self.reads.last_node_of(run.session_id, run.run_id)
            if last is not None:
                path = await self.reads.path(run.session_id, last)
        return path

    async def _mcp_tools(self, a: Attempt, config: AgentConfig) -> Sequence[Tool[Any]]:
        """The MCP tools the agent may use, as listed now (servers start on first use; one that
        cannot start adds none). An orchestrator's own loop is not given them (``_tools``): its
        worker runs are."""
        if not self.mcp:
            return ()
        taken = self.setup.tools  # a plug-in tool that took an MCP name keeps it
        return [
            t for t in await self.mcp.tools_for(config.enabled_tools) if taken.get(t.name) is None
        ]

    def _loop(
        self,
        a: Attempt,
        config: AgentConfig,
        skills: RunSkills | None,
        mcp: Sequence[Tool[Any]] = (),
        account: AccountBudget | None = None,
    ) -> AgentLoop:
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
        # Attachments reach the model as content (and artifacts of this session only).
        model = with_media(
            self.setup.adapter(config), config, workspace, self.reads, run.session_id
        )
        project = self.setup.project(a.prefetch.cwd, workspace)
        if project:  # the session's project is the agent's working folder (``project/…``)
            workspace.use_project(project)
        in_effect = self.hooks.in_effect(a.prefetch.cwd, project)
        kind: AgentKind = "orchestrator" if orchestrator else "main"
        hooks = self.hooks.bind(in_effect, a.store, a.handle, kind, cwd=project)
        children = ChildRunner(
            self.storage,
            self.queue,
            self.reads,
            a.store,
            a.events,
            config,
            model,
            tools=lambda store, h, sk: self._tools(
                a, config, workspace, store, None, hooks=h, mcp=mcp, skills=sk
            ),
            runs=self.runs,
            debug=workspace if self.ctx.settings.debug else None,
            hooks=lambda store, kind: self._child_hooks(in_effect, store, kind, project, a),
            named=named_setup(
                self.reads,
                self.setup,
                run.account_id,
                lambda cfg: (
                    lambda store, h, sk: self._tools(
                        a, cfg, workspace, store, None, hooks=h, skills=sk
                    )
                ),
            ),
            skills=lambda cfg: self.skills.child_skills(run, a.prefetch.cwd, cfg),
        )
        return AgentLoop(
            handle=a.handle,
            config=orchestrator_config(config) if orchestrator else config,
            model=model,
            store=a.store,
            events=a.events,
            tools=self._tools(
                a,
                config,
                workspace,
                a.store,
                children,
                orchestrator=orchestrator,
                skills=skills,
                hooks=hooks,
                mcp=mcp,
            ),
            builder=ContextBuilder(skills=skills.listing if skills else None),
            compactor=Compactor(config, model, BusCompactAgents(self.storage, a.handle)),
            hooks=hooks,
            account_budget=account,
        )

    def _child_hooks(
        self, hooks: HookSet, store: BusRunStore, kind: AgentKind, project: str, a: Attempt
    ) -> RunHooks | None:
        """A child run's hooks: the session's, bound to the child (a worker or a fork)."""
        parent = a.handle.run_id
        return self.hooks.bind(hooks, store, store.handle, kind, cwd=project, parent_run_id=parent)

    def _tools(
        self,
        a: Attempt,
        config: AgentConfig,
        workspace: Workspace,
        store: BusRunStore,
        children: ChildRunner | None,
        *,
        orchestrator: bool = False,
        skills: RunSkills | None = None,
        hooks: RunHooks | None = None,
        mcp: Sequence[Tool[Any]] = (),
    ) -> WorkerToolRunner:
        """The tools of the run that writes through ``store`` (the attempt's, or a child's):
        with ``children``, also the tools that start child runs (children start none)."""
        handle = store.handle
        broker = RedisPermissionBroker(
            self.ctx.redis,
            self.ctx.names,
            self.storage,
            a.events,
            store,
            timeout_s=self.ctx.settings.run_worker.permission_timeout_s,
        )
        starters = child_tools(children) if children else ()
        definitions = self.setup.definitions(
            config.enabled_tools, children=children is not None, orchestrator=orchestrator
        )
        if skills and (skills.listing or skills.loaded):  # whatever enabled_tools says
            load_skill = LoadSkillTool(skills)
            starters = (*starters, load_skill)
            definitions = [*definitions, load_skill.definition()]
        if mcp and not orchestrator:  # MCP tools: listed per run, filtered by enabled_tools
            starters = (*starters, *mcp)
            definitions = [*definitions, *(t.definition() for t in mcp)]
        executor = ToolExecutor(
            self.setup.registry(
                self.setup.task_scope(workspace.account_id, a.prefetch.cwd),
                starters,
                orchestrator=orchestrator,
            ),
            workspace=workspace,
            run_id=handle.run_id,
            agent_id=handle.agent_id,
            permissions=PermissionGate(self.setup.rules(config), broker),
            artifacts=StorageArtifactSink(self.storage, handle, workspace),
            # Exactly what the model was offered: a tool it names but was not given is refused.
            enabled=frozenset(d.name for d in definitions),
            hooks=hooks,
        )
        return WorkerToolRunner(
            executor,
            definitions,
            skills,
            after_call=(lambda: self._sync(a, config.max_turns)) if self.mirrors.active else None,
        )

    @staticmethod
    def _files_phase(a: Attempt, max_turns: int) -> RunPhase:
        return RunPhase(
            run_id=a.handle.run_id,
            session_id=a.handle.session_id,
            agent_id=a.handle.agent_id,
            phase="files",
            turn=1,
            max_turns=max_turns,
        )

    async def _sync(self, a: Attempt, max_turns: int = 1) -> None:
        """Send what the run changed in its session's folder to the store (s3 engine)."""
        run = a.item.run
        await self.mirrors.sync(
            run.account_id, run.session_id, a.events, self._files_phase(a, max_turns)
        )

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
        stored = await a.store.append_node(node)
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
