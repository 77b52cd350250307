"""Permission requests: list those a session's runs wait on, allow or deny one (policy ``ask``).

A waiting run stored its :class:`PermissionRequest` (with the deadline after which it is denied)
and blocks until a decision arrives; the decision is set once (a second one answers 409, and so
does a decision after the deadline denied the request), and only by the session's account. See
``docs/architecture.md``, "Run lifecycle and endings".
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter

from agent_core.bus.contracts.storage import ListRuns
from agent_core.bus.names import BusTtl
from agent_core.types.api import PermissionDecisionRequest, PermissionList
from agent_core.types.enums import TERMINAL_RUN_STATUSES, PermissionBehavior
from agent_core.types.protocol import PermissionDecision, PermissionRequest
from services.gateway.errors import ApiError, not_found, responses
from services.gateway.state import CallerDep, GatewayDep, fetch, get_session

__all__ = ["router"]

router = APIRouter(prefix="/v1/sessions/{session_id}/permissions", tags=["permissions"])

_REQUEST_ID = re.compile(r"[A-Za-z0-9_\-]{1,128}")


@router.get("", response_model=PermissionList, responses=responses(404))
async def list_pending(session_id: str, gw: GatewayDep, caller: CallerDep) -> PermissionList:
    """The permission requests of this session's runs that wait for a decision, oldest first."""
    await get_session(gw, caller, session_id)
    redis, names = gw.ctx.redis, gw.ctx.names
    key = names.session_permissions(session_id)
    stored = await redis.hgetall(key)
    if not stored:
        return PermissionList(items=[])
    runs = await fetch(gw, ListRuns(session_id=session_id, account_id=caller.account_id), "session")
    ended = {r.run_id for r in runs if r.status in TERMINAL_RUN_STATUSES}
    now = datetime.now(UTC)
    items, stale = [], []
    for request_id, raw in stored.items():
        request = PermissionRequest.model_validate_json(raw)
        # Left behind by a run that ended or by a worker that died while it waited.
        if request.run_id in ended or (request.expires_at is not None and request.expires_at < now):
            stale.append(request_id)
        else:
            items.append(request)
    if stale:
        await redis.hdel(key, *stale)
    items.sort(key=lambda r: r.expires_at or now)
    return PermissionList(items=items)


def _check_arguments(request: PermissionRequest, arguments: dict[str, Any]) -> None:
    """422 unless ``arguments`` fit the tool's input schema (each problem with its field)."""
    if request.input_schema is None:
        raise ApiError(
            422, "arguments_not_editable", "this request does not say its tool's arguments"
        )
    from jsonschema import Draft202012Validator  # only when arguments were edited: it is heavy

    validator = Draft202012Validator(request.input_schema)
    problems = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
    if problems:
        errors = [
            {
                "field": ".".join(str(p) for p in e.absolute_path) or "arguments",
                "message": e.message,
            }
            for e in problems
        ]
        raise ApiError(
            422,
            "invalid_arguments",
            f"the arguments do not fit {request.tool_call.name}: {errors[0]['message']}",
            details={"errors": errors},
        )


@router.post("/{request_id}", response_model=PermissionDecision, responses=responses(404, 409, 422))
async def decide(
    session_id: str,
    request_id: str,
    body: PermissionDecisionRequest,
    gw: GatewayDep,
    caller: CallerDep,
) -> PermissionDecision:
    """Allow or deny the pending tool call ``request_id`` of this session; an allow may carry
    edited ``arguments``, which must fit the tool's input schema (422 ``invalid_arguments``)
    and are what the call then runs with."""
    await get_session(gw, caller, session_id)
    if _REQUEST_ID.fullmatch(request_id) is None:
        raise not_found("permission request")
    redis, names = gw.ctx.redis, gw.ctx.names
    raw = await redis.get(names.permission_request(session_id, request_id))
    if raw is None:
        raise not_found("permission request")
    request = PermissionRequest.model_validate_json(raw)
    if request.session_id != session_id:
        raise not_found("permission request")
    edited = body.arguments if body.behavior is PermissionBehavior.ALLOW else None
    if edited is not None:
        _check_arguments(request, edited)
    decision = PermissionDecision(
        request_id=request_id,
        behavior=body.behavior,
        reason=body.reason,
        decided_by=caller.key_id,
        arguments=edited,
    )
    stored = await redis.set(
        names.permission_decision(session_id, request_id),
        decision.model_dump_json(),
        ex=BusTtl.PERMISSION_S,
        nx=True,
    )
    if not stored:
        raise ApiError(409, "already_decided", "this request has been decided already")
    async with redis.pipeline(transaction=False) as pipe:
        wake = names.permission_wake(session_id, request_id)
        pipe.rpush(wake, b"1")  # the waiting run goes on at once
        pipe.expire(wake, BusTtl.PERMISSION_WAKE_S)
        pipe.hdel(names.session_permissions(session_id), request_id)
        await pipe.execute()
    return decision
