"""Runs: list per session, get, cancel (optionally waiting for the end), and events as SSE."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query
from fastapi.responses import JSONResponse

from agent_core import runqueue
from agent_core.bus.contracts.storage import ListRuns
from agent_core.observability.metrics import SSE_STREAMS_OPEN
from agent_core.types.api import RunList
from agent_core.types.mappers import to_run_state
from agent_core.types.runtime import RunState
from services.gateway.auth import Caller
from services.gateway.errors import responses
from services.gateway.sse import (
    Cursor,
    SseResponse,
    parse_cursor,
    run_event_stream,
)
from services.gateway.state import CallerDep, Gateway, GatewayDep, fetch, get_run, get_session

__all__ = ["SSE_RESPONSE", "open_stream", "router"]

router = APIRouter(prefix="/v1/sessions/{session_id}/runs", tags=["runs"])

SSE_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Server-Sent Events: `id:` lines are resumable with Last-Event-ID; the "
        "stream ends after the run's `run_finished`; `: keep-alive` comments while idle. The "
        "child runs a run starts (`dispatch_worker`, `fork_agent`) stream on it too, under their "
        "own `run_id` (a child's end is a `run_status_changed` there), and on their own streams.",
        "content": {
            "text/event-stream": {
                "schema": {"type": "string"},
                "example": 'id: 1718000000000-0\nevent: text_delta\ndata: {"type":"text_delta",'
                '"run_id":"run_0123456789abcdef","text":"Hel",...}\n\n',
            }
        },
    }
}

_POLL_S = 0.1


async def open_stream(
    gw: Gateway,
    caller: Caller,
    session_id: str,
    run_id: str,
    *,
    cursor: Cursor,
    keepalive_s: float,
    slot_taken: bool = False,
    fresh: bool = False,
) -> SseResponse:
    """Take one of the key's stream slots (unless taken) and answer with the run's events
    (``fresh``: the run was queued by this request, see :func:`run_event_stream`)."""
    if not slot_taken:
        await gw.slots.acquire(caller.key_id)
    SSE_STREAMS_OPEN.inc()

    async def close() -> None:
        SSE_STREAMS_OPEN.dec()
        await gw.slots.release(caller.key_id)

    body = run_event_stream(
        gw,
        session_id,
        run_id,
        cursor=cursor,
        keepalive_s=keepalive_s,
        fresh=fresh,
    )
    return SseResponse(body, on_close=close)


@router.get("", response_model=RunList, responses=responses(404))
async def list_runs(session_id: str, gw: GatewayDep, caller: CallerDep) -> RunList:
    """Runs of the session, oldest first."""
    await get_session(gw, caller, session_id)
    records = await fetch(
        gw, ListRuns(session_id=session_id, account_id=caller.account_id), "session"
    )
    return RunList(items=[to_run_state(r) for r in records])


@router.get("/{run_id}", response_model=RunState, responses=responses(404))
async def read_run(session_id: str, run_id: str, gw: GatewayDep, caller: CallerDep) -> RunState:
    """One run."""
    return await get_run(gw, caller, session_id, run_id)


@router.post(
    "/{run_id}/cancel",
    response_model=RunState,
    responses={**responses(404), 202: {"model": RunState, "description": "cancel requested"}},
)
async def cancel_run(
    session_id: str,
    run_id: str,
    gw: GatewayDep,
    caller: CallerDep,
    wait: bool = False,
    timeout_s: Annotated[float, Query(gt=0, le=120)] = 30.0,
) -> Any:
    """Cancel a run; with ``wait=true`` answer once it is terminal (200) or the timeout passed.

    Cancelling a terminal run changes nothing and answers it as it is. Answers 202 when the
    cancel was requested but the run is not terminal yet.
    """
    run = await get_run(gw, caller, session_id, run_id)
    if run.is_terminal:
        return run
    await runqueue.cancel_run(gw.storage, gw.queue, session_id=session_id, run_id=run_id)
    deadline = time.monotonic() + (timeout_s if wait else 0)
    while True:
        run = await get_run(gw, caller, session_id, run_id)
        if run.is_terminal or time.monotonic() >= deadline:
            break
        await asyncio.sleep(_POLL_S)
    if run.is_terminal:
        return run
    return JSONResponse(run.model_dump(mode="json"), status_code=202)


@router.get(
    "/{run_id}/events",
    status_code=200,
    response_class=SseResponse,
    responses={**SSE_RESPONSE, **responses(400, 404)},
)
async def run_events(
    session_id: str,
    run_id: str,
    gw: GatewayDep,
    caller: CallerDep,
    last_event_id: Annotated[str | None, Header(max_length=64)] = None,
    after: Annotated[str | None, Query(max_length=64, description="like Last-Event-ID")] = None,
    keepalive_s: Annotated[float, Query(ge=0.2, le=60)] = 15.0,
) -> SseResponse:
    """The run's events from the start, or after ``Last-Event-ID``; ends with ``run_finished``."""
    cursor = parse_cursor(last_event_id or after)
    await get_run(gw, caller, session_id, run_id)
    return await open_stream(gw, caller, session_id, run_id, cursor=cursor, keepalive_s=keepalive_s)
