"""Appliers of run commands: create, claim (a new attempt) and update; a run's end is
:mod:`apply_end`'s. Status transitions are checked by :mod:`transitions`; run-scoped writes are
fenced by ``(run_id, attempt)``."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from typing import Any

from agent_core.bus.contracts.refusals import RefusalCode
from agent_core.bus.contracts.storage import (
    ClaimRun,
    ClaimRunResult,
    CreateRun,
    CreateRunResult,
    UpdateRun,
    UpdateRunResult,
)
from agent_core.types.enums import (
    TERMINAL_RUN_STATUSES,
    AgentStatus,
    EventType,
    RunStatus,
    SessionStatus,
)
from agent_core.types.runtime import SESSION_CONFIG_KEY, TimelineEvent
from services.storage_writer.apply_common import (
    AlreadyApplied,
    ApplyContext,
    check_fence,
    derived_event_id,
    dump_json,
    insert_event,
    refusal,
    run_status,
)
from services.storage_writer.transitions import CLAIMABLE, check_run_transition

__all__ = ["claim_run", "create_run", "update_run"]


def create_run(conn: sqlite3.Connection, c: CreateRun, ctx: ApplyContext) -> CreateRunResult:
    session = conn.execute(
        "SELECT account_id, root_agent_id, status, cwd, "
        f"CASE json_type(metadata_json, '$.{SESSION_CONFIG_KEY}') WHEN 'object' "
        f"THEN json_extract(metadata_json, '$.{SESSION_CONFIG_KEY}') END "
        "FROM sessions WHERE session_id = ?",
        (c.session_id,),
    ).fetchone()
    if session is None or (c.account_id is not None and session[0] != c.account_id):
        raise refusal(RefusalCode.SESSION_NOT_FOUND, "no such session", session_id=c.session_id)
    result: dict[str, Any] = {
        "run_id": c.run_id,
        "status": RunStatus(c.status),
        "attempt": 0,
        "cwd": session[3],
    }
    if session[4] is not None:  # the session's config overrides, as stored (JSON text)
        result["session_config"] = json.loads(session[4])
    if (agent_id := _created_before(conn, c)) is not None:
        raise AlreadyApplied(CreateRunResult(**result, **_agent(conn, c.session_id, agent_id)))
    if c.expires_at is not None and datetime.fromisoformat(ctx.now) > c.expires_at:
        # Its sender gave up and told its client so: a run created now would wait forever.
        raise refusal(RefusalCode.EXPIRED, "the command arrived after its sender stopped waiting")
    if session[2] == SessionStatus.ARCHIVED.value:
        raise refusal(RefusalCode.SESSION_ARCHIVED, "the session is archived; unarchive it first")
    agent = _agent(conn, c.session_id, c.agent_id or session[1])
    conn.execute(
        "INSERT INTO runs (run_id, session_id, agent_id, status, attempt, start_node_id, "
        "turn_count, metadata_json, created_at, updated_at) VALUES (?, ?, ?, ?, 0, ?, 0, ?, ?, ?)",
        (
            c.run_id,
            c.session_id,
            agent["agent_id"],
            RunStatus(c.status).value,
            c.start_node_id,
            dump_json(c.metadata),
            ctx.now,
            ctx.now,
        ),
    )
    queued = TimelineEvent(
        # Named after the run: a repeat is answered from the run row before it gets here.
        event_id=derived_event_id(f"{c.run_id}:queued"),
        event_type=EventType.RUN_QUEUED,
        agent_id=agent["agent_id"],
        run_id=c.run_id,
        payload={"status": RunStatus(c.status).value},
    )
    insert_event(conn, c.session_id, queued, ctx.now, None)
    return CreateRunResult(**result, **agent)


def _agent(conn: sqlite3.Connection, session_id: str, agent_id: str) -> dict[str, Any]:
    """The run's agent as the result names it: its id and type (``orchestrator``: the run is
    the orchestrator's of a session in orchestrator mode)."""
    row = conn.execute(
        "SELECT agent_type FROM agents WHERE agent_id = ? AND session_id = ?",
        (agent_id, session_id),
    ).fetchone()
    if row is None:
        raise refusal(
            RefusalCode.AGENT_NOT_FOUND, "no such agent in this session", agent_id=agent_id
        )
    return {"agent_id": agent_id, "agent_type": row[0]}


def _created_before(conn: sqlite3.Connection, c: CreateRun) -> str | None:
    """The agent of the run ``c`` created if it was applied before (no receipt is stored: the
    run row, named by the run id and start node id the command allocated, is the record).

    A run without a start node (a child run) is not told apart by its row: its command keeps a
    receipt (``commands.needs_receipt``), and a second command reusing its id is a conflict.
    """
    if c.start_node_id is None:
        return None  # the insert then refuses a reused run id as a conflict
    row = conn.execute(
        "SELECT session_id, start_node_id, agent_id FROM runs WHERE run_id = ?", (c.run_id,)
    ).fetchone()
    if row is None:
        return None
    if (row[0], row[1]) != (c.session_id, c.start_node_id):
        raise refusal(
            RefusalCode.CONFLICT, "the run id belongs to another command", run_id=c.run_id
        )
    return str(row[2])


def claim_run(conn: sqlite3.Connection, c: ClaimRun, ctx: ApplyContext) -> ClaimRunResult:
    """Start attempt ``c.fence.attempt`` at the run: it becomes ``running``, its agent too, and
    the timeline gets ``run_started``. Raises :class:`AlreadyApplied` (with the claim's part of the
    result) when this very command claimed it before: the run row names the command that claimed
    its current attempt, so a repeat needs no receipt."""
    row = conn.execute(
        "SELECT status, attempt, claim_command_id, agent_id FROM runs "
        "WHERE run_id = ? AND session_id = ?",
        (c.fence.run_id, c.session_id),
    ).fetchone()
    if row is None:
        raise refusal(
            RefusalCode.RUN_NOT_FOUND, "no such run in this session", run_id=c.fence.run_id
        )
    result = ClaimRunResult(
        run_id=c.fence.run_id, status=RunStatus.RUNNING, attempt=c.fence.attempt
    )
    if row[2] == c.command_id and int(row[1]) == c.fence.attempt:
        raise AlreadyApplied(result)  # (the same id naming another attempt is not a repeat)
    status, attempt = RunStatus(row[0]), int(row[1])
    if status not in CLAIMABLE:
        raise refusal(
            RefusalCode.INVALID_TRANSITION,
            f"a {status.value} run cannot be claimed",
            status=status.value,
        )
    if c.fence.attempt <= attempt:
        raise refusal(
            RefusalCode.STALE_ATTEMPT,
            f"claim by attempt {c.fence.attempt} but the run is at attempt {attempt}",
            run_id=c.fence.run_id,
            attempt=c.fence.attempt,
            current_attempt=attempt,
        )
    conn.execute(
        "UPDATE runs SET status = ?, attempt = ?, claim_command_id = ?, updated_at = ? "
        "WHERE run_id = ?",
        (RunStatus.RUNNING.value, c.fence.attempt, c.command_id, ctx.now, c.fence.run_id),
    )
    agent_id = str(row[3])
    conn.execute(
        "UPDATE agents SET status = ?, updated_at = ? WHERE agent_id = ? AND status != ?",
        (AgentStatus.RUNNING.value, ctx.now, agent_id, AgentStatus.RUNNING.value),
    )
    started = TimelineEvent(
        # Named after the claim: a repeated claim is answered before it gets here (see above).
        event_id=derived_event_id(f"{c.command_id}:{c.fence.attempt}"),
        event_type=EventType.RUN_STARTED,
        agent_id=agent_id,
        run_id=c.fence.run_id,
        payload={"attempt": c.fence.attempt},
    )
    insert_event(conn, c.session_id, started, ctx.now, None)
    return result


def update_run(conn: sqlite3.Connection, c: UpdateRun, ctx: ApplyContext) -> UpdateRunResult:
    status, attempt = run_status(conn, c.session_id, c.run_id)
    if c.fence is not None:
        if c.fence.run_id != c.run_id:
            raise refusal(
                RefusalCode.FENCE_MISMATCH, "the fence names another run", run_id=c.run_id
            )
        check_fence(conn, c.session_id, c.fence)
    target = status if c.status is None else c.status
    check_run_transition(status, target)
    if target in TERMINAL_RUN_STATUSES:
        raise refusal(RefusalCode.INVALID_TRANSITION, "a run ends through end_run only")
    # Back from waiting (``pending``) by the attempt that waited; starting is claim_run's.
    back = status == RunStatus.PENDING and c.fence is not None
    if target == RunStatus.RUNNING and status != RunStatus.RUNNING and not back:
        raise refusal(RefusalCode.INVALID_TRANSITION, "a run starts running through claim_run only")
    fields: dict[str, Any] = {"status": target.value}
    if c.end_node_id is not None:
        fields["end_node_id"] = c.end_node_id
    if c.end_reason is not None:
        fields["end_reason"] = c.end_reason.value
    if c.turn_count is not None:
        fields["turn_count"] = c.turn_count
    if c.usage is not None:
        # Zero counters are left out (most providers report no cache tokens): they read back
        # as the model's defaults.
        fields["usage_json"] = c.usage.model_dump_json(exclude_defaults=True)
    if c.error is not None:
        fields["error_json"] = c.error.model_dump_json()
    if c.metadata is not None:
        fields["metadata_json"] = dump_json(c.metadata)
    fields["updated_at"] = ctx.now
    conn.execute(
        f"UPDATE runs SET {', '.join(f'{k} = ?' for k in fields)} WHERE run_id = ?",
        (*fields.values(), c.run_id),
    )
    if target != status:  # running ⇄ pending: the timeline keeps when a run waited
        changed = TimelineEvent(
            event_id=derived_event_id(f"{c.command_id}:status"),
            event_type=EventType.RUN_STATUS_CHANGED,
            run_id=c.run_id,
            payload={"status": target.value, "previous": status.value, "attempt": attempt},
        )
        insert_event(conn, c.session_id, changed, ctx.now, None)
    return UpdateRunResult(run_id=c.run_id, status=target, attempt=attempt)
