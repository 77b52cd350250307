"""A session's data as a whole: delete it (rows, tables, index entries, files), export it as
JSON, read the account's audit log that records deletions, and the model's full context at a
node."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query

from agent_core.bus.contracts.storage import (
    DeleteSession,
    DeleteSessionResult,
    GetActivePath,
    ListAgents,
    ListArtifacts,
    ListAuditEvents,
    ListEvents,
    ListNodes,
    ListRuns,
)
from agent_core.context import ContextBuilder
from agent_core.files import session_prefix
from agent_core.ids import is_valid_id, new_id
from agent_core.storage_client import raise_for_receipt
from agent_core.types.api import (
    AuditEvent,
    AuditList,
    ModelContext,
    SessionDeleted,
    SessionExport,
)
from agent_core.types.enums import Role
from agent_core.types.mappers import (
    to_agent_state,
    to_artifact_ref,
    to_node,
    to_run_state,
    to_timeline_event,
)
from services.gateway.auth import Caller
from services.gateway.errors import not_found, responses
from services.gateway.routes_nodes import _config as agent_config_of
from services.gateway.state import CallerDep, Gateway, GatewayDep, fetch, fetch_page, get_session

__all__ = ["router"]

router = APIRouter(tags=["sessions"])

_PAGE = 2000


@router.delete(
    "/v1/sessions/{session_id}", response_model=SessionDeleted, responses=responses(404, 409)
)
async def delete_session(session_id: str, gw: GatewayDep, caller: CallerDep) -> SessionDeleted:
    """Delete a session and everything of it: its tree, timeline, runs, agents, artifacts'
    records, its entries in the search index and its files (uploads, scratchpad, outputs, the
    writer's offloaded JSON). Recorded as a ``session_deleted`` event in the account's audit log
    (``GET /v1/audit``).

    Refused with 409 ``runs_active`` (``details.run_ids``) while a run of the session has not
    ended: cancel those runs first. A deleted session answers 404 from then on."""
    await get_session(gw, caller, session_id)
    command = DeleteSession(
        command_id=new_id("cmd"), session_id=session_id, account_id=caller.account_id
    )
    result = DeleteSessionResult.of(raise_for_receipt(await gw.storage.send(command)))
    # The rows are gone first, so no run can start in the folder being removed. The store
    # holds the files whichever host served them; the local engine's folder is the workspace.
    await gw.files.delete_prefix(session_prefix(caller.account_id, session_id))
    return SessionDeleted(**result.model_dump(exclude={"duplicate"}, exclude_unset=True))


@router.get(
    "/v1/sessions/{session_id}/export", response_model=SessionExport, responses=responses(404)
)
async def export_session(session_id: str, gw: GatewayDep, caller: CallerDep) -> SessionExport:
    """The whole session as one JSON document: the session, its agents, every node of its tree
    with full content, its runs, its timeline events and its artifacts' metadata."""
    session = await get_session(gw, caller, session_id)
    scope = {"session_id": session_id, "account_id": caller.account_id}
    agents = await fetch(gw, ListAgents(**scope), "session")
    runs = await fetch(gw, ListRuns(**scope), "session")
    artifacts = await fetch(gw, ListArtifacts(**scope), "session")
    nodes = [to_node(r) for r in await _all_pages(gw, caller, session_id, ListNodes)]
    events = [to_timeline_event(r) for r in await _all_pages(gw, caller, session_id, ListEvents)]
    return SessionExport(
        exported_at=datetime.now(UTC).isoformat(timespec="microseconds"),
        session=session,
        agents=[to_agent_state(r) for r in agents],
        nodes=nodes,
        runs=[to_run_state(r) for r in runs],
        events=events,
        artifacts=[to_artifact_ref(r) for r in artifacts],
    )


async def _all_pages(
    gw: Gateway, caller: Caller, session_id: str, kind: type[ListNodes] | type[ListEvents]
) -> list[Any]:
    """Every row of a paged per-session query, following its cursor."""
    rows: list[Any] = []
    after = 0
    while True:
        query = kind(
            session_id=session_id, account_id=caller.account_id, after_seq=after, limit=_PAGE
        )
        page, cursor = await fetch_page(gw, query)
        rows.extend(page or [])
        if cursor is None:
            return rows
        after = int(cursor)


@router.get("/v1/audit", response_model=AuditList, responses=responses(), tags=["audit"])
async def list_audit(
    gw: GatewayDep,
    caller: CallerDep,
    before_seq: Annotated[int | None, Query(ge=1, le=2**62)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> AuditList:
    """The account's audit events (``session_deleted``), newest first."""
    query = ListAuditEvents(account_id=caller.account_id, before_seq=before_seq, limit=limit)
    rows, cursor = await fetch_page(gw, query)
    items = [
        AuditEvent(
            seq=r.seq,
            event_id=r.event_id,
            event_type=r.event_type,
            session_id=r.session_id,
            payload=json.loads(r.payload_json) if r.payload_json else {},
            created_at=r.created_at,
        )
        for r in rows
    ]
    return AuditList(items=items, next_before_seq=int(cursor) if cursor else None)


@router.get(
    "/v1/sessions/{session_id}/nodes/{node_id}/model_context",
    response_model=ModelContext,
    responses=responses(404),
    tags=["tree"],
)
async def model_context(
    session_id: str, node_id: str, gw: GatewayDep, caller: CallerDep
) -> ModelContext:
    """The model's full context at a node: for an assistant node, what the model was sent to
    produce it; for another node, what a run continuing from it would send (system prompt and
    every message, rebuilt from the tree by the run-worker's context builder)."""
    session = await get_session(gw, caller, session_id)
    if not is_valid_id(node_id, "node"):
        raise not_found("node")
    query = GetActivePath(session_id=session_id, node_id=node_id, account_id=caller.account_id)
    rows = await fetch(gw, query, "node")
    path = [to_node(r) for r in rows]
    produced = path[-1].role is Role.ASSISTANT and len(path) > 1
    basis = path[:-1] if produced else path
    request, report = ContextBuilder().build(
        basis, session_id=session_id, config=agent_config_of(gw, session)
    )
    return ModelContext(
        node_id=node_id,
        built_from_node_id=basis[-1].node_id,
        produced_by_model=produced,
        request=request,
        report=report,
    )
