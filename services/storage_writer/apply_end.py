"""The applier of ``end_run``: a run's end, its terminal event and the node it ends on, at once.

Every run ends through here, whoever ends it (``docs/architecture.md``, "Run lifecycle and
endings"): in one transaction the run row takes the end, the timeline gets ``run_error`` (when the
run failed with an error) and the one terminal event, the node the run ends on is written, the
run's agent goes back to ``idle`` or its end state. A run that has ended refuses every later write
(``check_fence``, ``refuse_if_ended``), a second end included, so a run has exactly one terminal
event. A repeat of the same command is recognised by its terminal event and answered as first.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from agent_core.bus.contracts.refusals import RefusalCode
from agent_core.bus.contracts.storage import (
    AppendNodeResult,
    EndRun,
    EndRunResult,
    EventPlaced,
)
from agent_core.types.enums import (
    RUN_END_EVENTS,
    AgentStatus,
    AgentType,
    EventLevel,
    EventType,
    RunStatus,
)
from agent_core.types.runtime import TimelineEvent
from services.storage_writer.apply_common import (
    AlreadyApplied,
    ApplyContext,
    check_fence,
    derived_event_id,
    insert_event,
    refusal,
    refuse_if_ended,
)
from services.storage_writer.apply_nodes import stored_node_write, write_node
from services.storage_writer.schema import events_table, nodes_table
from services.storage_writer.transitions import check_run_transition

__all__ = ["end_run"]

# A child agent's status after its run (a root agent goes back to idle).
_AGENT_END = {
    RunStatus.COMPLETED: AgentStatus.COMPLETED,
    RunStatus.FAILED: AgentStatus.FAILED,
    RunStatus.ABORTED: AgentStatus.FAILED,
    RunStatus.CANCELLED: AgentStatus.CANCELLED,
}
_ROOT_TYPES = (AgentType.MAIN.value, AgentType.ORCHESTRATOR.value)
_ACTIVE = (RunStatus.PENDING.value, RunStatus.RUNNING.value)


def end_run(conn: sqlite3.Connection, c: EndRun, ctx: ApplyContext) -> EndRunResult:
    """End run ``c.run_id`` as ``c.end`` (see :class:`EndRun`)."""
    sid = c.session_id
    row = conn.execute(
        "SELECT status, attempt, agent_id, start_node_id FROM runs "
        "WHERE run_id = ? AND session_id = ?",
        (c.run_id, sid),
    ).fetchone()
    if row is None:
        raise refusal(RefusalCode.RUN_NOT_FOUND, "no such run in this session", run_id=c.run_id)
    status, attempt, agent_id = RunStatus(row[0]), int(row[1]), str(row[2])
    if (first := _ended_before(conn, c, status, attempt)) is not None:
        raise AlreadyApplied(first)
    if c.fence is None:
        refuse_if_ended(conn, sid, c.run_id)
        if attempt != 0:
            raise refusal(
                RefusalCode.FENCE_REQUIRED,
                "a run that was claimed is ended by its current attempt only",
                run_id=c.run_id,
                attempt=attempt,
            )
    else:
        if c.fence.run_id != c.run_id:
            raise refusal(
                RefusalCode.FENCE_MISMATCH, "the fence names another run", run_id=c.run_id
            )
        check_fence(conn, sid, c.fence)
    check_run_transition(status, c.end.status)
    node: AppendNodeResult | None = None
    if c.node is not None and c.node_event is not None:
        if c.node.run_id != c.run_id:
            raise refusal(
                RefusalCode.FENCE_MISMATCH, "the node belongs to another run", run_id=c.run_id
            )
        node = write_node(conn, sid, c.node, c.node_event, ctx, set_active=c.set_active)
    end = c.end
    conn.execute(
        "UPDATE runs SET status = ?, end_reason = ?, turn_count = ?, usage_json = ?, "
        "error_json = ?, end_node_id = coalesce(?, end_node_id), updated_at = ? WHERE run_id = ?",
        (
            end.status.value,
            end.end_reason.value,
            end.turns,
            # Zero counters are left out (most providers report no cache tokens): they read
            # back as the model's defaults.
            end.usage.model_dump_json(exclude_defaults=True),
            None if end.error is None else end.error.model_dump_json(),
            end.last_node_id,
            ctx.now,
            c.run_id,
        ),
    )
    _count_usage(conn, sid, c, ctx.now)
    _agent_after(conn, sid, agent_id, c.run_id, end.status, ctx.now)
    if c.withdraw:
        _withdraw(conn, sid, c.run_id, row[3], ctx.now)
    if end.error is not None and end.status is RunStatus.FAILED:
        error = _event(c, agent_id, EventType.RUN_ERROR, {"error": end.error.model_dump()})
        insert_event(conn, sid, error, ctx.now, None)
    event = insert_event(conn, sid, _terminal_event(c, agent_id), ctx.now, None)
    fields: dict[str, Any] = {} if node is None else {"node": node}
    return EndRunResult(
        run_id=c.run_id, status=c.end.status, attempt=attempt, event=event, **fields
    )


def _count_usage(conn: sqlite3.Connection, sid: str, c: EndRun, now: str) -> None:
    """Add the run's usage to the kept totals of its session, account, day and model (a run
    that used no token adds nothing). In the end's transaction: a run is counted exactly once."""
    u = c.end.usage
    if not (u.input_tokens or u.output_tokens or u.cache_read_tokens or u.cache_write_tokens):
        return
    conn.execute(
        "INSERT INTO usage_totals (account_id, day, model, session_id, runs, input_tokens, "
        "output_tokens, cache_read_tokens, cache_write_tokens) "
        "SELECT account_id, ?, ?, session_id, 1, ?, ?, ?, ? FROM sessions WHERE session_id = ? "
        "ON CONFLICT DO UPDATE SET runs = runs + 1, "
        "input_tokens = input_tokens + excluded.input_tokens, "
        "output_tokens = output_tokens + excluded.output_tokens, "
        "cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens, "
        "cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens",
        (
            now[:10],
            c.model or "unknown",
            u.input_tokens,
            u.output_tokens,
            u.cache_read_tokens,
            u.cache_write_tokens,
            sid,
        ),
    )


def _terminal_event(c: EndRun, agent_id: str) -> TimelineEvent:
    end = c.end
    payload: dict[str, Any] = {
        "status": end.status.value,
        "end_reason": end.end_reason.value,
        "turns": end.turns,
        "usage": end.usage.model_dump(exclude_defaults=True),
    }
    if end.error is not None:
        payload["error"] = end.error.model_dump()
    draft = _event(c, agent_id, RUN_END_EVENTS[end.status], payload)
    return draft.model_copy(update={"event_id": c.event_id})


def _event(
    c: EndRun, agent_id: str, event_type: EventType, payload: dict[str, Any]
) -> TimelineEvent:
    level = EventLevel.ERROR if c.end.status is RunStatus.FAILED else EventLevel.INFO
    return TimelineEvent(
        event_id=derived_event_id(c.event_id),
        event_type=event_type,
        level=level,
        agent_id=agent_id,
        run_id=c.run_id,
        node_id=c.end.last_node_id,
        payload=payload,
    )


def _agent_after(
    conn: sqlite3.Connection, sid: str, agent_id: str, run_id: str, status: RunStatus, now: str
) -> None:
    """The run's agent after the run: ``idle`` (a root agent) or its end state (a child agent),
    unless another run of it is still active (a root agent's branch runs run side by side)."""
    busy = conn.execute(
        "SELECT 1 FROM runs WHERE session_id = ? AND agent_id = ? AND run_id != ? "
        f"AND status IN ({', '.join('?' * len(_ACTIVE))}) LIMIT 1",
        (sid, agent_id, run_id, *_ACTIVE),
    ).fetchone()
    if busy is not None:
        return
    conn.execute(
        "UPDATE agents SET status = CASE WHEN agent_type IN (?, ?) THEN ? ELSE ? END, "
        "updated_at = ? WHERE agent_id = ? AND session_id = ?",
        (*_ROOT_TYPES, AgentStatus.IDLE.value, _AGENT_END[status].value, now, agent_id, sid),
    )


def _withdraw(
    conn: sqlite3.Connection, sid: str, run_id: str, start_node_id: str | None, now: str
) -> None:
    """The session's active node, if it is one of the run's nodes, goes back to the parent of
    the run's start node (the run was cancelled before it stored anything after its message)."""
    nodes = nodes_table(sid)
    conn.execute(
        f"UPDATE sessions SET active_node_id = (SELECT parent_id FROM {nodes} WHERE node_id = ?), "
        f"updated_at = ? WHERE session_id = ? AND active_node_id IN "
        f"(SELECT node_id FROM {nodes} WHERE run_id = ?)",
        (start_node_id, now, sid, run_id),
    )


def _ended_before(
    conn: sqlite3.Connection, c: EndRun, status: RunStatus, attempt: int
) -> EndRunResult | None:
    """The first result of ``c`` if it was applied (its terminal event is the run's), else None."""
    row = conn.execute(
        f"SELECT seq, run_seq, run_id FROM {events_table(c.session_id)} WHERE event_id = ?",
        (c.event_id,),
    ).fetchone()
    if row is None:
        return None
    if row[2] != c.run_id:
        raise refusal(
            RefusalCode.CONFLICT, "the event id belongs to another command", event_id=c.event_id
        )
    fields: dict[str, Any] = {}
    if c.node is not None and c.node_event is not None:
        node_id = c.node.node_id
        placed = stored_node_write(conn, c.session_id, node_id, c.node_event.event_id)
        if placed is None:  # the end was applied, so its answer must be stored with it
            raise refusal(
                RefusalCode.CONFLICT, "the node id belongs to another command", node_id=node_id
            )
        fields["node"] = placed
    event_placed = EventPlaced(event_id=c.event_id, seq=row[0], run_seq=row[1])
    return EndRunResult(
        run_id=c.run_id, status=status, attempt=attempt, event=event_placed, **fields
    )
