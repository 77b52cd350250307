"""Annotated field types shared by the runtime and storage layers: ids and timestamps.

Private: import the layer modules (``runtime``, ``storage``) instead. The id rules live in
:mod:`agent_core.ids` (one gate) as patterns this module hands to pydantic, which checks them
natively; validators here raise ``ValueError`` so pydantic reports them as ordinary errors.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Final

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

from agent_core import ids
from agent_core.errors import ErrorPayload, ProviderErrorPayload

__all__ = [
    "AccountId",
    "LOGICAL_PATH_PATTERN",
    "LogicalPath",
    "AgentId",
    "AnyErrorPayload",
    "ArtifactId",
    "EventId",
    "IsoTimestamp",
    "NotBool",
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


def _not_a_bool(value: Any) -> Any:
    if isinstance(value, bool):  # JSON's true/false is not 1/0 (pydantic's lax mode says it is)
        raise ValueError("give a number, not true or false")
    return value


NotBool = BeforeValidator(_not_a_bool)
"""Annotate a number field of a request with it: ``Annotated[int | None, NotBool]``."""


class Strict(BaseModel):
    """Base of every runtime and storage model: unknown fields are an error."""

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


class _Utc:
    """The schema of :data:`UtcDatetime`: a UTC value is checked in pydantic-core alone.

    Every runtime event carries a timestamp (a node event two), and nearly all of them are in
    UTC already: checking that natively (``tz_constraint=0``) spares the Python call that
    converts one (~0.6 µs a value, a tenth of what an SDK client spends on an event). Any other
    offset falls through to the conversion; a naive or unparsable value is one clear error.
    """

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        converted = core_schema.no_info_after_validator_function(
            _as_utc, core_schema.datetime_schema(tz_constraint="aware")
        )
        return core_schema.union_schema(
            [core_schema.datetime_schema(tz_constraint=0), converted],
            mode="left_to_right",
            custom_error_type="datetime_aware",
            custom_error_message="Input should be a datetime with a timezone offset",
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"type": "string", "format": "date-time"}


UtcDatetime = Annotated[datetime, _Utc]
"""A timezone-aware datetime, normalised to UTC (runtime layer)."""

IsoTimestamp = Annotated[str, AfterValidator(_canonical_iso)]
"""An ISO-8601 timestamp string with an offset, normalised to :func:`to_iso` form (storage layer)."""


def _prefixed(prefix: ids.IdPrefix) -> object:
    # A pattern, not a Python validator: pydantic-core checks it natively, which keeps every
    # event and command cheap to decode (ids are on every one). Same rule as ids.is_valid_id.
    return Field(pattern=ids.id_pattern(prefix))


# ids.validate_session_id and ids.sanitize_identifier, as native patterns (ASCII only: a
# pattern's \d would admit other scripts' digits).
SessionId = Annotated[str, Field(pattern=rf"^{ids.SESSION_ID_PATTERN}$")]
# Account ids become path segments (<home>/accounts/<account_id>/…): same gate as table names.
AccountId = Annotated[str, Field(pattern=rf"^{ids.IDENTIFIER_PATTERN}$")]
# A path as the bus carries it: relative to something every host names the same way (a session's
# workspace, a project root's name, a file-store key), never a host path. The pattern refuses a
# leading '/', '\\' or '~' and any backslash, so an absolute POSIX or Windows path cannot pass;
# the service that resolves it still checks '..' and links against its own home.
LOGICAL_PATH_PATTERN: Final = r"^[^/\\~][^\\]*$"
LogicalPath = Annotated[str, Field(min_length=1, max_length=1024, pattern=LOGICAL_PATH_PATTERN)]
NodeId = Annotated[str, _prefixed("node")]
RunId = Annotated[str, _prefixed("run")]
AgentId = Annotated[str, _prefixed("agent")]
EventId = Annotated[str, _prefixed("evt")]
ArtifactId = Annotated[str, _prefixed("artifact")]
TaskId = Annotated[str, _prefixed("task")]
PlanId = Annotated[str, _prefixed("plan")]
# Tool call ids are chosen by the provider (``call_…``, ``toolu_…``): no prefix, bounded length,
# the same bounds as protocol.ToolCallBlock.id.
ToolCallId = Annotated[str, Field(min_length=1, max_length=128)]

# A provider error payload carries two more fields; with ``extra="forbid"`` a plain ErrorPayload
# refuses them, so trying ErrorPayload first picks the class that matches the data, deterministically.
AnyErrorPayload = Annotated[ErrorPayload | ProviderErrorPayload, Field(union_mode="left_to_right")]
