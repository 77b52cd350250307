"""How a run's end is recorded: the final timeline event type, and a stream's missing end."""

from __future__ import annotations

from typing import Any

from agent_core.bus.contracts.storage import GetRun
from agent_core.runqueue import RunEventWriter
from agent_core.runtime import RunOutcome
from agent_core.service import ServiceContext
from agent_core.types.enums import EventLevel, EventType, RunStatus
from agent_core.types.mappers import to_run_finished, to_run_state
from agent_core.types.storage import RunRecord
from services.run_worker.reads import RunReads

__all__ = ["FINAL_EVENT", "close_stream_of_terminal_run", "final_event", "stored_outcome"]

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
