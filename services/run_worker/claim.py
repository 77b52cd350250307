"""The claim stage of an attempt: the fenced claim, the message placed with it, and the reads
the attempt's start needs, returned as one :class:`Claimed`.

A first attempt's claim also places the run's message (``ClaimRun.place``); the reads the start
depends on (cancel flag, the session's folder, the path where the message goes, memory) travel
beside it, so a claim is one round trip. What a recovered attempt reads after the claim (where
the run stands) can only be read once the claim has fenced the lost attempt out: the prepare
stage reads it (:mod:`services.run_worker.prepare`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from agent_core.bus.contracts.refusals import FENCED
from agent_core.bus.contracts.storage import (
    ClaimRun,
    ClaimRunResult,
    GetSession,
    PlaceMessage,
    RunFence,
)
from agent_core.ids import new_id
from agent_core.observability.tracing import tracer
from agent_core.runqueue import InFlight, QueuedRun, RunEventWriter, SessionQueue
from agent_core.service import ServiceContext
from agent_core.storage_client import StorageClient
from agent_core.types.enums import Role, RunStatus
from agent_core.types.protocol import TextBlock
from agent_core.types.runtime import Node, RunHandle, RunPhase, RunStatusChanged
from services.run_worker.adapters import BusRunStore, node_drafts
from services.run_worker.endings import close_stream_of_terminal_run, end_unclaimed
from services.run_worker.memory_link import memory_text
from services.run_worker.reads import RunReads

__all__ = ["Claimed", "Claimer", "message_node", "placed_path"]

log = logging.getLogger("soong.run_worker")


@dataclass(frozen=True, slots=True)
class Claimed:
    """One claimed attempt at a run: what it writes through, and what it read while claiming
    (one round trip for all of it)."""

    item: InFlight
    handle: RunHandle
    store: BusRunStore  # fenced by (run, attempt): a superseded attempt's writes are refused
    events: RunEventWriter
    cancelled: bool  # a cancel was asked for before or while the run was claimed
    cwd: str  # the session's working directory (its project)
    placed: Node | None  # the run's message, placed by the claim (first attempts)
    above: list[Node]  # the path the message goes under (or, once placed, the path to it)
    memory: str  # what memory recalls for the run's start ("" when nothing)

    @property
    def run(self) -> QueuedRun:
        """The queued run this attempt is at."""
        return self.item.run

    def files_phase(self, max_turns: int = 1) -> RunPhase:
        """The ``files`` phase the attempt reports while its session's folder is transferred."""
        return RunPhase(
            run_id=self.handle.run_id,
            session_id=self.handle.session_id,
            agent_id=self.handle.agent_id,
            phase="files",
            turn=1,
            max_turns=max_turns,
        )


class Claimer:
    """Claims runs for one worker process."""

    def __init__(
        self, ctx: ServiceContext, storage: StorageClient, queue: SessionQueue, reads: RunReads
    ) -> None:
        self.ctx = ctx
        self.storage = storage
        self.queue = queue
        self.reads = reads

    async def take(self, item: InFlight) -> Claimed | bool:
        """The claim stage: take the next attempt number and claim that attempt at ``item`` with
        everything its start reads. ``True`` when there is no attempt to run because the run is
        terminal (cancelled while queued: ended here, unclaimed; or ended before: its stream
        closed); ``False`` when a newer attempt superseded this one."""
        run = item.run
        cancelled, number = await self.queue.claim_prelude(run.run_id)
        if cancelled and number == 1:  # cancelled while queued and never claimed: never runs
            await end_unclaimed(self.ctx, self.storage, self.queue, self.reads, run)
            return True
        with tracer().start_as_current_span("run.claim", attributes={"run.attempt": number}):
            claimed = await self.claim(item, number)
        if cancelled and isinstance(claimed, Claimed):  # the prelude saw the cancel flag
            claimed = dataclasses.replace(claimed, cancelled=True)
        return claimed

    async def claim(self, item: InFlight, number: int) -> Claimed | bool:
        """Claim attempt ``number`` at ``item`` with the reads its start needs; ``False`` if
        a newer attempt superseded it, ``True`` if the run is terminal already (stream closed)."""
        run = item.run
        fence = RunFence(run_id=run.run_id, attempt=number)
        # A first attempt's claim also places the message (under the active node of that
        # moment, or the message's parent): one write instead of two.
        place, message = None, message_node(run, run.node_parent)
        if number == 1:
            draft, event = node_drafts(message)
            place = PlaceMessage(
                node=draft, event=event, set_active=run.kind == "main", at_root=run.at_root
            )
            message = message.model_copy(update={"token_count": draft.token_count})
        # A claim that places the message returns the path to it (read in its transaction, after
        # the path this worker holds for the session): no path query beside it.
        held = self.reads.held(run.session_id) if place is not None else []
        # The claim and the reads it does not depend on travel together: one round trip.
        claim, cancelled, cwd, above, memory = await asyncio.gather(
            self.storage.send(
                ClaimRun(
                    command_id=new_id("cmd"),
                    session_id=run.session_id,
                    fence=fence,
                    place=place,
                    return_path=place is not None,
                    path_after_node_id=held[-1].node_id if held else None,
                )
            ),
            self.queue.is_cancelled(run.run_id),
            self._cwd(run),
            # Where a new message would go (the explicit parent, else the active node now), for
            # an attempt that places it itself.
            _above(self.reads, run) if place is None else _none(),
            memory_text(self.ctx, run, number),
        )
        if not claim.ok:
            # Terminal already (cancelled while queued, finished before a crash) or superseded.
            code = claim.error.code if claim.error else "refused"
            log.info("run %s not claimable: %s", run.run_id, code)
            if code in FENCED:
                return False
            await close_stream_of_terminal_run(self.ctx, self.reads, run.session_id, run.run_id)
            return True
        handle = RunHandle(
            run_id=run.run_id, session_id=run.session_id, agent_id=run.agent_id, attempt=number
        )
        events = RunEventWriter(self.ctx.bus, self.ctx.names, run.session_id, run.run_id)
        events.start()
        events.emit(
            RunStatusChanged(
                run_id=run.run_id,
                session_id=run.session_id,
                agent_id=run.agent_id,
                status=RunStatus.RUNNING,
                previous=RunStatus.QUEUED if number == 1 else RunStatus.RUNNING,
                attempt=number,
            )
        )
        store = BusRunStore(self.storage, handle, set_active=run.kind == "main")
        result = ClaimRunResult.of(claim)
        placed = result.placed
        if placed:
            message = message.model_copy(
                update={"parent_id": placed.parent_id, "node_seq": placed.node_seq}
            )
            if result.path is not None:  # from the root (or the held path's tip) to the message
                above = self.reads.extend(run.session_id, held, result.path)
        return Claimed(
            item,
            handle,
            store,
            events,
            cancelled=cancelled,
            cwd=cwd,
            placed=message if placed else None,
            above=above or [],
            memory=memory,
        )

    async def _cwd(self, run: QueuedRun) -> str:
        """The session's working directory: carried by the run, else (older runs) read."""
        if run.cwd is not None:
            return run.cwd
        session = await self.reads.read(GetSession(session_id=run.session_id))
        return session.cwd if session else ""


async def _none() -> Any:
    return None


async def _above(reads: RunReads, run: QueuedRun) -> list[Node] | None:
    """The path a new message goes under: none for a new root."""
    if run.at_root:
        return []
    return await reads.active_path(run.session_id, run.parent_node_id)


def placed_path(above: list[Node], placed: Node) -> list[Node] | None:
    """The path to a message the claim placed, from the path read beside the claim (``above``:
    to the message's parent, or — read after the claim committed — to the message itself);
    ``None`` when ``above`` leads elsewhere (the active node moved in between)."""
    tip = above[-1].node_id if above else None
    if tip == placed.node_id:
        return list(above)
    if tip == placed.parent_id:
        return [*above, placed]
    return None


def message_node(run: QueuedRun, parent_id: str | None) -> Node:
    """The run's message as its start node."""
    return Node(
        node_id=run.start_node_id,
        parent_id=parent_id,
        agent_id=run.agent_id,
        run_id=run.run_id,
        role=Role.USER,
        content=run.content or [TextBlock(text="")],
    )
