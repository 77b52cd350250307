"""The conversation tree: tree, path, node, switch_node, context preview, timeline events, agents."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import TypeAdapter, ValidationError

from agent_core.bus.contracts.storage import (
    GetActivePath,
    GetNode,
    GetTree,
    ListAgents,
    ListEvents,
    SwitchActiveNode,
)
from agent_core.context import ContextBuilder
from agent_core.context.branch_points import turn_message
from agent_core.ids import is_valid_id, new_id
from agent_core.storage_client import raise_for_receipt
from agent_core.types.api import (
    ROOT_PARENT,
    AgentList,
    EventList,
    MessageAccepted,
    NodePath,
    PostMessageRequest,
    RegenerateRequest,
    SwitchNodeRequest,
    Tree,
    UserBlock,
    stored_overrides,
)
from agent_core.types.mappers import to_agent_state, to_node, to_timeline_event
from agent_core.types.runtime import AgentConfig, ContextBuildReport, Node, SessionState
from agent_core.types.storage import NodeRecord
from services.gateway.errors import ApiError, not_found, responses
from services.gateway.routes_messages import check_branch_point, main_path, post_message
from services.gateway.routes_runs import SSE_RESPONSE
from services.gateway.state import CallerDep, GatewayDep, fetch, fetch_page, get_session

__all__ = ["router"]

router = APIRouter(prefix="/v1/sessions/{session_id}", tags=["tree"])
_USER_BLOCK: TypeAdapter[UserBlock] = TypeAdapter(UserBlock)


@router.get("/tree", response_model=Tree, responses=responses(404))
async def read_tree(session_id: str, gw: GatewayDep, caller: CallerDep) -> Tree:
    """Every node of the session (compact: ids, parents, roles, types, previews)."""
    session = await get_session(gw, caller, session_id)
    tree = await fetch(gw, GetTree(session_id=session_id, account_id=caller.account_id), "session")
    return Tree(session_id=session_id, active_node_id=session.active_node_id, nodes=tree)


@router.get("/path", response_model=NodePath, responses=responses(404))
async def read_path(
    session_id: str,
    gw: GatewayDep,
    caller: CallerDep,
    node_id: Annotated[str | None, Query(max_length=80)] = None,
    after_node_id: Annotated[str | None, Query(max_length=80)] = None,
) -> NodePath:
    """The conversation from the root to ``node_id`` (the active node by default), full nodes.

    With ``after_node_id`` (the last node of a path the client already holds) only the nodes after
    it come back when it lies on the path; otherwise the whole path from the root. A session with
    no node yet answers an empty path.
    """
    session = await get_session(gw, caller, session_id)
    for value in (node_id, after_node_id):
        if value is not None and not is_valid_id(value, "node"):
            raise not_found("node")
    tip = node_id or session.active_node_id  # the active node as read with the session
    rows: list[NodeRecord] = []
    if tip is not None:
        query = GetActivePath(
            session_id=session_id,
            node_id=tip,
            after_node_id=after_node_id,
            account_id=caller.account_id,
        )
        rows = await fetch(gw, query, "node")
    return NodePath(
        session_id=session_id,
        active_node_id=session.active_node_id,
        items=[to_node(r) for r in rows],
    )


async def _node(gw: GatewayDep, caller: CallerDep, session_id: str, node_id: str) -> Node:
    if not is_valid_id(node_id, "node"):
        raise not_found("node")
    await get_session(gw, caller, session_id)
    query = GetNode(session_id=session_id, node_id=node_id, account_id=caller.account_id)
    return to_node(await fetch(gw, query, "node"))


@router.get("/nodes/{node_id}", response_model=Node, responses=responses(404))
async def read_node(session_id: str, node_id: str, gw: GatewayDep, caller: CallerDep) -> Node:
    """One node with its full content."""
    return await _node(gw, caller, session_id, node_id)


@router.post("/switch_node", response_model=SessionState, responses=responses(404))
async def switch_node(
    session_id: str, body: SwitchNodeRequest, gw: GatewayDep, caller: CallerDep
) -> SessionState:
    """Make a node the active one: the next message continues the conversation from there.

    Only a node a conversation can go on from (an answer, or a turn whose tool calls all have
    results, of the main agent): 422 ``invalid_parent`` with ``details.reason`` otherwise.
    """
    await check_branch_point(gw, caller, session_id, body.node_id)
    raise_for_receipt(
        await gw.storage.send(
            SwitchActiveNode(command_id=new_id("cmd"), session_id=session_id, node_id=body.node_id)
        )
    )
    return await get_session(gw, caller, session_id)


@router.post(
    "/nodes/{node_id}/regenerate",
    status_code=202,
    response_model=MessageAccepted,
    responses={**SSE_RESPONSE, **responses(404, 409, 413)},
)
async def regenerate(
    session_id: str, node_id: str, body: RegenerateRequest, gw: GatewayDep, caller: CallerDep
) -> Any:
    """Answer a user message again: a new run of the same message, beside the earlier answer.

    ``node_id`` is the user message, or any node of the main agent's turn that answered it. The
    message is posted again under the same parent (``root`` for the first message), so the tree
    keeps both turns, each with its answer, as siblings, and the new one becomes active. Answers
    as posting a message does (202, or the run's event stream with ``stream=true``).
    """
    session, path = await main_path(gw, caller, session_id, node_id)
    message = turn_message(path, session.root_agent_id)
    if message is None:
        raise ApiError(
            422,
            "invalid_node",
            f"node {node_id} is not a user message of the main agent nor part of a turn "
            "answering one: there is nothing to answer again",
            details={"node_id": node_id},
        )
    try:
        again = PostMessageRequest(
            content=[_USER_BLOCK.validate_python(b.model_dump()) for b in message.content],
            parent_node_id=message.parent_id or ROOT_PARENT,
            multitask_strategy=body.multitask_strategy,
            stream=body.stream,
            agent_config=body.agent_config,
        )
    except ValidationError as exc:
        raise ApiError(
            422,
            "invalid_node",
            f"node {node_id}'s message cannot be sent again: {exc.errors()[0]['msg']}",
        ) from exc
    return await post_message(session_id, again, gw, caller)


@router.get("/nodes/{node_id}/context", response_model=ContextBuildReport, responses=responses(404))
async def context_preview(
    session_id: str, node_id: str, gw: GatewayDep, caller: CallerDep
) -> ContextBuildReport:
    """What the model would see if a run continued from this node (the context build report)."""
    session = await get_session(gw, caller, session_id)
    if not is_valid_id(node_id, "node"):
        raise not_found("node")
    query = GetActivePath(session_id=session_id, node_id=node_id, account_id=caller.account_id)
    rows = await fetch(gw, query, "node")
    if not rows:
        raise not_found("node")
    path = [to_node(r) for r in rows]
    _, report = ContextBuilder().build(path, session_id=session_id, config=_config(gw, session))
    return report


def _config(gw: GatewayDep, session: SessionState) -> AgentConfig:
    m = gw.ctx.settings.model
    base: dict[str, Any] = {
        "provider": m.provider,
        "model": m.name,
        "max_output_tokens": m.max_output_tokens,
        "context_window": m.context_window,
    }
    base.update(stored_overrides(session.metadata))
    return AgentConfig.model_validate(base)


@router.get("/events", response_model=EventList, responses=responses(404))
async def list_events(
    session_id: str,
    gw: GatewayDep,
    caller: CallerDep,
    after_seq: Annotated[int, Query(ge=0, le=2**62)] = 0,
    run_id: Annotated[str | None, Query(max_length=80)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> EventList:
    """Timeline events after ``after_seq`` (optionally of one run), in ``seq`` order."""
    await get_session(gw, caller, session_id)
    if run_id is not None and not is_valid_id(run_id, "run"):
        raise not_found("run")
    query = ListEvents(
        session_id=session_id,
        after_seq=after_seq,
        run_id=run_id,
        limit=limit,
        account_id=caller.account_id,
    )
    rows, cursor = await fetch_page(gw, query)
    if rows is None:
        raise not_found("session")
    items = [to_timeline_event(r) for r in rows]
    return EventList(items=items, next_after_seq=int(cursor) if cursor else None)


@router.get("/agents", response_model=AgentList, responses=responses(404))
async def list_agents(session_id: str, gw: GatewayDep, caller: CallerDep) -> AgentList:
    """Agents of the session (main, orchestrator, sub, fork)."""
    await get_session(gw, caller, session_id)
    records = await fetch(
        gw, ListAgents(session_id=session_id, account_id=caller.account_id), "session"
    )
    return AgentList(items=[to_agent_state(r) for r in records])
