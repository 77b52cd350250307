"""Appliers of node and event commands: a node with its event, and a lifecycle event alone; how a
plain node proves it was applied without a receipt; and the node writing that ``end_run`` shares."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from agent_core.bus.contracts.refusals import RefusalCode
from agent_core.bus.contracts.storage import (
    AppendEvent,
    AppendEventResult,
    AppendNode,
    AppendNodeResult,
    ClaimRun,
    PlacedNode,
)
from agent_core.types.enums import EventType
from agent_core.types.protocol import CONTENT_BLOCKS
from agent_core.types.runtime import Node, TimelineEvent
from services.storage_writer.apply_common import (
    AlreadyApplied,
    ApplyContext,
    check_fence,
    derived_event_id,
    dump_json,
    insert_event,
    refusal,
    refuse_if_ended,
    require_session,
)
from services.storage_writer.artifacts import offload_large_json
from services.storage_writer.schema import events_table, nodes_table
from services.storage_writer.search_index import IndexOp
from services.storage_writer.search_texts import node_text

__all__ = [
    "append_event",
    "append_node",
    "artifact_event",
    "event_of",
    "place_message",
    "placed_before",
    "write_node",
]


def _missing_node(conn: sqlite3.Connection, nodes: str, node_id: str) -> bool:
    return conn.execute(f"SELECT 1 FROM {nodes} WHERE node_id = ?", (node_id,)).fetchone() is None


def event_of(
    conn: sqlite3.Connection, session_id: str, event_id: str, node_id: str
) -> tuple[int, int | None] | None:
    """``(seq, run_seq)`` of event ``event_id`` if it exists and is ``node_id``'s."""
    row = conn.execute(
        f"SELECT seq, run_seq, node_id FROM {events_table(session_id)} WHERE event_id = ?",
        (event_id,),
    ).fetchone()
    return None if row is None or row[2] != node_id else (row[0], row[1])


def _applied_before(conn: sqlite3.Connection, c: AppendNode) -> AppendNodeResult | None:
    """The first result of ``c`` if its node exists (``commands.needs_receipt``), else ``None``."""
    return stored_node_write(conn, c.session_id, c.node.node_id, c.event.event_id)


def stored_node_write(
    conn: sqlite3.Connection, sid: str, node_id: str, event_id: str
) -> AppendNodeResult | None:
    """What writing node ``node_id`` with its event ``event_id`` returned when it was applied;
    ``None`` if no such node is stored; a ``conflict`` refusal if the node was written with
    another event (the ids belong to another command)."""
    node = conn.execute(
        f"SELECT node_seq, created_at FROM {nodes_table(sid)} WHERE node_id = ?", (node_id,)
    ).fetchone()
    if node is None:
        return None
    event = event_of(conn, sid, event_id, node_id)
    if event is None:
        raise refusal(
            RefusalCode.CONFLICT, "the node id belongs to another command", node_id=node_id
        )
    return AppendNodeResult(
        node_id=node_id,
        node_seq=node[0],
        created_at=node[1],
        artifact_ids=[],
        event_id=event_id,
        seq=event[0],
        run_seq=event[1],
    )


def append_node(conn: sqlite3.Connection, c: AppendNode, ctx: ApplyContext) -> AppendNodeResult:
    require_session(conn, c.session_id)
    if (first := _applied_before(conn, c)) is not None:
        raise AlreadyApplied(first)
    node = c.node
    check_fence(conn, c.session_id, c.fence)
    if c.fence is not None and node.run_id not in (None, c.fence.run_id):
        raise refusal(
            RefusalCode.FENCE_MISMATCH, "the node belongs to another run", run_id=node.run_id
        )
    if c.fence is None and node.run_id is not None:
        refuse_if_ended(conn, c.session_id, node.run_id)
    result = write_node(conn, c.session_id, node, c.event, ctx, set_active=c.set_active)
    for event in c.events:  # the node's other events (tool calls' starts and ends): same write
        if event.run_id != node.run_id:
            raise refusal(
                RefusalCode.FENCE_MISMATCH, "the event belongs to another run", run_id=event.run_id
            )
        insert_event(conn, c.session_id, event, ctx.now, node.node_id)
    return result


def write_node(
    conn: sqlite3.Connection,
    sid: str,
    node: Node,
    event: TimelineEvent,
    ctx: ApplyContext,
    *,
    set_active: bool,
) -> AppendNodeResult:
    """Write ``node`` and its ``event`` (checked by the caller: fence, run, repeat); the result
    part every command that writes a node returns."""
    parent = node.parent_id
    if parent is not None and _missing_node(conn, nodes_table(sid), parent):
        raise refusal(
            RefusalCode.PARENT_NOT_FOUND,
            "the parent is not a node of this session",
            parent_id=parent,
        )
    assert ctx.files is not None  # the writer always passes its store
    blocks, moved = offload_large_json(
        list(node.content),
        node_id=node.node_id,
        session_id=sid,
        write=ctx.files.put_blocking,
        threshold_bytes=ctx.json_threshold_bytes,
    )
    node_seq = _insert_node(conn, sid, node, blocks, ctx.now)
    _index_node(conn, sid, node, ctx)
    ctx.fault_point("between_node_and_event")
    ev = insert_event(conn, sid, event, ctx.now, node.node_id)
    for art in moved:
        artifact_event(
            conn, sid, art.artifact_id, art.path, art.size_bytes, ctx.now,
            agent_id=node.agent_id, run_id=node.run_id, node_id=node.node_id,
            tool_call_id=art.tool_call_id,
        )  # fmt: skip
        conn.execute(
            "INSERT INTO artifacts (artifact_id, session_id, agent_id, run_id, node_id, "
            "tool_call_id, path, filename, mime_type, size_bytes, summary, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'application/json', ?, ?, ?)",
            (
                art.artifact_id, sid, node.agent_id, node.run_id, node.node_id, art.tool_call_id,
                art.path, art.artifact_id + ".json", art.size_bytes, art.summary, ctx.now,
            ),
        )  # fmt: skip
    if set_active:
        conn.execute(
            "UPDATE sessions SET active_node_id = ?, updated_at = ? WHERE session_id = ?",
            (node.node_id, ctx.now, sid),
        )
    if node.run_id is not None:
        # The run's last durable node: where a takeover resumes (docs/architecture.md, "Runs").
        conn.execute(
            "UPDATE runs SET end_node_id = ?, updated_at = ? WHERE run_id = ? AND session_id = ?",
            (node.node_id, ctx.now, node.run_id, sid),
        )
    assert node_seq is not None
    return AppendNodeResult(
        node_id=node.node_id,
        node_seq=node_seq,
        created_at=ctx.now,
        artifact_ids=[a.artifact_id for a in moved],
        event_id=ev.event_id,
        seq=ev.seq,
        run_seq=ev.run_seq,
    )


def _index_node(conn: sqlite3.Connection, sid: str, node: Node, ctx: ApplyContext) -> None:
    """Queue a message's text for the account's search index (``search_index``)."""
    blocks = [
        {"type": "text", "text": getattr(b, "text", "")} for b in node.content if b.type == "text"
    ]
    text = node_text(node.role.value, node.node_type.value, blocks)
    if text is None:
        return
    if ctx.index.deferred:  # the flush reads the session's account (a lookup saved per message)
        ctx.index.ops.append(IndexOp(sid, "", node.node_id, text))
        return
    (account_id,) = conn.execute(
        "SELECT account_id FROM sessions WHERE session_id = ?", (sid,)
    ).fetchone()
    ctx.index.ops.append(IndexOp(sid, account_id, node.node_id, text))


def _insert_node(
    conn: sqlite3.Connection, sid: str, node: Node, blocks: list[Any], now: str
) -> int | None:
    content = json.dumps(
        CONTENT_BLOCKS.dump_python(blocks, exclude_none=True),
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )
    cur = conn.execute(
        f"INSERT INTO {nodes_table(sid)} (node_seq, node_id, parent_id, agent_id, run_id, role, "
        "node_type, content_json, metadata_json, token_count, created_at) "
        "VALUES (NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            node.node_id,
            node.parent_id,
            node.agent_id,
            node.run_id,
            node.role.value,
            node.node_type.value,
            content,
            dump_json(node.metadata),
            node.token_count,
            now,
        ),
    )
    return cur.lastrowid


def append_event(conn: sqlite3.Connection, c: AppendEvent, ctx: ApplyContext) -> AppendEventResult:
    require_session(conn, c.session_id)
    check_fence(conn, c.session_id, c.fence)
    if c.fence is not None and c.event.run_id not in (None, c.fence.run_id):
        raise refusal(
            RefusalCode.FENCE_MISMATCH, "the event belongs to another run", run_id=c.event.run_id
        )
    if c.fence is None and c.event.run_id is not None:
        refuse_if_ended(conn, c.session_id, c.event.run_id)
    ev = insert_event(conn, c.session_id, c.event, ctx.now, None)
    return AppendEventResult(
        created_at=ctx.now, event_id=ev.event_id, seq=ev.seq, run_seq=ev.run_seq
    )


def artifact_event(
    conn: sqlite3.Connection,
    sid: str,
    artifact_id: str,
    path: str,
    size_bytes: int | None,
    now: str,
    *,
    agent_id: str | None,
    run_id: str | None,
    node_id: str | None,
    tool_call_id: str | None,
) -> None:
    """The ``artifact_created`` event of an artifact registered in this transaction (its id is
    derived from the artifact's: a repeat names the same event)."""
    event = TimelineEvent(
        event_id=derived_event_id(f"{artifact_id}:created"),
        event_type=EventType.ARTIFACT_CREATED,
        agent_id=agent_id,
        run_id=run_id,
        tool_call_id=tool_call_id,
        payload={"artifact_id": artifact_id, "path": path, "size_bytes": size_bytes},
    )
    insert_event(conn, sid, event, now, node_id)


def place_message(conn: sqlite3.Connection, c: ClaimRun, ctx: ApplyContext) -> dict[str, Any]:
    """Append the message of a run being claimed (``ClaimRun.place``); what goes in ``placed``."""
    assert c.place is not None
    node, sid = c.place.node, c.session_id
    parent = node.parent_id
    if parent is None and not c.place.at_root:
        row = conn.execute("SELECT active_node_id FROM sessions WHERE session_id = ?", (sid,))
        parent = row.fetchone()[0]
    elif parent is not None and _missing_node(conn, nodes_table(sid), parent):
        return {"placed": None, "place_error": RefusalCode.PARENT_NOT_FOUND}
    append = AppendNode(
        command_id=c.command_id,
        session_id=sid,
        node=node.model_copy(update={"parent_id": parent}),
        event=c.place.event,
        fence=c.fence,
        set_active=c.place.set_active,
    )
    try:
        result = append_node(conn, append, ctx)
    except AlreadyApplied as done:  # placed by this very claim before (cannot recur: see
        # apply_runs.claim_run, which answers a repeated claim before it gets here)
        assert isinstance(done.result, AppendNodeResult)
        result = done.result
    # The message now lives in its node; the run kept it only while it waited in the queue.
    conn.execute(
        "UPDATE runs SET metadata_json = json_remove(metadata_json, '$.message') "
        "WHERE run_id = ? AND session_id = ?",
        (c.fence.run_id, sid),
    )
    placed = PlacedNode(node_id=node.node_id, node_seq=result.node_seq, parent_id=parent)
    return {"placed": placed}


def placed_before(conn: sqlite3.Connection, c: ClaimRun) -> dict[str, Any]:
    """The ``placed`` part of a repeated claim's result, from the message's node: absent only
    when the first claim could not place it (``place_message``: its parent was missing)."""
    assert c.place is not None
    node_id = c.place.node.node_id
    row = conn.execute(
        f"SELECT node_seq, parent_id FROM {nodes_table(c.session_id)} WHERE node_id = ?",
        (node_id,),
    ).fetchone()
    # Placed by the claim only if the node came with the claim's own event (after a
    # ``place_error`` the worker appends the message itself, with another event).
    if row is None or event_of(conn, c.session_id, c.place.event.event_id, node_id) is None:
        return {"placed": None, "place_error": RefusalCode.PARENT_NOT_FOUND}
    return {"placed": PlacedNode(node_id=node_id, node_seq=row[0], parent_id=row[1])}
