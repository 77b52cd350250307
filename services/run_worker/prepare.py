"""The prepare stage of a claimed attempt: where it starts, whether it runs at all, and its loop.

Runs under :func:`agent_core.runtime.drive` (as the drive stage does), so whatever raises here
ends the run with what the attempt's :class:`RunProgress` holds so far. In order: a recovered
attempt ends the child runs its lost attempt left in flight, then reads where the run stands (only
now: the claim has fenced the lost attempt out); a first attempt's message is placed (by the
claim, or now); an attempt past ``run_worker.max_attempts``, a run cancelled while it was being
claimed and an account without budget end here; the session's files are brought to this host;
the loop is built; a recovered run decides where it resumes (its answer was stored: it completes;
tools with side effects were cut off: it fails), a new main run gets memory and the skill a
``/<name>`` message invokes.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_core.runtime import AgentLoop, Ending, RunFailure, RunProgress, resume_point
from agent_core.types.enums import EndReason, RunStatus
from agent_core.types.runtime import Node, RunEnd, RunNodeCreated
from services.run_worker.adapters import WorkerToolRunner
from services.run_worker.budgets import AccountBudgets
from services.run_worker.child_endings import end_lost_children
from services.run_worker.claim import Claimed, message_node, placed_path
from services.run_worker.loop_setup import LoopSetup
from services.run_worker.ports import AttemptPorts, AttemptStage

__all__ = ["Preparer", "Ready"]


@dataclass(frozen=True, slots=True)
class Ready:
    """A prepared attempt: its loop, and how it runs from the path its progress stands on."""

    loop: AgentLoop
    turns_done: int  # turns a lost attempt completed (a recovered run counts on from them)
    rerun_calls: bool  # run the last turn's (repeatable) tool calls again
    timeout_s: float | None  # the run's wall-clock budget


class Preparer(AttemptStage):
    """Prepares the claimed attempts of one worker process."""

    def __init__(
        self,
        ports: AttemptPorts,
        loops: LoopSetup,
        budgets: AccountBudgets,
        *,
        max_attempts: int,
        skills_enabled: bool,
    ) -> None:
        super().__init__(ports)
        self.loops = loops
        self.budgets = budgets
        self.max_attempts = max_attempts
        self.skills_enabled = skills_enabled

    async def prepare(self, c: Claimed, p: RunProgress) -> Ready | Ending:
        """The attempt's loop, ready to run from ``p.path``; or the attempt's ending when it ends
        before any loop runs. Keeps ``p`` (path, turns) up to date as it goes."""
        run = c.run
        recovered = c.handle.attempt > 1
        if recovered:
            await end_lost_children(self.storage, self.queue, self.reads, c)
        p.path = await self._start_path(c)
        if c.handle.attempt > self.max_attempts:
            lost = c.handle.attempt - 1
            error = RunFailure(
                "attempts_exhausted",
                f"the run lost its worker {lost} times; it is not tried again",
                details={"attempts": lost, "max_attempts": self.max_attempts},
            )
            return p.failed(error.to_payload())
        if c.cancelled:  # cancelled while it was being claimed
            return p.cancelled()
        config = self.setup.config(run.config_overrides)
        # The session's files on this host's disk before any tool can need them.
        await self.mirrors.hydrate(
            run.account_id, run.session_id, c.events, c.files_phase(config.max_turns)
        )
        if self.skills_enabled:  # the account's skills, for the scan below
            await self.mirrors.hydrate_skills(
                run.account_id, c.events, c.files_phase(config.max_turns)
            )
        account = await self.budgets.of(run.account_id)
        if account is not None and account.exhausted_by():  # nothing left: no model call
            return p.ending(RunStatus.FAILED, EndReason.BUDGET_EXHAUSTED, error=account.error())
        skills = self.skills.run_skills(run, c.cwd, p.path, config)
        mcp = await self.loops.mcp_tools(config)
        timeout_s = config.budget.max_wall_clock_s
        if recovered:
            loop = self.loops.build(c, config, skills, mcp, account)
            return self._resume(c, p, loop, timeout_s)
        if run.kind == "main":  # memory, and the skill a `/<name>` message invokes
            for node in await self.skills.first_nodes(run, c.handle, p.path, skills, c.memory):
                p.path.append(await self._append(c, node))
        loop = self.loops.build(c, config, skills, mcp, account)
        return Ready(loop, turns_done=0, rerun_calls=False, timeout_s=timeout_s)

    @staticmethod
    def _resume(
        c: Claimed, p: RunProgress, loop: AgentLoop, timeout_s: float | None
    ) -> Ready | Ending:
        """Where a recovered run goes on from the node it stands on: it runs on (its last
        turn's tool calls again when all are repeatable), completes (its answer was stored), or
        fails (tools with side effects were cut off: their results are unknown)."""
        tools = loop.tools
        repeatable = tools.repeatable if isinstance(tools, WorkerToolRunner) else None
        point = resume_point(p.path, c.run.run_id, repeatable)
        p.turns = point.turns_done
        if point.action == "complete":  # its answer was stored: only its end was not
            end = RunEnd(
                status=RunStatus.COMPLETED,
                end_reason=EndReason.COMPLETED,
                turns=point.turns_done,
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
        rerun = point.action == "rerun"
        return Ready(loop, turns_done=point.turns_done, rerun_calls=rerun, timeout_s=timeout_s)

    async def _start_path(self, c: Claimed) -> list[Node]:
        """The path the attempt starts on: to the run's last stored node when an earlier attempt
        stored one; else to its message (placed by the claim, or now)."""
        run = c.run
        if c.handle.attempt > 1:
            stored = await self.reads.resume_path(run.session_id, run.run_id)
            if stored is not None:
                return stored
        if c.placed is not None:  # placed by the claim: only its path is put together
            self._announce(c, c.placed)
            path = placed_path(c.above, c.placed)
            if path is None:  # the active node moved between the read and the claim
                path = await self.reads.path(run.session_id, c.placed.node_id)
            return path
        if run.node_parent and not c.above:
            raise RunFailure("invalid_parent", "the message's parent node is not in this session")
        # The message becomes a node now, after whatever ran before it.
        node = message_node(run, c.above[-1].node_id if c.above else None)
        return [*c.above, await self._append(c, node)]

    async def _append(self, c: Claimed, node: Node) -> Node:
        stored = await c.store.append_node(node)
        self._announce(c, stored)
        return stored

    @staticmethod
    def _announce(c: Claimed, node: Node) -> None:
        c.events.emit(
            RunNodeCreated(
                run_id=c.handle.run_id,
                session_id=c.handle.session_id,
                agent_id=c.handle.agent_id,
                node=node,
            )
        )
