"""Posting a user message: queue a run (202) or answer with its event stream (``stream=true``)."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Header

from agent_core.bus.contracts.refusals import RefusalCode
from agent_core.bus.contracts.storage import GetActivePath
from agent_core.context.branch_points import branch_refusal
from agent_core.errors import StorageError
from agent_core.ids import is_valid_id
from agent_core.observability.metrics import RUNS_SUBMITTED
from agent_core.runqueue import SessionBusyError, submit_message
from agent_core.types.api import (
    ROOT_PARENT,
    AssistantPin,
    MessageAccepted,
    PostMessageRequest,
)
from agent_core.types.mappers import to_node
from agent_core.types.runtime import AgentConfigOverrides, Node, SessionState
from services.gateway.auth import Caller
from services.gateway.errors import ApiError, not_found, responses
from services.gateway.message_media import checked_blocks
from services.gateway.routes_assistants import check_overridable
from services.gateway.routes_runs import SSE_RESPONSE, open_stream
from services.gateway.sse import Cursor
from services.gateway.state import (
    CallerDep,
    Gateway,
    GatewayDep,
    agent_overrides,
    fetch,
    get_session,
    valid_session_id,
)

__all__ = ["check_branch_point", "main_path", "post_message", "refusal", "router"]

router = APIRouter(prefix="/v1/sessions/{session_id}/messages", tags=["messages"])


@router.post(
    "",
    status_code=202,
    response_model=MessageAccepted,
    responses={**SSE_RESPONSE, **responses(404, 409, 413)},
)
async def post_message(
    session_id: str,
    body: PostMessageRequest,
    gw: GatewayDep,
    caller: CallerDep,
    idempotency_key: Annotated[
        str | None,
        Header(
            min_length=1,
            max_length=255,
            pattern=r"^[\x21-\x7e]+$",
            description="makes a retry safe: a repeat with the same key answers with the run "
            "the first request made (its content is not compared) instead of a second one",
        ),
    ] = None,
) -> Any:
    """Append a user message and queue its run (see ``multitask_strategy`` for a busy session).

    ``parent_node_id`` branches from an earlier node. With ``stream=true`` the answer is the
    run's event stream (200, ``text/event-stream``) instead of 202. With an ``Idempotency-Key``
    header a request may be repeated (after an error or a lost answer) without a second run.
    """
    # No session read first: the run's creation checks the owner (404 alike for a missing
    # session and another account's), refuses an archived session and returns the session's
    # stored agent config, which submit puts under the message's own.
    if not valid_session_id(session_id):
        raise not_found("session")
    overrides = agent_overrides(gw, body.agent_config)
    if body.agent_config is not None:  # a session made from an assistant limits what may change
        await _check_pinned(gw, caller, session_id, body.agent_config)
    if body.parent_node_id is not None:
        await _check_parent(gw, caller, session_id, body.parent_node_id)
    content = await checked_blocks(gw, caller, session_id, body.blocks(), overrides)
    if body.stream:  # take the slot first: a refused stream must not leave a run behind
        await gw.slots.acquire(caller.key_id)
    try:
        submitted = await submit_message(
            gw.storage,
            gw.queue,
            account_id=caller.account_id,
            session_id=session_id,
            content=list(content),
            parent_node_id=body.parent_node_id,
            strategy=body.multitask_strategy,
            config_overrides=overrides,
            idempotency_key=idempotency_key,
        )
    except BaseException as exc:
        if body.stream:
            await gw.slots.release(caller.key_id)
        mapped = refusal(exc)
        if mapped is exc:
            raise
        raise mapped from exc
    RUNS_SUBMITTED.inc()
    if body.stream:
        response = await open_stream(
            gw,
            caller,
            session_id,
            submitted.run_id,
            cursor=Cursor(redis_id="0-0"),
            keepalive_s=15,
            slot_taken=True,
            fresh=True,
        )
        response.headers["X-Run-Id"] = submitted.run_id
        response.headers["X-Node-Id"] = submitted.node_id
        return response
    return MessageAccepted(
        session_id=session_id,
        run_id=submitted.run_id,
        node_id=submitted.node_id,
        kind="branch" if submitted.kind == "branch" else "main",
        events_url=f"/v1/sessions/{session_id}/runs/{submitted.run_id}/events",
    )


async def _check_parent(gw: Gateway, caller: Caller, session_id: str, node_id: str) -> None:
    """404 unless ``node_id`` is a node of the caller's session (or ``root``); 422
    ``invalid_parent`` unless a conversation can go on from it."""
    if node_id == ROOT_PARENT:
        await get_session(gw, caller, session_id)
        return
    await check_branch_point(gw, caller, session_id, node_id)


async def main_path(
    gw: Gateway, caller: Caller, session_id: str, node_id: str
) -> tuple[SessionState, list[Node]]:
    """The caller's session and the path from the root to its node ``node_id`` (404 either)."""
    if not is_valid_id(node_id, "node"):
        raise not_found("node")
    query = GetActivePath(session_id=session_id, node_id=node_id, account_id=caller.account_id)
    session, rows = await asyncio.gather(
        get_session(gw, caller, session_id), fetch(gw, query, "node")
    )
    if not rows:
        raise not_found("node")
    return session, [to_node(r) for r in rows]


async def check_branch_point(gw: Gateway, caller: Caller, session_id: str, node_id: str) -> None:
    """404 unless ``node_id`` is a node of the caller's session; 422 ``invalid_parent`` (with
    ``details.reason``) unless a user message may follow it (``context/branch_points.py``)."""
    session, path = await main_path(gw, caller, session_id, node_id)
    why = branch_refusal(path, session.root_agent_id)
    if why is not None:
        details = {"node_id": node_id, "reason": why.reason}
        raise ApiError(422, "invalid_parent", why.message, details=details)


async def _check_pinned(
    gw: Gateway, caller: Caller, session_id: str, overrides: AgentConfigOverrides
) -> None:
    """409 when the session was made from an assistant that does not let these fields change
    (read only for a message that carries overrides: most carry none)."""
    session = await get_session(gw, caller, session_id)
    pin = AssistantPin.of(session.metadata)
    if pin is not None:
        check_overridable(pin.overridable, overrides)


def refusal(exc: BaseException) -> BaseException:
    """The API error for a refused submission (anything else as it is)."""
    if isinstance(exc, SessionBusyError):
        return ApiError(409, exc.code, exc.message)
    if isinstance(exc, StorageError) and exc.code == "not_found":
        return not_found("session")
    if isinstance(exc, StorageError) and exc.code == RefusalCode.SESSION_ARCHIVED:
        return ApiError(409, exc.code, "the session is archived; unarchive it first")
    return exc
