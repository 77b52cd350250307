"""How a child run's end is told, and how child runs are ended from outside their loop (an
interrupted dispatch, a takeover of their parent): see :mod:`services.run_worker.children`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from agent_core.bus.contracts.storage import (
    ClaimRun,
    CommandReceipt,
    ListRuns,
    RunFence,
    UpdateAgent,
)
from agent_core.errors import ErrorPayload
from agent_core.ids import new_id
from agent_core.runqueue import RunEventWriter, SessionQueue
from agent_core.runtime import Ending, RunFailure, ending
from agent_core.storage_client import StorageClient
from agent_core.types.enums import EndReason, EventLevel, EventType, RunStatus
from agent_core.types.mappers import to_run_state
from agent_core.types.runtime import (
    ChildAgentResult,
    RunEnd,
    RunHandle,
    RunNodeCreated,
    RunStatusChanged,
)
from services.run_worker.adapters import BusRunStore
from services.run_worker.claim import Claimed
from services.run_worker.endings import announce, end_run
from services.run_worker.reads import RunReads

__all__ = ["announce_end", "claim_next_attempt", "end_child", "end_lost_children", "end_orphans"]

_ACTIVE = (RunStatus.QUEUED.value, RunStatus.PENDING.value, RunStatus.RUNNING.value)


async def claim_next_attempt(
    storage: StorageClient, queue: SessionQueue, session_id: str, run_id: str, agent_id: str
) -> tuple[CommandReceipt, RunHandle]:
    """Claim a new attempt at a child run (from then on, whoever held an older one can write for
    it no more): the claim's receipt and the attempt's handle."""
    number = await queue.next_attempt(run_id)
    fence = RunFence(run_id=run_id, attempt=number)
    receipt = await storage.send(
        ClaimRun(command_id=new_id("cmd"), session_id=session_id, fence=fence)
    )
    handle = RunHandle(run_id=run_id, session_id=session_id, agent_id=agent_id, attempt=number)
    return receipt, handle


async def end_child(
    storage: StorageClient,
    queue: SessionQueue,
    reads: RunReads,
    run_id: str,
    agent_id: str,
    how: tuple[RunStatus, EndReason, ErrorPayload | None],
    *,
    session_id: str,
    events: RunEventWriter | None,
    parent: BusRunStore | None,
    label: dict[str, Any],
    tool_call_id: str | None,
    own: RunEventWriter | None = None,
) -> bool:
    """End a child run from outside its loop, ``how`` (status, end reason, error): claim it with a
    new attempt (so whoever was running it can write for it no more), end it at its last stored
    node (closing tool calls it left without results), announce it. ``False`` when it could not
    be claimed (it had ended, or a newer takeover has it). ``own``: the child's stream writer,
    when this process has one (else a new one ends it).
    """
    claim, handle = await claim_next_attempt(storage, queue, session_id, run_id, agent_id)
    if not claim.ok:
        return False
    path = await reads.resume_path(session_id, run_id) or []  # read after the claim: fenced
    status, reason, error = how
    fence = RunFence(run_id=run_id, attempt=handle.attempt)
    done = await end_run(
        storage,
        reads,
        handle,
        ending(handle, path, status, reason, error=error),
        fence=fence,
        set_active=False,
    )
    if own is None:
        own = RunEventWriter(queue.bus, queue.names, session_id, run_id)
        own.start()
    await announce_end(
        storage,
        handle,
        done,
        events=events,
        parent=parent,
        label=label,
        tool_call_id=tool_call_id,
        own=own,
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
    records = await reads.read(ListRuns(session_id=session_id)) or []
    ended: list[str] = []
    for run in map(to_run_state, records):
        metadata = run.metadata
        if (
            metadata.get("kind") != "child"
            or metadata.get("parent_run_id") != parent_run_id
            or run.status not in _ACTIVE
        ):
            continue
        error = RunFailure("worker_lost", "the worker running this child run was lost")
        how = (RunStatus.FAILED, EndReason.FAILED, error.to_payload())
        label = {k: v for k, v in metadata.items() if k in ("worker", "fork_from_node_id")}
        if await end_child(
            storage,
            queue,
            reads,
            run.run_id,
            run.agent_id,
            how,
            session_id=session_id,
            events=events,
            parent=parent,
            label=label,
            tool_call_id=metadata.get("tool_call_id"),
        ):
            ended.append(run.run_id)
    return ended


async def announce_end(
    storage: StorageClient,
    child: RunHandle,
    ending: Ending,
    *,
    events: RunEventWriter | None,
    parent: BusRunStore | None,
    label: dict[str, Any],
    tool_call_id: str | None,
    metadata: dict[str, Any] | None = None,
    own: RunEventWriter | None = None,
) -> None:
    """A child's end, told: on the parent's stream (the node it ended on and a status change),
    on the child's own stream (as every run's end, which closes that stream), as the child
    agent's result (and ``metadata``, when given), and on the parent's timeline
    (``child_run_finished``, when the parent's attempt can still write)."""
    end = ending.end
    if events is not None:
        if ending.node is not None and ending.node.node_seq is not None:
            events.emit(
                RunNodeCreated(
                    run_id=child.run_id,
                    session_id=child.session_id,
                    agent_id=child.agent_id,
                    node=ending.node,
                )
            )
        events.emit(_child_ended(child, end))
    if own is not None:
        announce(own, child, ending)
    writes: list[Awaitable[Any]] = [storage.send(_agent_result(child, ending, metadata))]
    if parent is not None:
        writes.append(
            parent.append_event(
                EventType.CHILD_RUN_FINISHED,
                level=EventLevel.INFO if end.status is RunStatus.COMPLETED else EventLevel.WARNING,
                tool_call_id=tool_call_id,
                payload={
                    "child_run_id": child.run_id,
                    "agent_id": child.agent_id,
                    **label,
                    "status": end.status.value,
                    "end_reason": end.end_reason.value,
                },
            )
        )
    if own is not None:
        writes.append(own.close())
    await asyncio.gather(*writes)


def _agent_result(child: RunHandle, ending: Ending, metadata: dict[str, Any] | None) -> UpdateAgent:
    """The child agent's result (``ChildAgentResult``) after its run (its status is the end's:
    ``end_run`` set it)."""
    end = ending.end
    result = ChildAgentResult(
        agent_id=child.agent_id,
        run_id=child.run_id,
        status=end.status,
        end_reason=end.end_reason,
        text=ending.text,
        usage=end.usage,
        turns=end.turns,
        error=end.error,
    )
    return UpdateAgent(
        command_id=new_id("cmd"),
        session_id=child.session_id,
        agent_id=child.agent_id,
        result=result.model_dump(mode="json"),
        metadata=metadata,
    )


def _child_ended(child: RunHandle, end: RunEnd) -> RunStatusChanged:
    """A child's end on its parent's stream: a status change, since ``run_finished`` ends the
    stream for its readers (the child's record has the rest: ``GET /v1/runs/{id}``)."""
    return RunStatusChanged(
        run_id=child.run_id,
        session_id=child.session_id,
        agent_id=child.agent_id,
        status=end.status,
        previous=RunStatus.RUNNING,
        attempt=child.attempt,
    )


async def end_lost_children(
    storage: StorageClient, queue: SessionQueue, reads: RunReads, c: Claimed
) -> None:
    """End the child runs a recovered run's lost attempt left in flight (they ran in the process
    that is gone, or stopped)."""
    run = c.run
    await end_orphans(
        storage, queue, reads, run.session_id, run.run_id, events=c.events, parent=c.store
    )
