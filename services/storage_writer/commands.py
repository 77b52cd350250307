"""How each storage command changes one shard; called inside the writer's savepoint per command.

Every applier either returns the command's result (what goes into its receipt) or raises
:class:`StorageError` with a stable code, in which case the writer rolls the savepoint back, so a
refused command changes no row. Values always travel as bound parameters; the only identifiers
built from input are the per-session table names, which :mod:`schema` refuses unless the session
id is one the core could have generated.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_core.bus.contracts.storage import (
    AppendEvent,
    AppendNode,
    ClaimRun,
    CreateAgent,
    CreateArtifact,
    CreateRun,
    CreateSession,
    EventDraft,
    RunFence,
    StorageCommand,
    SwitchActiveNode,
    UpdateAgent,
    UpdateRun,
    UpdateSession,
)
from agent_core.errors import StorageError
from agent_core.types.enums import AgentStatus, AgentType, EventType, RunStatus, SessionStatus
from agent_core.types.protocol import CONTENT_BLOCKS
from agent_core.types.runtime import SESSION_CONFIG_KEY
from services.storage_writer.artifacts import offload_large_json
from services.storage_writer.schema import create_session_tables, events_table, nodes_table
from services.storage_writer.transitions import CLAIMABLE, check_run_transition

__all__ = ["ApplyContext", "apply_command"]

FaultHook = Callable[[str], None]


@dataclass
class ApplyContext:
    """What appliers need besides the connection: the batch's clock, files and the fault hook."""

    now: str
    data_dir: Path
    json_threshold_bytes: int
    fault: FaultHook | None = None

    def fault_point(self, name: str) -> None:
        """Call the injected fault hook (tests only; ``None`` in production)."""
        if self.fault is not None:
            self.fault(name)


def _dump(value: Any) -> str | None:
    if value is None or value == {}:
        return None
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _err(code: str, message: str, **details: Any) -> StorageError:
    return StorageError(code, message, details=details)


def _session(conn: sqlite3.Connection, session_id: str) -> None:
    row = conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    if row is None:
        raise _err("session_not_found", "no such session", session_id=session_id)


def _run(conn: sqlite3.Connection, session_id: str, run_id: str) -> tuple[RunStatus, int]:
    row = conn.execute(
        "SELECT status, attempt FROM runs WHERE run_id = ? AND session_id = ?",
        (run_id, session_id),
    ).fetchone()
    if row is None:
        raise _err("run_not_found", "no such run in this session", run_id=run_id)
    return RunStatus(row[0]), int(row[1])


def _check_fence(conn: sqlite3.Connection, session_id: str, fence: RunFence | None) -> None:
    """Refuse a write from an attempt other than the run's current one (ARCHITECTURE §5)."""
    if fence is None:
        return
    _, attempt = _run(conn, session_id, fence.run_id)
    if fence.attempt < attempt:
        raise _err(
            "stale_attempt",
            f"attempt {fence.attempt} of the run was superseded by attempt {attempt}",
            run_id=fence.run_id,
            attempt=fence.attempt,
            current_attempt=attempt,
        )
    if fence.attempt > attempt:
        raise _err(
            "unclaimed_attempt",
            f"attempt {fence.attempt} never claimed the run (current attempt {attempt})",
            run_id=fence.run_id,
            attempt=fence.attempt,
            current_attempt=attempt,
        )


def _insert_event(
    conn: sqlite3.Connection, session_id: str, event: EventDraft, now: str, node_id: str | None
) -> dict[str, Any]:
    run_seq: int | None = None
    if event.run_id is not None:
        (last,) = conn.execute(
            f"SELECT max(run_seq) FROM {events_table(session_id)} WHERE run_id = ?",
            (event.run_id,),
        ).fetchone()
        run_seq = (last or 0) + 1
    # seq is the rowid: NULL makes SQLite allocate max(seq)+1 — gap-free because rows are never
    # deleted and only this writer inserts.
    cur = conn.execute(
        f"INSERT INTO {events_table(session_id)} (seq, event_id, run_seq, agent_id, run_id, level, "
        "event_type, node_id, tool_call_id, payload_json, created_at) "
        "VALUES (NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            event.event_id,
            run_seq,
            event.agent_id,
            event.run_id,
            event.level.value,
            event.event_type.value,
            node_id if event.node_id is None else event.node_id,
            event.tool_call_id,
            _dump(event.payload),
            now,
        ),
    )
    return {"event_id": event.event_id, "seq": cur.lastrowid, "run_seq": run_seq}


# ------------------------------------------------------------------------------ sessions


def _create_session(
    conn: sqlite3.Connection, c: CreateSession, ctx: ApplyContext
) -> dict[str, Any]:
    exists = conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (c.session_id,)).fetchone()
    if exists is not None:
        raise _err("session_exists", "a session with this id exists", session_id=c.session_id)
    conn.execute(
        "INSERT INTO sessions (session_id, account_id, cwd, root_agent_id, active_node_id, "
        "parent_session_id, status, metadata_json, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, NULL, ?, ?, ?, ?, ?)",
        (
            c.session_id,
            c.account_id,
            c.cwd,
            c.root_agent_id,
            c.parent_session_id,
            SessionStatus.ACTIVE.value,
            _dump(c.metadata),
            ctx.now,
            ctx.now,
        ),
    )
    create_session_tables(conn, c.session_id)
    conn.execute(
        "INSERT INTO agents (agent_id, session_id, parent_agent_id, agent_type, status, "
        "created_at, updated_at) VALUES (?, ?, NULL, ?, ?, ?, ?)",
        (
            c.root_agent_id,
            c.session_id,
            AgentType.MAIN.value,
            AgentStatus.IDLE.value,
            ctx.now,
            ctx.now,
        ),
    )
    event = EventDraft(
        event_id="evt_" + c.session_id.removeprefix("sess_"),
        event_type=EventType.SESSION_CREATED,
        agent_id=c.root_agent_id,
    )
    ev = _insert_event(conn, c.session_id, event, ctx.now, None)
    return {"session_id": c.session_id, "created_at": ctx.now, **ev}


def _update_session(
    conn: sqlite3.Connection, c: UpdateSession, ctx: ApplyContext
) -> dict[str, Any]:
    _session(conn, c.session_id)
    if c.status is not None:
        conn.execute(
            "UPDATE sessions SET status = ?, updated_at = ? WHERE session_id = ?",
            (c.status.value, ctx.now, c.session_id),
        )
    if c.metadata is not None:
        conn.execute(
            "UPDATE sessions SET metadata_json = ?, updated_at = ? WHERE session_id = ?",
            (_dump(c.metadata), ctx.now, c.session_id),
        )
    return {"session_id": c.session_id, "updated_at": ctx.now}


def _switch_active(
    conn: sqlite3.Connection, c: SwitchActiveNode, ctx: ApplyContext
) -> dict[str, Any]:
    _session(conn, c.session_id)
    row = conn.execute(
        f"SELECT node_seq FROM {nodes_table(c.session_id)} WHERE node_id = ?", (c.node_id,)
    ).fetchone()
    if row is None:
        raise _err("node_not_found", "the target is not a node of this session", node_id=c.node_id)
    conn.execute(
        "UPDATE sessions SET active_node_id = ?, updated_at = ? WHERE session_id = ?",
        (c.node_id, ctx.now, c.session_id),
    )
    return {"session_id": c.session_id, "active_node_id": c.node_id}


# ------------------------------------------------------------------------------ agents


def _create_agent(conn: sqlite3.Connection, c: CreateAgent, ctx: ApplyContext) -> dict[str, Any]:
    _session(conn, c.session_id)
    conn.execute(
        "INSERT INTO agents (agent_id, session_id, parent_agent_id, agent_type, created_by_run_id, "
        "fork_from_node_id, status, metadata_json, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            c.agent_id,
            c.session_id,
            c.parent_agent_id,
            c.agent_type.value,
            c.created_by_run_id,
            c.fork_from_node_id,
            AgentStatus.IDLE.value,
            _dump(c.metadata),
            ctx.now,
            ctx.now,
        ),
    )
    return {"agent_id": c.agent_id, "created_at": ctx.now}


def _update_agent(conn: sqlite3.Connection, c: UpdateAgent, ctx: ApplyContext) -> dict[str, Any]:
    _check_fence(conn, c.session_id, c.fence)
    sets: list[str] = []
    args: list[Any] = []
    if c.status is not None:
        sets.append("status = ?")
        args.append(c.status.value)
    if c.result is not None:
        sets.append("result_json = ?")
        args.append(_dump(c.result) or "{}")
    if c.metadata is not None:
        sets.append("metadata_json = ?")
        args.append(_dump(c.metadata))
    cur = conn.execute(
        f"UPDATE agents SET {', '.join([*sets, 'updated_at = ?'])} "
        "WHERE agent_id = ? AND session_id = ?",
        (*args, ctx.now, c.agent_id, c.session_id),
    )
    if cur.rowcount == 0:
        raise _err("agent_not_found", "no such agent in this session", agent_id=c.agent_id)
    return {"agent_id": c.agent_id, "updated_at": ctx.now}


# ------------------------------------------------------------------------------ runs


def _create_run(conn: sqlite3.Connection, c: CreateRun, ctx: ApplyContext) -> dict[str, Any]:
    session = conn.execute(
        "SELECT account_id, root_agent_id, status, cwd, "
        f"CASE json_type(metadata_json, '$.{SESSION_CONFIG_KEY}') WHEN 'object' "
        f"THEN json_extract(metadata_json, '$.{SESSION_CONFIG_KEY}') END "
        "FROM sessions WHERE session_id = ?",
        (c.session_id,),
    ).fetchone()
    if session is None or (c.account_id is not None and session[0] != c.account_id):
        raise _err("session_not_found", "no such session", session_id=c.session_id)
    if session[2] == SessionStatus.ARCHIVED.value:
        raise _err("session_archived", "the session is archived; unarchive it first")
    agent_id = c.agent_id or session[1]
    agent = conn.execute(
        "SELECT 1 FROM agents WHERE agent_id = ? AND session_id = ?", (agent_id, c.session_id)
    ).fetchone()
    if agent is None:
        raise _err("agent_not_found", "no such agent in this session", agent_id=agent_id)
    conn.execute(
        "INSERT INTO runs (run_id, session_id, agent_id, status, attempt, start_node_id, "
        "turn_count, metadata_json, created_at, updated_at) VALUES (?, ?, ?, ?, 0, ?, 0, ?, ?, ?)",
        (
            c.run_id,
            c.session_id,
            agent_id,
            RunStatus(c.status).value,
            c.start_node_id,
            _dump(c.metadata),
            ctx.now,
            ctx.now,
        ),
    )
    result = {
        "run_id": c.run_id,
        "agent_id": agent_id,
        "status": RunStatus(c.status).value,
        "attempt": 0,
        "cwd": session[3],
    }
    if session[4] is not None:  # the session's config overrides, as stored (JSON text)
        result["session_config"] = json.loads(session[4])
    return result


def _claim_run(conn: sqlite3.Connection, c: ClaimRun, ctx: ApplyContext) -> dict[str, Any]:
    status, attempt = _run(conn, c.session_id, c.fence.run_id)
    if status not in CLAIMABLE:
        raise _err(
            "invalid_transition", f"a {status.value} run cannot be claimed", status=status.value
        )
    if c.fence.attempt <= attempt:
        raise _err(
            "stale_attempt",
            f"claim by attempt {c.fence.attempt} but the run is at attempt {attempt}",
            run_id=c.fence.run_id,
            attempt=c.fence.attempt,
            current_attempt=attempt,
        )
    conn.execute(
        "UPDATE runs SET status = ?, attempt = ?, updated_at = ? WHERE run_id = ?",
        (RunStatus.RUNNING.value, c.fence.attempt, ctx.now, c.fence.run_id),
    )
    return {"run_id": c.fence.run_id, "status": RunStatus.RUNNING.value, "attempt": c.fence.attempt}


def _update_run(conn: sqlite3.Connection, c: UpdateRun, ctx: ApplyContext) -> dict[str, Any]:
    status, attempt = _run(conn, c.session_id, c.run_id)
    if c.fence is not None:
        if c.fence.run_id != c.run_id:
            raise _err("fence_mismatch", "the fence names another run", run_id=c.run_id)
        _check_fence(conn, c.session_id, c.fence)
    target = status if c.status is None else c.status
    check_run_transition(status, target)
    if target == RunStatus.RUNNING and status != RunStatus.RUNNING:
        raise _err("invalid_transition", "a run starts running through claim_run only")
    fields: dict[str, Any] = {"status": target.value}
    if c.end_node_id is not None:
        fields["end_node_id"] = c.end_node_id
    if c.end_reason is not None:
        fields["end_reason"] = c.end_reason.value
    if c.turn_count is not None:
        fields["turn_count"] = c.turn_count
    if c.usage is not None:
        fields["usage_json"] = c.usage.model_dump_json()
    if c.error is not None:
        fields["error_json"] = c.error.model_dump_json()
    if c.metadata is not None:
        fields["metadata_json"] = _dump(c.metadata)
    fields["updated_at"] = ctx.now
    conn.execute(
        f"UPDATE runs SET {', '.join(f'{k} = ?' for k in fields)} WHERE run_id = ?",
        (*fields.values(), c.run_id),
    )
    return {"run_id": c.run_id, "status": target.value, "attempt": attempt}


# ------------------------------------------------------------------------------ nodes, events


def _missing_node(conn: sqlite3.Connection, nodes: str, node_id: str) -> bool:
    return conn.execute(f"SELECT 1 FROM {nodes} WHERE node_id = ?", (node_id,)).fetchone() is None


class AlreadyApplied(Exception):
    """The command was applied before and its own rows prove it; ``result`` is what it got."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__("already applied")
        self.result = result


def needs_receipt(command: StorageCommand, result: dict[str, Any]) -> bool:
    """Whether an applied command's result must be stored in ``command_receipts``.

    A plain ``append_node`` (no artifacts moved out, no run ended) needs none: its node's unique
    id and its event prove it was applied and give its result back (:class:`AlreadyApplied`) —
    a third of a turn's database bytes were these receipts.
    """
    return command.type != "append_node" or bool(result.get("artifact_ids")) or "finish" in result


def _applied_before(conn: sqlite3.Connection, c: AppendNode) -> dict[str, Any] | None:
    """The first result of ``c`` if its node exists (see :func:`needs_receipt`), else ``None``."""
    sid = c.session_id
    node = conn.execute(
        f"SELECT node_seq, created_at FROM {nodes_table(sid)} WHERE node_id = ?", (c.node.node_id,)
    ).fetchone()
    if node is None:
        return None
    event = conn.execute(
        f"SELECT seq, run_seq, node_id FROM {events_table(sid)} WHERE event_id = ?",
        (c.event.event_id,),
    ).fetchone()
    if event is None or event[2] != c.node.node_id:
        raise _err("conflict", "the node id belongs to another command", node_id=c.node.node_id)
    return {
        "node_id": c.node.node_id,
        "node_seq": node[0],
        "created_at": node[1],
        "artifact_ids": [],
        "event_id": c.event.event_id,
        "seq": event[0],
        "run_seq": event[1],
    }


def _append_node(conn: sqlite3.Connection, c: AppendNode, ctx: ApplyContext) -> dict[str, Any]:
    _session(conn, c.session_id)
    if (first := _applied_before(conn, c)) is not None:
        raise AlreadyApplied(first)
    node, sid = c.node, c.session_id
    _check_fence(conn, sid, c.fence)
    if c.fence is not None and node.run_id not in (None, c.fence.run_id):
        raise _err("fence_mismatch", "the node belongs to another run", run_id=node.run_id)
    nodes = nodes_table(sid)
    parent = node.parent_id
    if parent is not None and _missing_node(conn, nodes, parent):
        raise _err("parent_not_found", "the parent is not a node of this session", parent_id=parent)
    blocks, moved = offload_large_json(
        list(node.content),
        node_id=node.node_id,
        session_dir=ctx.data_dir / sid,
        threshold_bytes=ctx.json_threshold_bytes,
    )
    content = json.dumps(
        CONTENT_BLOCKS.dump_python(blocks, exclude_none=True),
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )
    cur = conn.execute(
        f"INSERT INTO {nodes} (node_seq, node_id, parent_id, agent_id, run_id, role, node_type, "
        "content_json, metadata_json, token_count, created_at) "
        "VALUES (NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            node.node_id,
            node.parent_id,
            node.agent_id,
            node.run_id,
            node.role.value,
            node.node_type.value,
            content,
            _dump(node.metadata),
            node.token_count,
            ctx.now,
        ),
    )
    node_seq = cur.lastrowid
    ctx.fault_point("between_node_and_event")
    ev = _insert_event(conn, sid, c.event, ctx.now, node.node_id)
    for art in moved:
        conn.execute(
            "INSERT INTO artifacts (artifact_id, session_id, agent_id, run_id, node_id, "
            "tool_call_id, path, filename, mime_type, size_bytes, summary, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'application/json', ?, ?, ?)",
            (
                art.artifact_id, sid, node.agent_id, node.run_id, node.node_id, art.tool_call_id,
                art.path, art.artifact_id + ".json", art.size_bytes, art.summary, ctx.now,
            ),
        )  # fmt: skip
    if c.set_active:
        conn.execute(
            "UPDATE sessions SET active_node_id = ?, updated_at = ? WHERE session_id = ?",
            (node.node_id, ctx.now, sid),
        )
    if node.run_id is not None:
        # The run's last durable node: where a takeover resumes (ARCHITECTURE §5).
        conn.execute(
            "UPDATE runs SET end_node_id = ?, updated_at = ? WHERE run_id = ? AND session_id = ?",
            (node.node_id, ctx.now, node.run_id, sid),
        )
    result = {
        "node_id": node.node_id,
        "node_seq": node_seq,
        "created_at": ctx.now,
        "artifact_ids": [a.artifact_id for a in moved],
        **ev,
    }
    if c.finish is not None:
        result["finish"] = _finish_run(conn, c, ctx)
    return result


def _finish_run(conn: sqlite3.Connection, c: AppendNode, ctx: ApplyContext) -> dict[str, Any]:
    """End the appended node's run in the node's transaction (``AppendNode.finish``)."""
    f, fence = c.finish, c.fence
    assert f is not None
    if fence is None:
        raise _err("fence_required", "ending a run with a node needs the attempt's fence")
    update = UpdateRun(
        command_id=c.command_id,
        session_id=c.session_id,
        run_id=fence.run_id,
        fence=fence,
        status=f.status,
        end_reason=f.end_reason,
        turn_count=f.turn_count,
        usage=f.usage,
        error=f.error,
        end_node_id=c.node.node_id,
    )
    if f.event.run_id not in (None, fence.run_id):
        raise _err("fence_mismatch", "the final event belongs to another run", run_id=fence.run_id)
    run = _update_run(conn, update, ctx)
    event = f.event.model_copy(update={"run_id": fence.run_id})
    return {**run, "event": _insert_event(conn, c.session_id, event, ctx.now, c.node.node_id)}


def _append_event(conn: sqlite3.Connection, c: AppendEvent, ctx: ApplyContext) -> dict[str, Any]:
    _session(conn, c.session_id)
    _check_fence(conn, c.session_id, c.fence)
    if c.fence is not None and c.event.run_id not in (None, c.fence.run_id):
        raise _err("fence_mismatch", "the event belongs to another run", run_id=c.event.run_id)
    return {"created_at": ctx.now, **_insert_event(conn, c.session_id, c.event, ctx.now, None)}


def _create_artifact(
    conn: sqlite3.Connection, c: CreateArtifact, ctx: ApplyContext
) -> dict[str, Any]:
    _session(conn, c.session_id)
    _check_fence(conn, c.session_id, c.fence)
    conn.execute(
        "INSERT INTO artifacts (artifact_id, session_id, agent_id, run_id, node_id, tool_call_id, "
        "path, filename, mime_type, size_bytes, summary, metadata_json, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            c.artifact_id, c.session_id, c.agent_id, c.run_id, c.node_id, c.tool_call_id, c.path,
            c.filename, c.mime_type, c.size_bytes, c.summary, _dump(c.metadata), ctx.now,
        ),
    )  # fmt: skip
    return {"artifact_id": c.artifact_id, "created_at": ctx.now}


_APPLIERS: dict[str, Callable[[sqlite3.Connection, Any, ApplyContext], dict[str, Any]]] = {
    "create_session": _create_session,
    "update_session": _update_session,
    "switch_active_node": _switch_active,
    "create_agent": _create_agent,
    "update_agent": _update_agent,
    "create_run": _create_run,
    "claim_run": _claim_run,
    "update_run": _update_run,
    "append_node": _append_node,
    "append_event": _append_event,
    "create_artifact": _create_artifact,
}


def apply_command(
    conn: sqlite3.Connection, command: StorageCommand, ctx: ApplyContext
) -> dict[str, Any]:
    """Apply one command to its shard (inside the caller's savepoint); return its result."""
    try:
        return _APPLIERS[command.type](conn, command, ctx)
    except sqlite3.IntegrityError as exc:
        # A unique id reused by a *different* command (same command ids are caught earlier).
        raise StorageError("conflict", f"conflicts with existing data: {exc}", cause=exc) from exc
