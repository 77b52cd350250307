"""The run event stream in the OpenAPI document: every SSE event type, its schema and an example.

An SSE frame is ``id:`` (the resume position), ``event:`` (the type) and ``data:`` (the event's
JSON). The document gets one component schema per event type (the runtime event union's members,
and ``TimelineEvent`` for the ``timeline`` frames of a durable replay), each with an example, a
``RunStreamEvent`` schema that is their ``oneOf``, and on every ``text/event-stream`` response one
named example frame per event type. :data:`EXAMPLES` holds one instance of each event type, made
from the server's own classes, so an example can never disagree with its schema; a test checks
that every member of the union has one.
"""

from __future__ import annotations

import typing
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, TypeAdapter

from agent_core.errors import ErrorPayload
from agent_core.types.enums import EndReason, EventType, Role, RunStatus
from agent_core.types.protocol import PermissionRequest, TextBlock, ToolCall, Usage
from agent_core.types.runtime import (
    Node,
    RunError,
    RunFinished,
    RunNodeCreated,
    RunPermissionRequested,
    RunPhase,
    RunStatusChanged,
    RunTaskChanged,
    RunTextDelta,
    RuntimeEvent,
    RunToolResult,
    RunToolStarted,
    RunUsage,
    TimelineEvent,
)

__all__ = ["EXAMPLES", "STREAM_SCHEMA", "add_event_stream", "event_classes"]

STREAM_SCHEMA = "RunStreamEvent"
_REF = "#/components/schemas/{model}"
_TIMELINE = "timeline"

_AT = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
_IDS: dict[str, Any] = {
    "run_id": "run_0123456789abcdef",
    "session_id": "sess_20260101_120000_0123456789abcdef",
    "agent_id": "agent_0123456789abcdef",
    "created_at": _AT,
}
_CALL = ToolCall(id="call_0123456789ab", name="lookup", arguments={"q": "report"})
_ANSWER = Node(
    node_id="node_0123456789abcdef",
    node_seq=4,
    parent_id="node_fedcba9876543210",
    agent_id=_IDS["agent_id"],
    run_id=_IDS["run_id"],
    role=Role.ASSISTANT,
    content=[TextBlock(text="The report shows …")],
    created_at=_AT,
)

EXAMPLES: list[BaseModel] = [
    RunStatusChanged(status=RunStatus.RUNNING, previous=RunStatus.QUEUED, attempt=1, **_IDS),
    RunPhase(phase="streaming", turn=1, max_turns=50, **_IDS),
    RunTextDelta(turn=1, text="The report ", **_IDS),
    RunToolStarted(tool_call_id=_CALL.id, name=_CALL.name, arguments=_CALL.arguments, **_IDS),
    RunToolResult(
        tool_call_id=_CALL.id, name=_CALL.name, content=[TextBlock(text="3 matches")], **_IDS
    ),
    RunNodeCreated(node=_ANSWER, **_IDS),
    RunUsage(
        usage=Usage(input_tokens=812, output_tokens=64),
        total=Usage(input_tokens=1500, output_tokens=120),
        **_IDS,
    ),
    RunPermissionRequested(
        request=PermissionRequest(
            request_id="perm_0123456789abcdef",
            session_id=_IDS["session_id"],
            run_id=_IDS["run_id"],
            agent_id=_IDS["agent_id"],
            tool_call=_CALL,
            reason="policy: ask",
            expires_at=datetime(2026, 1, 1, 12, 10, 0, tzinfo=UTC),
        ),
        **_IDS,
    ),
    RunTaskChanged(list_name="plan", change="task_completed", task_id="t1", **_IDS),
    RunError(
        error=ErrorPayload(
            type="provider_error", code="rate_limited", message="retrying", retryable=True
        ),
        **_IDS,
    ),
    RunFinished(
        status=RunStatus.COMPLETED,
        end_reason=EndReason.COMPLETED,
        turns=2,
        usage=Usage(input_tokens=1500, output_tokens=120),
        last_node_id=_ANSWER.node_id,
        **_IDS,
    ),
    TimelineEvent(
        event_id="evt_0123456789abcdef",
        seq=7,
        run_seq=3,
        agent_id=_IDS["agent_id"],
        run_id=_IDS["run_id"],
        event_type=EventType.TOOL_COMPLETED,
        tool_call_id=_CALL.id,
        payload={"name": "lookup"},
        created_at=_AT,
    ),
]


def event_classes() -> list[type[BaseModel]]:
    """The classes a run's stream carries: the runtime event union's members, then the timeline
    row of a durable replay."""
    union = typing.get_args(RuntimeEvent)[0]
    return [*typing.get_args(union), TimelineEvent]


def _event_name(model: BaseModel) -> str:
    return _TIMELINE if isinstance(model, TimelineEvent) else str(model.type)  # type: ignore[attr-defined]


def _frame(model: BaseModel, entry_id: str) -> str:
    return f"id: {entry_id}\nevent: {_event_name(model)}\ndata: {model.model_dump_json()}\n\n"


def _sse_event() -> dict[str, Any]:
    """The schema of one event of a run's stream: ``data`` holds a ``RunStreamEvent``."""
    return {
        "type": "object",
        "required": ["data"],
        "properties": {
            "id": {"type": "string"},
            "event": {"type": "string"},
            "retry": {"type": "integer"},
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": {"$ref": _REF.format(model=STREAM_SCHEMA)},
            },
        },
    }


def add_event_stream(schema: dict[str, Any]) -> None:
    """Describe the event stream in an OpenAPI document (in place)."""
    classes = event_classes()
    defs = TypeAdapter(list[RuntimeEvent | TimelineEvent]).json_schema(
        mode="serialization", ref_template=_REF
    )
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for name, definition in defs.get("$defs", {}).items():
        components.setdefault(name, definition)
    examples = {type(e): e for e in EXAMPLES}
    for cls in classes:
        components[cls.__name__]["examples"] = [examples[cls].model_dump(mode="json")]
    components[STREAM_SCHEMA] = {
        "description": "The `data:` of one frame of a run's event stream; the frame's `event:` "
        "is the event's `type` (`timeline` for a durable replay's rows, which carry "
        "`event_type`). A parent run's stream also carries its child runs' events, told apart "
        "by `run_id`; the stream ends after the run's own `run_finished`.",
        "oneOf": [{"$ref": _REF.format(model=cls.__name__)} for cls in classes],
    }
    named = {
        _event_name(e): {
            "summary": (type(e).__doc__ or "").strip().splitlines()[0],
            "value": _frame(e, "db-7" if isinstance(e, TimelineEvent) else f"1767268800000-{i}"),
        }
        for i, e in enumerate(EXAMPLES)
    }
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            for response in operation.get("responses", {}).values():
                stream = response.get("content", {}).get("text/event-stream")
                if stream is not None:
                    # As OpenAPI 3.2 describes an event stream: ``itemSchema`` is one event, whose
                    # ``data`` is the JSON of a RunStreamEvent; ``schema`` the whole stream.
                    stream["itemSchema"] = _sse_event()
                    stream["schema"] = {"type": "array", "items": _sse_event()}
                    stream.pop("example", None)
                    stream["examples"] = named
