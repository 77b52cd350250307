"""Manual compaction: ``POST /v1/sessions/{id}/compact`` queues the compact command as a run.

The command is a message like any other (``/compact``), so it takes its place in the session's
lane after the runs before it, is fenced and ended like every run, and is seen in the tree and
the timeline: its run writes a ``compaction`` node covering everything before the command (the
covered nodes stay in the tree) and answers what it did. The chat's ``/compact`` sends the same.
"""

from __future__ import annotations

from fastapi import APIRouter

from agent_core.observability.metrics import RUNS_SUBMITTED
from agent_core.runqueue import submit_message
from agent_core.runtime.recovery import COMPACT_COMMAND
from agent_core.types.api import MessageAccepted
from agent_core.types.protocol import TextBlock
from services.gateway.errors import not_found, responses
from services.gateway.routes_messages import refusal
from services.gateway.state import CallerDep, GatewayDep, valid_session_id

__all__ = ["router"]

router = APIRouter(prefix="/v1/sessions/{session_id}", tags=["messages"])


@router.post(
    "/compact", status_code=202, response_model=MessageAccepted, responses=responses(404, 409)
)
async def compact(session_id: str, gw: GatewayDep, caller: CallerDep) -> MessageAccepted:
    """Compact the session's context now: a run that summarizes everything before it into a
    ``compaction`` node (non-destructive: the summarized nodes stay in the tree)."""
    if not valid_session_id(session_id):
        raise not_found("session")
    try:
        submitted = await submit_message(
            gw.storage,
            gw.queue,
            account_id=caller.account_id,
            session_id=session_id,
            content=[TextBlock(text=COMPACT_COMMAND)],
        )
    except Exception as exc:
        mapped = refusal(exc)
        if mapped is exc:
            raise
        raise mapped from exc
    RUNS_SUBMITTED.inc()
    return MessageAccepted(
        session_id=session_id,
        run_id=submitted.run_id,
        node_id=submitted.node_id,
        kind="main",
        events_url=f"/v1/sessions/{session_id}/runs/{submitted.run_id}/events",
    )
