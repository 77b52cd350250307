"""Permission decisions: allow or deny a tool call that a run is waiting on (policy ``ask``).

The waiting run stored its :class:`PermissionRequest` in Redis and polls for a decision; the
decision is set once (a second decision answers 409), and only by the session's account.
"""

from __future__ import annotations

import re

from fastapi import APIRouter

from agent_core.types.api import PermissionDecisionRequest
from agent_core.types.protocol import PermissionDecision, PermissionRequest
from services.gateway.errors import ApiError, not_found, responses
from services.gateway.state import CallerDep, GatewayDep, get_session

__all__ = ["router"]

router = APIRouter(prefix="/v1/sessions/{session_id}/permissions", tags=["permissions"])

_REQUEST_ID = re.compile(r"[A-Za-z0-9_\-]{1,128}")
_DECISION_TTL_S = 7 * 24 * 3600


@router.post("/{request_id}", response_model=PermissionDecision, responses=responses(404, 409))
async def decide(
    session_id: str,
    request_id: str,
    body: PermissionDecisionRequest,
    gw: GatewayDep,
    caller: CallerDep,
) -> PermissionDecision:
    """Allow or deny the pending tool call ``request_id`` of this session."""
    await get_session(gw, caller, session_id)
    if _REQUEST_ID.fullmatch(request_id) is None:
        raise not_found("permission request")
    names = gw.ctx.names
    raw = await gw.ctx.redis.get(names.key("permission-request", request_id))
    if raw is None:
        raise not_found("permission request")
    request = PermissionRequest.model_validate_json(raw)
    if request.session_id != session_id:
        raise not_found("permission request")
    decision = PermissionDecision(
        request_id=request_id,
        behavior=body.behavior,
        reason=body.reason,
        decided_by=caller.key_id,
    )
    stored = await gw.ctx.redis.set(
        names.key("permission", request_id),
        decision.model_dump_json(),
        ex=_DECISION_TTL_S,
        nx=True,
    )
    if not stored:
        raise ApiError(409, "already_decided", "this request has been decided already")
    return decision
