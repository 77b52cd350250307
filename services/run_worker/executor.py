"""Executing one queued run: an attempt at it, as a straight pipeline of four stages.

1. **Claim** (:meth:`Claimer.take`, :mod:`~services.run_worker.claim`): the next attempt number
   and the fenced claim, with everything the attempt's start reads beside it, as one
   :class:`Claimed`. A run cancelled while queued is ended there without a claim; a run that is
   terminal already or was superseded is no attempt of ours.
2. **Prepare** (:meth:`Preparer.prepare`, :mod:`~services.run_worker.prepare`): end a lost
   attempt's child runs, decide where the run starts (placing its message if no attempt did),
   bring the session's files here, build the loop (:mod:`~services.run_worker.loop_setup`) — or
   end the attempt before any loop runs.
3. **Drive**: run the loop within the run's wall-clock budget.
4. **End** (:class:`AttemptEnd`, :mod:`~services.run_worker.attempt_end`): the run's one end,
   written (fenced) and then told.

Prepare and drive run as one task under :func:`agent_core.runtime.drive`, which turns whatever
stops it (the loop's end, a cancel, the wall-clock budget, any exception) into the run's
:class:`Ending`: every attempt ends in stage 4, exactly once. A newer attempt owning the run
(:class:`Fenced`, in any stage after the claim) ends nothing. Attempts are capped
(``run_worker.max_attempts``): a run that keeps losing its worker ends ``failed`` with
``attempts_exhausted``. See ``docs/architecture.md``, "Run lifecycle and endings".
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING

from agent_core.files import FileStore, build_file_store
from agent_core.observability.runs import run_started
from agent_core.provider import ProviderRegistry
from agent_core.runqueue import InFlight, SessionQueue
from agent_core.runtime import Ending, Fenced, RunningRuns, RunProgress, drive
from agent_core.service import ServiceContext
from agent_core.storage_client import StorageClient
from agent_core.tasks.client import TaskClient
from agent_core.tools import ToolRegistry
from services.run_worker.agent_setup import AgentSetup
from services.run_worker.attempt_end import AttemptEnd
from services.run_worker.budgets import AccountBudgets
from services.run_worker.claim import Claimed, Claimer
from services.run_worker.hook_setup import HookSetup
from services.run_worker.loop_setup import LoopSetup
from services.run_worker.ports import AttemptPorts
from services.run_worker.prepare import Preparer
from services.run_worker.reads import RunReads
from services.run_worker.skills_link import SkillLink
from services.run_worker.workspaces import WorkspaceMirrors

if TYPE_CHECKING:  # the MCP SDK is imported only where servers are configured
    from agent_core.mcp.tools import McpServers

__all__ = ["RunExecutor"]


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
        settings = ctx.settings
        self.ctx = ctx
        self.storage = storage
        self.queue = queue
        # Session workspaces on this host's disk, mirrored from the file store (s3 engine).
        self.mirrors = WorkspaceMirrors(settings.home, files or build_file_store(settings))
        self.runs = RunningRuns()
        reads = RunReads(storage)
        task_client = TaskClient(ctx.rpc, ctx.names, timeout_s=settings.bus.request_timeout_s)
        self.setup = setup = AgentSetup(settings, providers, tools, task_client)
        ports = AttemptPorts(ctx, storage, queue, reads, setup, SkillLink(ctx), self.mirrors)
        self.loops = LoopSetup(ports, self.runs, HookSetup(settings, os.environ), mcp)
        self.claimer = Claimer(ctx, storage, queue, reads)
        self.preparer = Preparer(
            ports,
            self.loops,
            AccountBudgets(settings, reads),
            max_attempts=settings.run_worker.max_attempts,
            skills_enabled=settings.skills.enabled,
        )
        self.end = AttemptEnd(ports)

    def cancel(self, run_id: str) -> bool:
        """Cancel a run this process is executing; ``False`` if it is not here (yet)."""
        return self.runs.cancel(run_id)

    async def execute(self, item: InFlight) -> bool:
        """Execute (or recover) ``item``; return ``False`` if a newer attempt superseded ours.

        ``True`` means the run is terminal in storage (by us, or it already was).
        """
        claimed = await self.claimer.take(item)  # 1. claim
        if not isinstance(claimed, Claimed):
            return claimed  # no attempt of ours: terminal already, or superseded
        run_started(claimed.handle, kind=item.run.kind)
        progress = RunProgress(claimed.handle)
        try:
            # 2. prepare and 3. drive, as one task: whatever stops it is the attempt's ending.
            attempt = functools.partial(self._prepare_and_drive, claimed)
            ending = await drive(progress, attempt, self.runs)
            ending = await self.end.write(claimed, progress, ending)  # 4. end: written once
        except Fenced:
            return await self.end.superseded(claimed)
        await self.end.tell(claimed, progress, ending)  # … and told once it is durable
        return True

    async def _prepare_and_drive(self, claimed: Claimed, p: RunProgress) -> Ending:
        """Stages 2 and 3, run by :func:`drive` (so whatever raises here ends the run with what
        ``p`` holds so far)."""
        ready = await self.preparer.prepare(claimed, p)
        if isinstance(ready, Ending):  # the attempt ended before any loop ran
            return ready
        return await p.run_loop(
            ready.loop,
            p.path,
            turns_done=ready.turns_done,
            timeout_s=ready.timeout_s,
            rerun_calls=ready.rerun_calls,
        )
