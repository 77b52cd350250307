"""Sessions: create, list (cursor, status), get, patch (archive/unarchive, metadata)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from agent_core.bus.contracts.storage import (
    CreateSession,
    ListSessions,
    SearchSessions,
    UpdateSession,
)
from agent_core.ids import new_id, new_session_id
from agent_core.storage_client import raise_for_receipt
from agent_core.tools import Workspace
from agent_core.tools.projects import InvalidProjectError, normalize_project, project_dir
from agent_core.types.api import (
    ASSISTANT_KEY,
    RESERVED_METADATA_KEY,
    RESERVED_METADATA_KEYS,
    CreateSessionRequest,
    PatchSessionRequest,
    SessionList,
    SessionMatch,
)
from agent_core.types.enums import AgentType, SessionStatus
from agent_core.types.mappers import to_session_state
from agent_core.types.runtime import SessionState
from services.gateway.errors import ApiError, responses
from services.gateway.routes_assistants import session_config
from services.gateway.state import (
    CallerDep,
    GatewayDep,
    agent_overrides,
    fetch_page,
    get_session,
)

__all__ = ["router"]

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])


@router.post(
    "", status_code=201, response_model=SessionState, responses=responses(400, 404, 409, 413, 422)
)
async def create_session(
    body: CreateSessionRequest, gw: GatewayDep, caller: CallerDep, response: Response
) -> SessionState:
    """Create a session (its workspace, tables and root agent), from a named agent with
    ``assistant``."""
    session_id = new_session_id()
    metadata = dict(body.metadata)
    if body.assistant is not None:  # pinned: later versions of the assistant never change it
        config, pin = await session_config(
            gw, caller, body.assistant, body.assistant_version, body.agent_config
        )
        metadata[RESERVED_METADATA_KEY] = config
        metadata[ASSISTANT_KEY] = pin.model_dump(mode="json")
    elif (overrides := agent_overrides(gw, body.agent_config)) is not None:
        metadata[RESERVED_METADATA_KEY] = overrides
    workspace = Workspace(gw.ctx.settings.home, caller.account_id, session_id)
    roots = gw.ctx.settings.projects.roots
    try:  # the project is stored by its logical name and checked here, before anything exists
        cwd = normalize_project(body.cwd, roots)
        project_dir(cwd, roots=roots, workspace_root=workspace.root)
    except InvalidProjectError as exc:
        raise ApiError(422, exc.code, exc.message) from exc
    raise_for_receipt(
        await gw.storage.send(
            CreateSession(
                command_id=new_id("cmd"),
                session_id=session_id,
                account_id=caller.account_id,
                cwd=cwd,
                root_agent_id=new_id("agent"),
                root_agent_type=(
                    AgentType.ORCHESTRATOR if body.mode == "orchestrator" else AgentType.MAIN
                ),
                metadata=metadata,
            )
        )
    )
    # Only once the session exists: a refused create leaves no folder behind. With the s3
    # engine the workspace is made on the worker that runs it, not on this host.
    if gw.files.engine == "local":
        workspace.ensure()
    response.headers["Location"] = f"/v1/sessions/{session_id}"
    return await get_session(gw, caller, session_id)


@router.get("", response_model=SessionList, responses=responses(400))
async def list_sessions(
    gw: GatewayDep,
    caller: CallerDep,
    status: SessionStatus | None = None,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    q: Annotated[str | None, Query(min_length=1, max_length=500)] = None,
) -> SessionList:
    """The caller's sessions, newest first; with ``q``, those whose title or message text holds
    every word of ``q`` (the last word also as a prefix), by their newest matching text, in one
    page with ``matches`` (from the account's search index, not a scan)."""
    if q is not None:
        search = SearchSessions(account_id=caller.account_id, q=q, status=status, limit=limit)
        found = search.reply_of(await gw.storage.query(search))
        return SessionList(
            items=[to_session_state(m.session) for m in found],
            matches=[
                SessionMatch(session_id=m.session.session_id, node_id=m.node_id, snippet=m.snippet)
                for m in found
            ],
        )
    query = ListSessions(account_id=caller.account_id, status=status, cursor=cursor, limit=limit)
    rows, next_cursor = await fetch_page(gw, query)
    items = [to_session_state(r) for r in rows]
    return SessionList(items=items, next_cursor=next_cursor)


@router.get("/{session_id}", response_model=SessionState, responses=responses(404))
async def read_session(session_id: str, gw: GatewayDep, caller: CallerDep) -> Response:
    """One session, with its usage totals (``usage``: tokens of its runs that ended)."""
    session = await get_session(gw, caller, session_id, with_usage=True)
    # The hottest read: serialised once here instead of dumped and re-validated by FastAPI.
    return Response(session.model_dump_json(), media_type="application/json")


@router.patch("/{session_id}", response_model=SessionState, responses=responses(404, 409))
async def patch_session(
    session_id: str, body: PatchSessionRequest, gw: GatewayDep, caller: CallerDep
) -> SessionState:
    """Archive or unarchive a session, or replace its metadata (the agent config is kept)."""
    session = await get_session(gw, caller, session_id)
    metadata = None
    if body.metadata is not None:
        metadata = dict(body.metadata)
        for key in RESERVED_METADATA_KEYS:  # the agent config and the assistant pin are kept
            if key in session.metadata:
                metadata[key] = session.metadata[key]
    if body.status is not None or metadata is not None:
        raise_for_receipt(
            await gw.storage.send(
                UpdateSession(
                    command_id=new_id("cmd"),
                    session_id=session_id,
                    status=body.status,
                    metadata=metadata,
                )
            )
        )
    return await get_session(gw, caller, session_id)
