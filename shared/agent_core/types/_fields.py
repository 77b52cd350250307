"""Annotated field types shared by the runtime and storage layers: ids and timestamps.

Private: import the layer modules (``runtime``, ``storage``) instead. Validators here raise
``ValueError`` so pydantic reports them as ordinary validation errors; the id rules themselves live
in :mod:`agent_core.ids` (one gate), this module only adapts them to pydantic.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field

from agent_core import ids
from agent_core.errors import AgentCoreError, ErrorPayload, ProviderErrorPayload

__all__ = [
    "AccountId",
    "AgentId",
    "AnyErrorPayload",
    "ArtifactId",
    "EventId",
    "IsoTimestamp",
    "NodeId",
    "PlanId",
    "RunId",
    "SessionId",
    "Strict",
    "TaskId",
    "ToolCallId",
    "UtcDatetime",
    "from_iso",
    "to_iso",
    "utc_now",
]


class Strict(BaseModel):
    """Base of every runtime and storage model: unknown fields are an error (seed 001)."""

    model_config = ConfigDict(extra="forbid")


def utc_now() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


def to_iso(value: datetime) -> str:
    """The canonical stored form of a timestamp: ``YYYY-MM-DDTHH:MM:SS.ffffff+00:00``.

    Fixed width (microseconds always present), so stored strings sort in time order.
    """
    if value.tzinfo is None:
        raise ValueError("naive datetime: timestamps must be timezone-aware")
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def from_iso(value: str) -> datetime:
    """Parse an ISO-8601 timestamp with an offset into an aware UTC datetime; naive is an error."""
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise ValueError("timestamp has no UTC offset")
    return parsed.astimezone(UTC)


def _canonical_iso(value: str) -> str:
    return to_iso(from_iso(value))


def _as_utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


UtcDatetime = Annotated[AwareDatetime, AfterValidator(_as_utc)]
"""A timezone-aware datetime, normalised to UTC (runtime layer)."""

IsoTimestamp = Annotated[str, AfterValidator(_canonical_iso)]
"""An ISO-8601 timestamp string with an offset, normalised to :func:`to_iso` form (storage layer)."""


def _prefixed(prefix: ids.IdPrefix) -> Callable[[str], str]:
    def check(value: str) -> str:
        if not ids.is_valid_id(value, prefix):
            raise ValueError(f"expected an id starting with {prefix + '_'!r}")
        return value

    return check


def _session_id(value: str) -> str:
    try:
        return ids.validate_session_id(value)
    except AgentCoreError as exc:
        raise ValueError(exc.message) from None


def _identifier(value: str) -> str:
    # Account ids become path segments (<home>/accounts/<account_id>/…): same gate as table names.
    try:
        return ids.sanitize_identifier(value)
    except AgentCoreError as exc:
        raise ValueError(exc.message) from None


SessionId = Annotated[str, AfterValidator(_session_id)]
AccountId = Annotated[str, AfterValidator(_identifier)]
NodeId = Annotated[str, AfterValidator(_prefixed("node"))]
RunId = Annotated[str, AfterValidator(_prefixed("run"))]
AgentId = Annotated[str, AfterValidator(_prefixed("agent"))]
EventId = Annotated[str, AfterValidator(_prefixed("evt"))]
ArtifactId = Annotated[str, AfterValidator(_prefixed("artifact"))]
TaskId = Annotated[str, AfterValidator(_prefixed("task"))]
PlanId = Annotated[str, AfterValidator(_prefixed("plan"))]
# Tool call ids are chosen by the provider (``call_…``, ``toolu_…``): no prefix, bounded length,
# the same bounds as protocol.ToolCallBlock.id.
ToolCallId = Annotated[str, Field(min_length=1, max_length=128)]

# A provider error payload carries two more fields; with ``extra="forbid"`` a plain ErrorPayload
# refuses them, so trying ErrorPayload first picks the class that matches the data, deterministically.
AnyErrorPayload = Annotated[ErrorPayload | ProviderErrorPayload, Field(union_mode="left_to_right")]
