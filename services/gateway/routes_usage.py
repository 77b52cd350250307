"""Usage totals of the caller's account by day and model, and a run's file changes.

Both read what the storage-writer keeps: the usage counters that each run's end adds to (never a
sum over runs), and the timeline's tool call ends, which carry the files each call changed in
``output/`` and ``scratchpad/`` (``tool_completed`` / ``tool_failed``, ``files``).
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

from fastapi import APIRouter, Query

from agent_core.bus.contracts.storage import GetUsage, ListEvents
from agent_core.types.api import FileChange, RunFiles, UsageReport, UsageRow, UsageTotals
from agent_core.types.enums import EventType
from agent_core.types.mappers import to_timeline_event
from agent_core.types.runtime import TimelineEvent
from services.gateway.errors import ApiError, responses
from services.gateway.state import CallerDep, GatewayDep, fetch_optional, fetch_page, get_run

__all__ = ["router"]

router = APIRouter(tags=["usage"])

_ENDS = (EventType.TOOL_COMPLETED, EventType.TOOL_FAILED)
_PAGE = 1000
# A day as the query gives it: only YYYY-MM-DD (a timestamp such as "0" is not a day), and a
# day of the calendar (``format: date``; 2026-02-31 is a 422 ``invalid_date``).
_DAY: dict[str, Any] = {
    "pattern": r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
    "json_schema_extra": {"format": "date"},
}


def _sum(rows: list[UsageRow]) -> UsageTotals:
    fields = UsageTotals.model_fields
    return UsageTotals(**{name: sum(getattr(r, name) for r in rows) for name in fields})


@router.get("/v1/usage", response_model=UsageReport, responses=responses(422))
async def read_usage(
    gw: GatewayDep,
    caller: CallerDep,
    since: Annotated[str | None, Query(description="first day (UTC)", **_DAY)] = None,
    until: Annotated[str | None, Query(description="last day (UTC)", **_DAY)] = None,
) -> UsageReport:
    """The caller's account's token usage by day (UTC, the day each run ended) and model,
    from ``since`` to ``until`` (``YYYY-MM-DD``, both included, open when left out; a range
    that ends before it starts holds nothing), with the sum."""
    first, last = _day("since", since), _day("until", until)
    query = GetUsage(account_id=caller.account_id, since=first, until=last)
    rows = await fetch_optional(gw, query) or []
    return UsageReport(since=first, until=last, items=rows, totals=_sum(rows))


def _day(name: str, value: str | None) -> dt.date | None:
    """A ``YYYY-MM-DD`` query value as a date (only that form: no timestamps, no times)."""
    if value is None:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise ApiError(
            422, "invalid_date", f"{name} is not a day of the calendar", details={name: value}
        ) from None


def _changes(event: TimelineEvent) -> list[FileChange]:
    payload: dict[str, Any] = event.payload
    files = payload.get("files")
    if not isinstance(files, list):
        return []
    return [
        FileChange(
            **{k: f[k] for k in ("path", "area", "change", "size_bytes", "artifact_id") if k in f},
            tool_call_id=event.tool_call_id,
            tool=payload.get("tool"),
            node_id=event.node_id,
            at=payload.get("ended_at"),
        )
        for f in files
        if isinstance(f, dict)
    ]


@router.get(
    "/v1/sessions/{session_id}/runs/{run_id}/files",
    response_model=RunFiles,
    responses=responses(404),
)
async def run_files(session_id: str, run_id: str, gw: GatewayDep, caller: CallerDep) -> RunFiles:
    """The files the run's tool calls created, modified or deleted in ``output/`` and
    ``scratchpad/``, each with the call that did it, in the order the calls ended (kept with the
    run's timeline, so a reload or a finished run lists them all)."""
    await get_run(gw, caller, session_id, run_id)
    items: list[FileChange] = []
    after = 0
    while True:
        query = ListEvents(
            session_id=session_id,
            run_id=run_id,
            after_seq=after,
            limit=_PAGE,
            account_id=caller.account_id,
        )
        rows, cursor = await fetch_page(gw, query)
        for row in rows or []:
            if row.event_type in _ENDS:
                items += _changes(to_timeline_event(row))
        if not cursor:
            return RunFiles(run_id=run_id, items=items)
        after = int(cursor)
