"""Submitting a user message: its run (queued, durable) and the run's place in the session FIFO.

The message becomes a node when its run starts (see :class:`QueuedRun`); its id is allocated
here, so the caller can name the node at once.

Used by the gateway (and by tests and benchmarks that speak to the bus directly). The multitask
strategy decides what happens while a main run of the session is active: ``enqueue`` waits its
turn, ``reject`` refuses, ``interrupt`` cancels what is active or queued first, ``branch`` waits its
turn too (one main run per session at a time) and then starts a new branch: its message goes under
the node the work ahead of it started from, beside that work's messages, not after its answers.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from agent_core.bus.contracts.refusals import NO_SESSION
from agent_core.bus.contracts.storage import (
    CreateRun,
    CreateRunResult,
    EndRun,
    GetNode,
    GetRun,
    GetSession,
)
from agent_core.errors import AgentCoreError, StorageError
from agent_core.ids import derived_id, new_id
from agent_core.observability.runs import run_ended
from agent_core.observability.tracing import TRACEPARENT, trace_headers
from agent_core.runqueue.events import RunEventWriter
from agent_core.runqueue.fifo import SessionQueue
from agent_core.storage_client import StorageClient
from agent_core.types.api import ROOT_PARENT
from agent_core.types.enums import AgentType, EndReason, MultitaskStrategy, RunStatus
from agent_core.types.protocol import ContentBlock
from agent_core.types.queued import QueuedRun
from agent_core.types.runtime import (
    RunEnd,
    RunFinished,
    RunHandle,
    merge_overrides,
    overrides_from,
)
from agent_core.types.storage import RunRecord

__all__ = ["SessionBusyError", "Submitted", "cancel_queued_run", "cancel_run", "submit_message"]


log = logging.getLogger("soong.runqueue")


class SessionBusyError(AgentCoreError):
    """A main run is active and the strategy was ``reject``."""

    error_type = "conflict"


# Refusals that mean "no session of yours by that id" (a hostile id never was one).


@dataclass(frozen=True, slots=True)
class Submitted:
    """What a submission created."""

    run_id: str
    node_id: str
    kind: str


async def submit_message(
    storage: StorageClient,
    queue: SessionQueue,
    *,
    account_id: str,
    session_id: str,
    content: list[ContentBlock],
    parent_node_id: str | None = None,
    strategy: MultitaskStrategy = MultitaskStrategy.ENQUEUE,
    config_overrides: dict[str, Any] | None = None,
    idempotency_key: str | None = None,
) -> Submitted:
    """Append the user's node and queue a run for it; see the module docstring for strategies.

    The run's config overrides are the session's stored ones with ``config_overrides`` on top.
    With ``idempotency_key`` (the client's ``Idempotency-Key``) the run's ids derive from the
    account, the session and the key, so a repeat of the request (a retry after an error or a
    lost answer) returns the run the first one recorded, whatever its content, instead of making
    a second one. A run the first request recorded but could not queue (the bus failed between
    the two) is queued again by the run-workers' reconciler.
    Raises :class:`SessionBusyError` for ``reject`` on a busy session and :class:`StorageError`
    (``not_found``) when the session is not the account's, ``session_archived`` when it is
    archived.
    """
    not_found = StorageError("not_found", "no such session", details={"session_id": session_id})
    kind = "main"
    if idempotency_key is None:
        node_id, run_id, command_id = new_id("node"), new_id("run"), new_id("cmd")
    else:
        parts = (account_id, session_id, idempotency_key)
        node_id, run_id = derived_id("node", *parts), derived_id("run", *parts)
        command_id = derived_id("cmd", *parts)
        if (before := await _recorded(storage, account_id, session_id, run_id)) is not None:
            return Submitted(run_id, before.start_node_id or node_id, kind)
    if strategy is not MultitaskStrategy.ENQUEUE:
        fork_at = await _apply_strategy(storage, queue, account_id, session_id, strategy, not_found)
        if parent_node_id is None:
            parent_node_id = fork_at
    # One command checks the owner, picks the root agent and records the run (a round trip less
    # than reading the session first: submitting is on every turn's path).
    receipt = await storage.send(
        CreateRun(
            command_id=command_id,
            session_id=session_id,
            account_id=account_id,
            run_id=run_id,
            start_node_id=node_id,
            metadata=_run_metadata(kind, strategy, parent_node_id, content),
            expires_at=_expiry(storage),
        )
    )
    if not receipt.ok and receipt.error is not None and receipt.error.code in NO_SESSION:
        raise not_found
    result = CreateRunResult.of(receipt)
    # The session's stored overrides, then the message's: read by the same command.
    overrides = merge_overrides(overrides_from(result.session_config), config_overrides or {})
    await queue.enqueue(
        QueuedRun(
            run_id=run_id,
            session_id=session_id,
            account_id=account_id,
            agent_id=result.agent_id,
            start_node_id=node_id,
            content=content,
            parent_node_id=parent_node_id,
            kind=kind,
            strategy=strategy,
            config_overrides=overrides,
            cwd=result.cwd,
            agent_type="orchestrator" if result.agent_type is AgentType.ORCHESTRATOR else "main",
            trace_parent=trace_headers().get(TRACEPARENT),
        )
    )
    return Submitted(run_id, node_id, kind)


async def _recorded(
    storage: StorageClient, account_id: str, session_id: str, run_id: str
) -> RunRecord | None:
    """The run ``run_id`` if an earlier request recorded it in the account's session."""
    return await storage.read(GetRun(run_id=run_id, session_id=session_id, account_id=account_id))


def _expiry(storage: StorageClient) -> datetime | None:
    """When the writer must no longer create the run: a little before this sender gives up, so
    that a run created in time is answered before the sender stops listening."""
    budget = storage.gives_up_after_s
    if budget is None:
        return None
    margin = min(1.0, storage.timeout_s / 2)
    return datetime.now(UTC) + timedelta(seconds=budget - margin)


def _run_metadata(
    kind: str, strategy: MultitaskStrategy, parent_node_id: str | None, content: list[ContentBlock]
) -> dict[str, Any]:
    return {
        "kind": kind,
        "strategy": strategy.value,
        "parent_node_id": parent_node_id,
        # The accepted message's durable copy until the claim places it as a node (the writer
        # then drops it from here: stored once).
        "message": [b.model_dump(mode="json") for b in content],
    }


async def _apply_strategy(
    storage: StorageClient,
    queue: SessionQueue,
    account_id: str,
    session_id: str,
    strategy: MultitaskStrategy,
    not_found: StorageError,
) -> str | None:
    """Refuse or interrupt under ``strategy`` (not ``enqueue``); for ``branch`` on a busy session,
    the node the new branch starts from (``None``: under the active node, as ``enqueue``).

    These look at (and may cancel) the session's runs, so the owner is checked before anything.
    """
    # The run ahead is read before the session: if its message is not placed yet when looked
    # for below, it was not placed when the session was read either, so the active node read
    # then is where that run starts (no run of the session was writing in between).
    ahead = await _first_ahead(queue, session_id) if strategy is MultitaskStrategy.BRANCH else None
    reply = await storage.query(GetSession(session_id=session_id, account_id=account_id))
    if not reply.ok or not reply.data:
        raise not_found
    busy = ahead is not None or await queue.is_busy(session_id)
    if busy and strategy is MultitaskStrategy.REJECT:
        raise SessionBusyError("session_busy", "a run of this session is active")
    if busy and strategy is MultitaskStrategy.INTERRUPT:
        await _interrupt(queue, session_id)
    if ahead is None:
        return None
    if ahead.parent_node_id is not None:
        return ahead.parent_node_id
    placed = await storage.read(
        GetNode(session_id=session_id, node_id=ahead.start_node_id, account_id=account_id)
    )
    if placed is not None:
        return placed.parent_id or ROOT_PARENT
    session = GetSession(session_id=session_id).reply_of(reply)
    # (``None`` only for a session gone meanwhile: the run's creation then refuses it.)
    return (session.active_node_id or ROOT_PARENT) if session is not None else None


async def _first_ahead(queue: SessionQueue, session_id: str) -> QueuedRun | None:
    """The main run that executes first from now: the one in flight, else the oldest queued."""
    flying = await queue.in_flight(session_id)
    if flying is not None:
        return flying.run
    queued = await queue.queued(session_id)
    return queued[0] if queued else None


async def _interrupt(queue: SessionQueue, session_id: str) -> None:
    # The runs a newer message displaces end ``aborted``, not ``cancelled``: nobody cancelled them.
    for queued in await queue.queued(session_id):
        await queue.request_cancel(queued.run_id, interrupt=True)
    active = await queue.in_flight(session_id)
    if active is not None:
        await queue.request_cancel(active.run.run_id, interrupt=True)


async def cancel_queued_run(
    storage: StorageClient, queue: SessionQueue, *, session_id: str, run_id: str, agent_id: str
) -> bool:
    """End a run that no attempt claimed as ``cancelled`` / ``aborted_streaming`` (``aborted``
    when a newer message interrupted it; it never ran, its message never became a node) and end
    its event stream.

    Returns ``False`` when the run is no longer unclaimed (it started, or already ended): the
    writer refuses the end and nothing changes.
    """
    status = RunStatus.ABORTED if await queue.interrupted(run_id) else RunStatus.CANCELLED
    end = RunEnd(status=status, end_reason=EndReason.ABORTED_STREAMING)
    receipt = await storage.send(
        EndRun(
            command_id=new_id("cmd"),
            session_id=session_id,
            run_id=run_id,
            end=end,
            event_id=new_id("evt"),
        )
    )
    if not receipt.ok:
        return False
    handle = RunHandle(run_id=run_id, session_id=session_id, agent_id=agent_id)
    run_ended(handle, end)  # told once, with the end reason it was recorded with
    events = RunEventWriter(queue.bus, queue.names, session_id, run_id)
    events.start()
    events.emit(RunFinished.of(handle, end))
    await events.close()
    return True


async def cancel_run(
    storage: StorageClient, queue: SessionQueue, *, session_id: str, run_id: str
) -> str:
    """Cancel a run wherever it is: ``"cancelled"`` if it was still queued (it never runs),
    ``"signalled"`` if it may be running (its worker stops it within a second and records
    ``aborted_streaming`` / ``aborted_tools``). Either way the flag stays set, so a run that is
    between the FIFO and its worker is cancelled when the worker reaches it."""
    await queue.request_cancel(run_id)
    for lane in (session_id, f"{session_id}.{run_id}"):
        queued = await queue.take_queued(lane, run_id)
        if queued is not None:
            await cancel_queued_run(
                storage, queue, session_id=session_id, run_id=run_id, agent_id=queued.agent_id
            )
            return "cancelled"
    return "signalled"
