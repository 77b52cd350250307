"""How a run's end is recorded: the final timeline event type, and a stream's missing end."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from agent_core.bus.contracts.storage import GetRun, UpdateRun
from agent_core.errors import ErrorPayload, StorageError
from agent_core.ids import new_id
from agent_core.runqueue import RunEventWriter
from agent_core.runtime import AgentLoop, RunOutcome
from agent_core.service import ServiceContext
from agent_core.storage_client import StorageClient
from agent_core.types.enums import EndReason, EventLevel, EventType, RunStatus
from agent_core.types.mappers import to_run_finished, to_run_state
from agent_core.types.runtime import RunFinished, RunHandle
from agent_core.types.storage import RunRecord
from services.run_worker.reads import RunReads

if TYPE_CHECKING:  # adapters imports this module (final_event)
    from services.run_worker.adapters import BusRunStore

__all__ = [
    "FENCED_CODES",
    "FINAL_EVENT",
    "close_stream_of_terminal_run",
    "final_event",
    "loop_cancelled",
    "loop_failed",
    "record_end",
    "run_finished",
    "stored_outcome",
]

log = logging.getLogger("soong.run_worker")

# Refusals that mean: a newer attempt owns the run.
FENCED_CODES = ("stale_attempt", "unclaimed_attempt")

FINAL_EVENT = {
    RunStatus.COMPLETED: EventType.RUN_COMPLETED,
    RunStatus.FAILED: EventType.RUN_FAILED,
    RunStatus.CANCELLED: EventType.RUN_CANCELLED,
    RunStatus.ABORTED: EventType.RUN_ABORTED,
}


def final_event(outcome: RunOutcome) -> tuple[EventType, EventLevel, dict[str, Any]]:
    """Type, level and payload of the timeline event that records ``outcome``."""
    level = EventLevel.ERROR if outcome.status is RunStatus.FAILED else EventLevel.INFO
    payload: dict[str, Any] = {
        "status": outcome.status.value,
        "end_reason": outcome.end_reason.value,
        "turns": outcome.turns,
    }
    if outcome.error:
        payload["error"] = outcome.error.model_dump()
    return FINAL_EVENT[outcome.status], level, payload


def run_finished(handle: RunHandle, outcome: RunOutcome) -> RunFinished:
    """The ``run_finished`` event of ``handle``'s run ending with ``outcome``."""
    return RunFinished(
        run_id=handle.run_id,
        session_id=handle.session_id,
        agent_id=handle.agent_id,
        status=outcome.status,
        end_reason=outcome.end_reason,
        usage=outcome.usage,
        error=outcome.error,
        last_node_id=outcome.last_node_id,
    )


def loop_failed(loop: AgentLoop, error: ErrorPayload) -> RunOutcome:
    """A run that failed with ``error`` after what ``loop`` did (its usage, turns, last node)."""
    return RunOutcome(
        RunStatus.FAILED,
        EndReason.FAILED,
        usage=loop.usage,
        turns=loop.turns,
        last_node_id=loop.last_node_id,
        error=error,
    )


def loop_cancelled(loop: AgentLoop) -> RunOutcome:
    """A run a cancel stopped after what ``loop`` did: ``aborted_tools`` while tools ran,
    ``aborted_streaming`` otherwise."""
    reason = EndReason.ABORTED_TOOLS if loop.phase == "tools" else EndReason.ABORTED_STREAMING
    return RunOutcome(
        RunStatus.CANCELLED,
        reason,
        usage=loop.usage,
        turns=loop.turns,
        last_node_id=loop.last_node_id,
    )


def stored_outcome(record: dict[str, Any]) -> RunOutcome | None:
    """The outcome a run record holds, if the run has ended (``recorded``: nothing to write)."""
    state = to_run_state(RunRecord.model_validate(record))
    if not state.is_terminal or state.end_reason is None:
        return None
    return RunOutcome(
        state.status,
        state.end_reason,
        usage=state.usage,
        turns=state.turn,
        last_node_id=state.last_node_id,
        error=state.error,
        recorded=True,
    )


async def close_stream_of_terminal_run(
    ctx: ServiceContext, reads: RunReads, session_id: str, run_id: str
) -> None:
    """A worker can die after the run's final update and before its ``run_finished`` event:
    the next holder finds the run terminal and writes the missing event from the record, so
    that every stream ends and no SSE client waits forever."""
    record = await reads.query(GetRun(run_id=run_id, session_id=session_id))
    if record is None or record["status"] not in {s.value for s in FINAL_EVENT}:
        return
    events = RunEventWriter(ctx.redis, ctx.names, session_id, run_id)
    if await events.last_type() == "run_finished":
        return
    events.start()
    events.emit(to_run_finished(to_run_state(RunRecord.model_validate(record))))
    await events.close()


async def record_end(
    storage: StorageClient, reads: RunReads, store: BusRunStore, outcome: RunOutcome
) -> RunOutcome:
    """Write a run's end that no answer node recorded: the run row and its final timeline event,
    committed together (one batch). Returns the outcome to announce — the stored one if the run
    had ended already (a cancel that arrived while the answer that ended it was being written).
    Raises :class:`StorageError` with a ``FENCED_CODES`` code when a newer attempt owns the run.
    """
    handle = store.handle
    event_type, level, payload = final_event(outcome)
    receipt, _ = await asyncio.gather(
        storage.send(
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
        store.append_event(event_type, level=level, node_id=outcome.last_node_id, payload=payload),
    )
    if not receipt.ok:
        code = receipt.error.code if receipt.error else "refused"
        if code in FENCED_CODES:
            raise StorageError(code, "a newer attempt owns the run")
        record = await reads.query(GetRun(run_id=handle.run_id, session_id=handle.session_id))
        stored = stored_outcome(record) if record else None
        if stored is not None:
            return stored
        log.error("run %s: final update refused: %s", handle.run_id, code)
    return outcome
