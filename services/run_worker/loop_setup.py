"""Building a claimed attempt's loop: its model, its workspace's tools, its hooks, and the child
runs it may start (part of the prepare stage, :mod:`services.run_worker.prepare`)."""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any

from agent_core.context import ContextBuilder
from agent_core.context.compaction import Compactor
from agent_core.hooks import AgentKind, HookSet, RunHooks
from agent_core.runtime import AgentLoop, RunningRuns
from agent_core.runtime.budget import AccountBudget
from agent_core.skills import LoadSkillTool, RunSkills
from agent_core.tools import PermissionGate, Tool, ToolExecutor, Workspace
from agent_core.types.enums import AgentType
from agent_core.types.runtime import AgentConfig
from services.run_worker.adapters import BusRunStore, StorageArtifactSink, WorkerToolRunner
from services.run_worker.child_tools import child_tools, orchestrator_config
from services.run_worker.children import ChildRunner
from services.run_worker.claim import Claimed
from services.run_worker.compact_agents import BusCompactAgents
from services.run_worker.hook_setup import HookSetup
from services.run_worker.media import with_media
from services.run_worker.named_workers import named_setup
from services.run_worker.permissions import RedisPermissionBroker
from services.run_worker.ports import AttemptPorts, AttemptStage

if TYPE_CHECKING:  # the MCP SDK is imported only where servers are configured
    from agent_core.mcp.tools import McpServers

__all__ = ["LoopSetup"]


class LoopSetup(AttemptStage):
    """Builds the loops of one worker process's attempts (and the tools of their child runs)."""

    def __init__(
        self,
        ports: AttemptPorts,
        runs: RunningRuns,
        hooks: HookSetup,
        mcp: McpServers | None = None,
    ) -> None:
        super().__init__(ports)
        self.runs = runs
        self.hooks = hooks
        self.mcp = mcp

    async def mcp_tools(self, config: AgentConfig) -> Sequence[Tool[Any]]:
        """The MCP tools the agent may use, as listed now (servers start on first use; one that
        cannot start adds none). An orchestrator's own loop is not given them (``_tools``): its
        worker runs are."""
        if not self.mcp:
            return ()
        taken = self.setup.tools  # a plug-in tool that took an MCP name keeps it
        return [
            t for t in await self.mcp.tools_for(config.enabled_tools) if taken.get(t.name) is None
        ]

    def build(
        self,
        c: Claimed,
        config: AgentConfig,
        skills: RunSkills | None,
        mcp: Sequence[Tool[Any]] = (),
        account: AccountBudget | None = None,
    ) -> AgentLoop:
        """The attempt's loop: its model, its workspace's tools, and the child runs it may start
        (an orchestrator's loop: the orchestration prompt and tools; its children do the work)."""
        run = c.run
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
        project = self.setup.project(c.cwd, workspace)
        if project:  # the session's project is the agent's working folder (``project/…``)
            workspace.use_project(project)
        in_effect = self.hooks.in_effect(c.cwd, project)
        kind: AgentKind = "orchestrator" if orchestrator else "main"
        hooks = self.hooks.bind(in_effect, c.store, c.handle, kind, cwd=project)
        children = ChildRunner(
            self.storage,
            self.queue,
            self.reads,
            c.store,
            c.events,
            config,
            model,
            tools=lambda store, h, sk: self._tools(
                c, config, workspace, store, None, hooks=h, mcp=mcp, skills=sk
            ),
            runs=self.runs,
            debug=workspace if self.ctx.settings.debug else None,
            hooks=lambda store, kind: self._child_hooks(in_effect, store, kind, project, c),
            named=named_setup(
                self.reads,
                self.setup,
                run.account_id,
                lambda cfg: (
                    lambda store, h, sk: self._tools(
                        c, cfg, workspace, store, None, hooks=h, skills=sk
                    )
                ),
            ),
            skills=lambda cfg: self.skills.child_skills(run, c.cwd, cfg),
        )
        return AgentLoop(
            handle=c.handle,
            config=orchestrator_config(config) if orchestrator else config,
            model=model,
            store=c.store,
            events=c.events,
            tools=self._tools(
                c,
                config,
                workspace,
                c.store,
                children,
                orchestrator=orchestrator,
                skills=skills,
                hooks=hooks,
                mcp=mcp,
            ),
            builder=ContextBuilder(skills=skills.listing if skills else None),
            compactor=Compactor(config, model, BusCompactAgents(self.storage, c.handle)),
            hooks=hooks,
            account_budget=account,
        )

    def _child_hooks(
        self, hooks: HookSet, store: BusRunStore, kind: AgentKind, project: str, c: Claimed
    ) -> RunHooks | None:
        """A child run's hooks: the session's, bound to the child (a worker or a fork)."""
        parent = c.handle.run_id
        return self.hooks.bind(hooks, store, store.handle, kind, cwd=project, parent_run_id=parent)

    def _tools(
        self,
        c: Claimed,
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
            c.events,
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
                self.setup.task_scope(workspace.account_id, c.cwd),
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
            after_call=(lambda: self._sync(c, config.max_turns)) if self.mirrors.active else None,
        )

    def _sync(self, c: Claimed, max_turns: int) -> Awaitable[None]:
        """After each tool call: what it changed in the session's folder goes to the store."""
        run = c.run
        return self.mirrors.sync(run.account_id, run.session_id, c.events, c.files_phase(max_turns))
