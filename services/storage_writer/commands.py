"""How each storage command changes one shard; called inside the writer's savepoint per command.

This module dispatches (:func:`apply_command`) and holds the session, agent and artifact
appliers; runs are in :mod:`apply_runs`, nodes and events in :mod:`apply_nodes`, an account's
named agents in :mod:`apply_assistants`, and what they share (context, refusals, fencing, event
rows) in :mod:`apply_common`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from agent_core.bus.contracts.refusals import RefusalCode
from agent_core.bus.contracts.storage import (
    AppendNodeResult,
    ClaimRun,
    ClaimRunResult,
    CommandResult,
    CreateAgent,
    CreateAgentResult,
    CreateArtifact,
    CreateArtifactResult,
    CreateSession,
    CreateSessionResult,
    EndRunResult,
    PlacedNode,
    StorageCommand,
    SwitchActiveNode,
    SwitchActiveNodeResult,
    UpdateAgent,
    UpdateAgentResult,
    UpdateSession,
    UpdateSessionResult,
)
from agent_core.errors import StorageError
from agent_core.types.enums import AgentStatus, AgentType, EventType, SessionStatus
from agent_core.types.runtime import TimelineEvent
from services.storage_writer.apply_assistants import (
    archive_assistant,
    create_assistant,
    update_assistant,
)
from services.storage_writer.apply_common import (
    AlreadyApplied,
    ApplyContext,
    FaultHook,
    check_fence,
    derived_event_id,
    dump_json,
    insert_event,
    refusal,
    require_session,
)
from services.storage_writer.apply_delete import delete_session
from services.storage_writer.apply_end import end_run
from services.storage_writer.apply_nodes import (
    append_event,
    append_node,
    artifact_event,
    place_message,
    placed_before,
)
from services.storage_writer.apply_runs import claim_run, create_run, update_run
from services.storage_writer.paths import path_rows
from services.storage_writer.schema import create_session_tables, nodes_table
from services.storage_writer.search_index import IndexOp
from services.storage_writer.search_texts import title_of

__all__ = ["AlreadyApplied", "ApplyContext", "FaultHook", "apply_command", "needs_receipt"]


def _create_session(
    conn: sqlite3.Connection, c: CreateSession, ctx: ApplyContext
) -> CreateSessionResult:
    exists = conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (c.session_id,)).fetchone()
    if exists is not None:
        raise refusal(
            RefusalCode.SESSION_EXISTS, "a session with this id exists", session_id=c.session_id
        )
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
            dump_json(c.metadata),
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
            AgentType(c.root_agent_type).value,
            AgentStatus.IDLE.value,
            ctx.now,
            ctx.now,
        ),
    )
    event = TimelineEvent(
        event_id="evt_" + c.session_id.removeprefix("sess_"),
        event_type=EventType.SESSION_CREATED,
        agent_id=c.root_agent_id,
    )
    ev = insert_event(conn, c.session_id, event, ctx.now, None)
    if (title := title_of(c.metadata)) is not None:
        ctx.index.ops.append(IndexOp(c.session_id, c.account_id, "", title))
    return CreateSessionResult(session_id=c.session_id, created_at=ctx.now, **ev.model_dump())


def _update_session(
    conn: sqlite3.Connection, c: UpdateSession, ctx: ApplyContext
) -> UpdateSessionResult:
    require_session(conn, c.session_id)
    if c.metadata is not None:  # the title in the search index follows the metadata
        (account_id,) = conn.execute(
            "SELECT account_id FROM sessions WHERE session_id = ?", (c.session_id,)
        ).fetchone()
        ctx.index.ops.append(IndexOp(c.session_id, account_id, "", title_of(c.metadata)))
    if c.status is not None:
        conn.execute(
            "UPDATE sessions SET status = ?, updated_at = ? WHERE session_id = ?",
            (c.status.value, ctx.now, c.session_id),
        )
    if c.metadata is not None:
        conn.execute(
            "UPDATE sessions SET metadata_json = ?, updated_at = ? WHERE session_id = ?",
            (dump_json(c.metadata), ctx.now, c.session_id),
        )
    changed: dict[str, Any] = {"status": c.status.value} if c.status is not None else {}
    if c.metadata is not None:
        changed["metadata_keys"] = sorted(c.metadata)
    _session_event(conn, c.session_id, c.command_id, EventType.SESSION_UPDATED, changed, ctx)
    return UpdateSessionResult(session_id=c.session_id, updated_at=ctx.now)


def _session_event(
    conn: sqlite3.Connection,
    sid: str,
    command_id: str,
    event_type: EventType,
    payload: dict[str, Any],
    ctx: ApplyContext,
    *,
    node_id: str | None = None,
) -> None:
    """A session-level timeline event of the command being applied (named after the command:
    these commands keep receipts, so a repeat never writes it twice)."""
    event = TimelineEvent(
        event_id=derived_event_id(f"{command_id}:{event_type.value}"),
        event_type=event_type,
        payload=payload,
    )
    insert_event(conn, sid, event, ctx.now, node_id)


def _switch_active(
    conn: sqlite3.Connection, c: SwitchActiveNode, ctx: ApplyContext
) -> SwitchActiveNodeResult:
    require_session(conn, c.session_id)
    row = conn.execute(
        f"SELECT node_seq FROM {nodes_table(c.session_id)} WHERE node_id = ?", (c.node_id,)
    ).fetchone()
    if row is None:
        raise refusal(
            RefusalCode.NODE_NOT_FOUND,
            "the target is not a node of this session",
            node_id=c.node_id,
        )
    (before,) = conn.execute(
        "SELECT active_node_id FROM sessions WHERE session_id = ?", (c.session_id,)
    ).fetchone()
    conn.execute(
        "UPDATE sessions SET active_node_id = ?, updated_at = ? WHERE session_id = ?",
        (c.node_id, ctx.now, c.session_id),
    )
    _session_event(
        conn,
        c.session_id,
        c.command_id,
        EventType.ACTIVE_NODE_SWITCHED,
        {"from_node_id": before, "to_node_id": c.node_id},
        ctx,
        node_id=c.node_id,
    )
    return SwitchActiveNodeResult(session_id=c.session_id, active_node_id=c.node_id)


def needs_receipt(command: StorageCommand, result: CommandResult) -> bool:
    """Whether an applied command's result must be stored in ``command_receipts``.

    None of a turn's commands needs one, because their own rows prove they were applied and
    give their first result back (:class:`AlreadyApplied`): a ``create_run`` with a start node
    (its run row, named by the run id and start node id the command allocated; the answer's
    ``cwd`` and ``session_config`` are read again, as they are then), a ``claim_run`` (the run row names
    the command that claimed its current attempt; a placed message is its node), an
    ``append_node`` that moved no artifact out (its node's unique id and its event) and an
    ``end_run`` whose node moved none (its terminal event, named by the command; the ended run
    cannot change again). Receipts were a third of a turn's database bytes.
    """
    if isinstance(result, AppendNodeResult):
        return bool(result.artifact_ids)
    if isinstance(result, EndRunResult):
        return result.node is not None and bool(result.node.artifact_ids)
    if command.type == "create_run":
        return command.start_node_id is None  # see apply_runs._created_before
    return command.type != "claim_run"


# ------------------------------------------------------------------------------ agents


def _create_agent(conn: sqlite3.Connection, c: CreateAgent, ctx: ApplyContext) -> CreateAgentResult:
    require_session(conn, c.session_id)
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
            dump_json(c.metadata),
            ctx.now,
            ctx.now,
        ),
    )
    created = TimelineEvent(
        event_id=derived_event_id(f"{c.command_id}:agent_created"),
        event_type=EventType.AGENT_CREATED,
        agent_id=c.agent_id,
        run_id=c.created_by_run_id,
        payload={
            "agent_type": c.agent_type.value,
            "parent_agent_id": c.parent_agent_id,
            **({"purpose": c.metadata["purpose"]} if "purpose" in c.metadata else {}),
        },
    )
    insert_event(conn, c.session_id, created, ctx.now, c.fork_from_node_id)
    return CreateAgentResult(agent_id=c.agent_id, created_at=ctx.now)


def _update_agent(conn: sqlite3.Connection, c: UpdateAgent, ctx: ApplyContext) -> UpdateAgentResult:
    check_fence(conn, c.session_id, c.fence)
    sets: list[str] = []
    args: list[Any] = []
    if c.status is not None:
        sets.append("status = ?")
        args.append(c.status.value)
    if c.result is not None:
        sets.append("result_json = ?")
        args.append(dump_json(c.result) or "{}")
    if c.metadata is not None:
        sets.append("metadata_json = ?")
        args.append(dump_json(c.metadata))
    cur = conn.execute(
        f"UPDATE agents SET {', '.join([*sets, 'updated_at = ?'])} "
        "WHERE agent_id = ? AND session_id = ?",
        (*args, ctx.now, c.agent_id, c.session_id),
    )
    if cur.rowcount == 0:
        raise refusal(
            RefusalCode.AGENT_NOT_FOUND, "no such agent in this session", agent_id=c.agent_id
        )
    changed: dict[str, Any] = {} if c.status is None else {"status": c.status.value}
    if c.result is not None:
        changed["result_status"] = c.result.get("status")
    updated = TimelineEvent(
        event_id=derived_event_id(f"{c.command_id}:agent_updated"),
        event_type=EventType.AGENT_UPDATED,
        agent_id=c.agent_id,
        run_id=None if c.fence is None else c.fence.run_id,
        payload=changed,
    )
    insert_event(conn, c.session_id, updated, ctx.now, None)
    return UpdateAgentResult(agent_id=c.agent_id, updated_at=ctx.now)


def _claim_run(conn: sqlite3.Connection, c: ClaimRun, ctx: ApplyContext) -> ClaimRunResult:
    try:
        result = claim_run(conn, c, ctx)
    except AlreadyApplied as done:
        if c.place is not None:
            placement = placed_before(conn, c)
            raise AlreadyApplied(
                _placed(done.result, placement, _path(conn, c, placement))
            ) from None
        raise
    if c.place is not None:
        placement = place_message(conn, c, ctx)
        return _placed(result, placement, _path(conn, c, placement))
    return result


def _placed(
    result: CommandResult, placement: dict[str, Any], path: dict[str, Any]
) -> ClaimRunResult:
    """A claim's result with where it placed its message (``placed``, or ``place_error``) and,
    asked for, the path to it (``path``)."""
    return ClaimRunResult(**result.model_dump(exclude_unset=True), **placement, **path)


def _path(conn: sqlite3.Connection, c: ClaimRun, placement: dict[str, Any]) -> dict[str, Any]:
    """The ``path`` part of a claim's result (see :class:`ClaimRun`): none unless asked for and
    the message was placed."""
    placed: PlacedNode | None = placement.get("placed")
    if not c.return_path or placed is None:
        return {}
    return {"path": path_rows(conn, c.session_id, placed.node_id, c.path_after_node_id)}


def _create_artifact(
    conn: sqlite3.Connection, c: CreateArtifact, ctx: ApplyContext
) -> CreateArtifactResult:
    require_session(conn, c.session_id)
    check_fence(conn, c.session_id, c.fence)
    a = c.artifact
    conn.execute(
        "INSERT INTO artifacts (artifact_id, session_id, agent_id, run_id, node_id, tool_call_id, "
        "path, filename, mime_type, size_bytes, summary, metadata_json, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            a.artifact_id, c.session_id, a.agent_id, a.run_id, a.node_id, a.tool_call_id, a.path,
            a.filename, a.mime_type, a.size_bytes, a.summary, dump_json(a.metadata), ctx.now,
        ),
    )  # fmt: skip
    artifact_event(
        conn, c.session_id, a.artifact_id, a.path, a.size_bytes, ctx.now,
        agent_id=a.agent_id, run_id=a.run_id, node_id=a.node_id, tool_call_id=a.tool_call_id,
    )  # fmt: skip
    return CreateArtifactResult(artifact_id=a.artifact_id, created_at=ctx.now)


_APPLIERS: dict[str, Callable[[sqlite3.Connection, Any, ApplyContext], CommandResult]] = {
    "create_session": _create_session,
    "update_session": _update_session,
    "delete_session": delete_session,
    "switch_active_node": _switch_active,
    "create_agent": _create_agent,
    "update_agent": _update_agent,
    "create_run": create_run,
    "claim_run": _claim_run,
    "update_run": update_run,
    "end_run": end_run,
    "append_node": append_node,
    "append_event": append_event,
    "create_artifact": _create_artifact,
    "create_assistant": create_assistant,
    "update_assistant": update_assistant,
    "archive_assistant": archive_assistant,
}


def apply_command(
    conn: sqlite3.Connection, command: StorageCommand, ctx: ApplyContext
) -> CommandResult:
    """Apply one command to its shard (inside the caller's savepoint); return its result."""
    try:
        return _APPLIERS[command.type](conn, command, ctx)
    except sqlite3.IntegrityError as exc:
        # A unique id reused by a *different* command (same command ids are caught earlier).
        raise StorageError(
            RefusalCode.CONFLICT, f"conflicts with existing data: {exc}", cause=exc
        ) from exc
