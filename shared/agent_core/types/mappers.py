"""Storage → runtime conversion: one function per record, in one direction.

A row read from SQLite becomes its runtime object here and nowhere else; nothing converts a
runtime object back into a row — the storage-writer writes the columns from the commands it
applies (``services/storage_writer``), in the stored form docs/architecture.md describes
("Storage").

Mappers only rename fields, parse JSON, convert enums and timestamps and fill defaults; they judge
no business rule. Their only error is :class:`~agent_core.errors.SchemaError` with code
``"mapping_failed"``: the data cannot be converted. Its details name the record and the failing
fields, never the values (which may hold user data or secrets).

What they read: JSON columns in any spacing; SQL NULL ``metadata``/``payload`` as ``{}``, NULL
``turn_count``/``usage_json`` as 0 / zero usage; content blocks without their ``None`` fields
(defaults restore them); ISO-8601 timestamps with an offset, as timezone-aware UTC datetimes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from agent_core.errors import SchemaError
from agent_core.types._fields import LOGICAL_PATH_PATTERN, AnyErrorPayload
from agent_core.types.protocol import CONTENT_BLOCKS, Usage
from agent_core.types.runtime import (
    AgentState,
    ArtifactRef,
    ChildAgentResult,
    Node,
    RunFinished,
    RunState,
    SessionState,
    TimelineEvent,
)
from agent_core.types.storage import (
    AgentRecord,
    ArtifactRecord,
    EventRecord,
    NodeRecord,
    RunRecord,
    SessionRecord,
)

__all__ = [
    "to_agent_state",
    "to_artifact_ref",
    "to_node",
    "to_run_finished",
    "to_run_state",
    "to_session_state",
    "to_timeline_event",
]

_M = TypeVar("_M", bound=BaseModel)
_ERROR_PAYLOAD: TypeAdapter[AnyErrorPayload] = TypeAdapter(AnyErrorPayload)


def _fail(what: str, fields: list[str], reason: str, cause: BaseException | None) -> SchemaError:
    return SchemaError(
        "mapping_failed",
        f"cannot convert {what}: {reason}",
        details={"record": what, "fields": fields},
        cause=cause,
    )


def _field_errors(exc: ValidationError) -> list[str]:
    # Locations and error types only: ``input`` would copy the offending value into the error.
    return [f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['type']}" for e in exc.errors()]


def _build(cls: type[_M], what: str, data: Mapping[str, Any]) -> _M:
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise _fail(what, _field_errors(exc), "invalid fields", exc) from exc


def _load(text: str, what: str, field: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:  # JSONDecodeError and invalid escapes
        raise _fail(what, [field], "column is not valid JSON", exc) from exc


def _load_object(text: str | None, what: str, field: str) -> dict[str, Any]:
    if text is None:
        return {}
    value = _load(text, what, field)
    if not isinstance(value, dict):
        raise _fail(what, [field], "column is not a JSON object", None)
    return value


def _parse(cls: type[_M], text: str, what: str, field: str) -> _M:
    try:
        return cls.model_validate_json(text)
    except ValidationError as exc:
        raise _fail(
            what, [field, *_field_errors(exc)], "column does not match its schema", exc
        ) from exc


def _parse_error(text: str | None, what: str) -> AnyErrorPayload | None:
    if text is None:
        return None
    try:
        return _ERROR_PAYLOAD.validate_json(text)
    except ValidationError as exc:
        raise _fail(what, ["error_json", *_field_errors(exc)], "not an error payload", exc) from exc


# ---------------------------------------------------------------------------- sessions


def to_session_state(record: SessionRecord) -> SessionState:
    """The runtime view of a ``sessions`` row."""
    data = record.model_dump(exclude={"metadata_json"})
    data["metadata"] = _load_object(record.metadata_json, "session", "metadata_json")
    return _build(SessionState, "session", data)


# ---------------------------------------------------------------------------- agents


def to_agent_state(record: AgentRecord) -> AgentState:
    """The runtime view of an ``agents`` row; ``result_json`` is a :class:`ChildAgentResult`."""
    data = record.model_dump(exclude={"metadata_json", "result_json"})
    data["metadata"] = _load_object(record.metadata_json, "agent", "metadata_json")
    if record.result_json is not None:
        data["result"] = _parse(ChildAgentResult, record.result_json, "agent", "result_json")
    return _build(AgentState, "agent", data)


# ---------------------------------------------------------------------------- runs


def to_run_state(record: RunRecord) -> RunState:
    """The runtime view of a ``runs`` row (``end_node_id`` → ``last_node_id``)."""
    data = record.model_dump(
        exclude={
            "end_node_id",
            "turn_count",
            "usage_json",
            "error_json",
            "metadata_json",
            "claim_command_id",
        }
    )
    data["last_node_id"] = record.end_node_id
    data["turn"] = record.turn_count or 0
    data["usage"] = (
        Usage()
        if record.usage_json is None
        else _parse(Usage, record.usage_json, "run", "usage_json")
    )
    data["error"] = _parse_error(record.error_json, "run")
    data["metadata"] = _load_object(record.metadata_json, "run", "metadata_json")
    return _build(RunState, "run", data)


def to_run_finished(state: RunState) -> RunFinished:
    """The ``run_finished`` event of an ended run, from its record: what a reader that finds the
    run ended (the gateway) or a worker that closes a dead attempt's stream sends. It carries the
    run's end time (``updated_at``), not the time it is sent."""
    return RunFinished(
        run_id=state.run_id,
        session_id=state.session_id,
        agent_id=state.agent_id,
        status=state.status,
        end_reason=state.end_reason,
        turns=state.turn,
        usage=state.usage,
        error=state.error,
        last_node_id=state.last_node_id,
        created_at=state.updated_at,
    )


# ---------------------------------------------------------------------------- nodes


def to_node(record: NodeRecord) -> Node:
    """The runtime node of a ``nodes_<session_id>`` row; ``content_json`` is a block list."""
    try:
        content = CONTENT_BLOCKS.validate_json(record.content_json)
    except ValidationError as exc:
        raise _fail(
            "node", ["content_json", *_field_errors(exc)], "not a list of content blocks", exc
        ) from exc
    data = record.model_dump(exclude={"content_json", "metadata_json"})
    data["content"] = content
    data["metadata"] = _load_object(record.metadata_json, "node", "metadata_json")
    return _build(Node, "node", data)


# ---------------------------------------------------------------------------- events


def to_timeline_event(record: EventRecord) -> TimelineEvent:
    """The runtime view of an ``events_<session_id>`` row; ``payload_json`` is a JSON object."""
    data = record.model_dump(exclude={"payload_json"})
    data["payload"] = _load_object(record.payload_json, "event", "payload_json")
    return _build(TimelineEvent, "event", data)


# ---------------------------------------------------------------------------- artifacts


def to_artifact_ref(record: ArtifactRecord) -> ArtifactRef:
    """The runtime view of an ``artifacts`` row."""
    data = record.model_dump(exclude={"metadata_json"})
    data["metadata"] = _load_object(record.metadata_json, "artifact", "metadata_json")
    data["path"] = _logical_artifact_path(record.path, record.session_id)
    return _build(ArtifactRef, "artifact", data)


# A row written before artifacts were addressed by store key holds the writer's host path of an
# offloaded block, ``<home>/artifacts/<session>/<artifact>.json``: the same file as the key
# ``artifacts/<session>/<artifact>.json`` (agent_core.files.port.artifact_key).
_LOGICAL_PATH = re.compile(LOGICAL_PATH_PATTERN)
_LEGACY_ARTIFACT = re.compile(r"/artifacts/([A-Za-z0-9_]+)/(artifact_[A-Za-z0-9_]+\.json)$")


def _logical_artifact_path(path: str, session_id: str) -> str:
    """``path`` as the bus and the API carry it: never a host path (an old row's host path
    becomes its store key, or its bare name when it names no offloaded block of this session)."""
    if _LOGICAL_PATH.fullmatch(path):
        return path
    legacy = _LEGACY_ARTIFACT.search(path)
    if legacy is not None and legacy.group(1) == session_id:
        return f"artifacts/{session_id}/{legacy.group(2)}"
    name = re.split(r"[/\\]", path)[-1].lstrip("~")
    return name if _LOGICAL_PATH.fullmatch(name) else "artifact"
