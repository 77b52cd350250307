"""Storage ↔ runtime conversion, one pair of functions per record (seed 001).

Mappers only rename fields, parse and dump JSON, convert enums and timestamps and fill defaults;
they judge no business rule. Their only error is :class:`~agent_core.errors.SchemaError` with code
``"mapping_failed"``: the data cannot be converted. Its details name the record and the failing
fields, never the values (which may hold user data or secrets).

Canonical stored form, produced by every ``to_*_record`` function:

- JSON is compact (no spaces), keys in insertion order, non-ASCII kept as is; NaN/Infinity refused.
- An empty ``metadata``/``payload`` dict is SQL NULL; NULL reads back as ``{}``.
- ``turn_count`` and ``usage_json`` are always written; NULL reads back as 0 / zero usage.
- Content blocks omit ``None`` fields (defaults restore them on read).
- Timestamps are fixed-width ISO-8601 UTC (``2026-06-12T15:30:22.000000+00:00``).

A canonical record converts to runtime and back unchanged; a runtime value converts to storage and
back unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from agent_core.errors import SchemaError
from agent_core.types._fields import AnyErrorPayload, to_iso
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
    "dump_json",
    "to_agent_record",
    "to_agent_state",
    "to_artifact_record",
    "to_artifact_ref",
    "to_event_record",
    "to_node",
    "to_node_record",
    "to_run_finished",
    "to_run_record",
    "to_run_state",
    "to_session_record",
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


def dump_json(value: Any, *, what: str = "value", field: str = "json") -> str:
    """Compact JSON text of a JSON-compatible value; anything else is a ``mapping_failed`` error."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise _fail(what, [field], "value is not JSON", exc) from exc


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


def _dump_object(value: Mapping[str, Any], what: str, field: str) -> str | None:
    return dump_json(dict(value), what=what, field=field) if value else None


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


def to_session_record(state: SessionState) -> SessionRecord:
    """The ``sessions`` row of a session."""
    data = state.model_dump(exclude={"metadata", "created_at", "updated_at"})
    data["metadata_json"] = _dump_object(state.metadata, "session", "metadata")
    data["created_at"] = to_iso(state.created_at)
    data["updated_at"] = to_iso(state.updated_at)
    return _build(SessionRecord, "session", data)


# ---------------------------------------------------------------------------- agents


def to_agent_state(record: AgentRecord) -> AgentState:
    """The runtime view of an ``agents`` row; ``result_json`` is a :class:`ChildAgentResult`."""
    data = record.model_dump(exclude={"metadata_json", "result_json"})
    data["metadata"] = _load_object(record.metadata_json, "agent", "metadata_json")
    if record.result_json is not None:
        data["result"] = _parse(ChildAgentResult, record.result_json, "agent", "result_json")
    return _build(AgentState, "agent", data)


def to_agent_record(state: AgentState) -> AgentRecord:
    """The ``agents`` row of an agent."""
    data = state.model_dump(exclude={"metadata", "result", "created_at", "updated_at"})
    data["metadata_json"] = _dump_object(state.metadata, "agent", "metadata")
    data["result_json"] = None if state.result is None else state.result.model_dump_json()
    data["created_at"] = to_iso(state.created_at)
    data["updated_at"] = to_iso(state.updated_at)
    return _build(AgentRecord, "agent", data)


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


def to_run_record(state: RunState) -> RunRecord:
    """The ``runs`` row of a run."""
    data = state.model_dump(
        exclude={"last_node_id", "turn", "usage", "error", "metadata", "created_at", "updated_at"}
    )
    data["end_node_id"] = state.last_node_id
    data["turn_count"] = state.turn
    data["usage_json"] = state.usage.model_dump_json()
    # The instance's own serializer keeps a ProviderErrorPayload's extra fields.
    data["error_json"] = None if state.error is None else state.error.model_dump_json()
    data["metadata_json"] = _dump_object(state.metadata, "run", "metadata")
    data["created_at"] = to_iso(state.created_at)
    data["updated_at"] = to_iso(state.updated_at)
    return _build(RunRecord, "run", data)


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


def to_node_record(node: Node) -> NodeRecord:
    """The ``nodes_<session_id>`` row of a node; the node must already have its ``node_seq``."""
    if node.node_seq is None:
        raise _fail("node", ["node_seq"], "node_seq is not allocated yet", None)
    data = node.model_dump(exclude={"content", "metadata", "created_at"})
    # Through json.dumps rather than pydantic's dump_json, which would silently store NaN as null.
    blocks = CONTENT_BLOCKS.dump_python(node.content, exclude_none=True)
    data["content_json"] = dump_json(blocks, what="node", field="content")
    data["metadata_json"] = _dump_object(node.metadata, "node", "metadata")
    data["created_at"] = to_iso(node.created_at)
    return _build(NodeRecord, "node", data)


# ---------------------------------------------------------------------------- events


def to_timeline_event(record: EventRecord) -> TimelineEvent:
    """The runtime view of an ``events_<session_id>`` row; ``payload_json`` is a JSON object."""
    data = record.model_dump(exclude={"payload_json"})
    data["payload"] = _load_object(record.payload_json, "event", "payload_json")
    return _build(TimelineEvent, "event", data)


def to_event_record(event: TimelineEvent) -> EventRecord:
    """The ``events_<session_id>`` row of a timeline event."""
    data = event.model_dump(exclude={"payload", "created_at"})
    data["payload_json"] = _dump_object(event.payload, "event", "payload")
    data["created_at"] = to_iso(event.created_at)
    return _build(EventRecord, "event", data)


# ---------------------------------------------------------------------------- artifacts


def to_artifact_ref(record: ArtifactRecord) -> ArtifactRef:
    """The runtime view of an ``artifacts`` row."""
    data = record.model_dump(exclude={"metadata_json"})
    data["metadata"] = _load_object(record.metadata_json, "artifact", "metadata_json")
    return _build(ArtifactRef, "artifact", data)


def to_artifact_record(ref: ArtifactRef) -> ArtifactRecord:
    """The ``artifacts`` row of an artifact."""
    data = ref.model_dump(exclude={"metadata", "created_at"})
    data["metadata_json"] = _dump_object(ref.metadata, "artifact", "metadata")
    data["created_at"] = to_iso(ref.created_at)
    return _build(ArtifactRecord, "artifact", data)
