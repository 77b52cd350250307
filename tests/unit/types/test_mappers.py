"""Storage ↔ runtime mappers: round trips for every record, defaults, and conversion failures."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from agent_core.errors import ErrorPayload, ProviderErrorPayload, SchemaError
from agent_core.types import mappers
from agent_core.types.enums import AgentType, NodeType, Role, RunStatus
from agent_core.types.protocol import JsonBlock, TextBlock, ToolCallBlock, Usage
from agent_core.types.runtime import Node, RunState, SessionState
from agent_core.types.storage import (
    AgentRecord,
    ArtifactRecord,
    EventRecord,
    NodeRecord,
    RunRecord,
    SessionRecord,
)
from tests.unit.types import strategies as S

SID = "sess_20260612_153022_a1b2c3d4"
TS = "2026-06-12T15:30:22.123456+00:00"

Pair = tuple[st.SearchStrategy[Any], Callable[[Any], BaseModel], Callable[[Any], BaseModel]]
PAIRS: dict[str, Pair] = {
    "session": (S.sessions, mappers.to_session_record, mappers.to_session_state),
    "agent": (S.agents, mappers.to_agent_record, mappers.to_agent_state),
    "run": (S.runs, mappers.to_run_record, mappers.to_run_state),
    "node": (S.nodes, mappers.to_node_record, mappers.to_node),
    "event": (S.timeline_events, mappers.to_event_record, mappers.to_timeline_event),
    "artifact": (S.artifacts, mappers.to_artifact_record, mappers.to_artifact_ref),
}

# Canonical rows as the storage-writer would hold them, written out by hand (not by the mappers).
CANONICAL: dict[str, BaseModel] = {
    "session": SessionRecord(
        session_id=SID,
        account_id="acct_0123456789abcdef",
        cwd="/srv/project",
        root_agent_id="agent_0000000000000001",
        active_node_id="node_0000000000000009",
        status="active",
        metadata_json='{"title":"数据分析","tags":["a","b"]}',
        created_at=TS,
        updated_at=TS,
    ),
    "agent": AgentRecord(
        agent_id="agent_0000000000000002",
        session_id=SID,
        parent_agent_id="agent_0000000000000001",
        agent_type="sub",
        created_by_run_id="run_0000000000000001",
        status="completed",
        result_json=(
            '{"agent_id":"agent_0000000000000002","run_id":"run_0000000000000002",'
            '"status":"completed","end_reason":"completed","text":"done","data":{"rows":3},'
            '"artifact_ids":["artifact_00000000000000aa"],"usage":{"input_tokens":10,'
            '"output_tokens":5,"cache_read_tokens":0,"cache_write_tokens":0},"turns":2,"error":null}'
        ),
        metadata_json='{"purpose":"worker"}',
        created_at=TS,
        updated_at=TS,
    ),
    "run": RunRecord(
        run_id="run_0000000000000001",
        session_id=SID,
        agent_id="agent_0000000000000001",
        status="failed",
        attempt=2,
        start_node_id="node_0000000000000001",
        end_node_id="node_0000000000000005",
        end_reason="failed",
        turn_count=3,
        usage_json='{"input_tokens":100,"output_tokens":20,"cache_read_tokens":7,"cache_write_tokens":1}',
        error_json=(
            '{"type":"provider_error","code":"rate_limited","message":"slow down","retryable":true,'
            '"details":{},"redacted":true,"provider":"openai","status_code":429}'
        ),
        created_at=TS,
        updated_at=TS,
    ),
    "node": NodeRecord(
        node_id="node_0000000000000002",
        node_seq=2,
        parent_id="node_0000000000000001",
        agent_id="agent_0000000000000001",
        run_id="run_0000000000000001",
        role="assistant",
        node_type="message",
        content_json=(
            '[{"type":"text","text":"let me look"},'
            '{"type":"tool_call","id":"call_1","name":"read_file","arguments":{"path":"a.txt","n":null}}]'
        ),
        metadata_json='{"model":"gpt-x"}',
        token_count=42,
        created_at=TS,
    ),
    "event": EventRecord(
        event_id="evt_0000000000000001",
        seq=10,
        run_seq=4,
        agent_id="agent_0000000000000001",
        run_id="run_0000000000000001",
        level="error",
        event_type="tool_failed",
        node_id="node_0000000000000003",
        tool_call_id="call_1",
        payload_json='{"error":{"code":"not_found"}}',
        created_at=TS,
    ),
    "artifact": ArtifactRecord(
        artifact_id="artifact_00000000000000aa",
        session_id=SID,
        agent_id="agent_0000000000000002",
        run_id="run_0000000000000002",
        node_id="node_0000000000000004",
        tool_call_id="call_9",
        path="output/report.csv",
        filename="report.csv",
        mime_type="text/csv",
        size_bytes=1234,
        summary="3 rows",
        created_at=TS,
    ),
}


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_canonical_record_round_trips(name: str) -> None:
    _, to_record, to_runtime = PAIRS[name]
    record = CANONICAL[name]
    assert to_record(to_runtime(record)) == record


@pytest.mark.parametrize("name", sorted(PAIRS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_runtime_round_trips_through_storage(name: str, data: st.DataObject) -> None:
    strategy, to_record, to_runtime = PAIRS[name]
    value = data.draw(strategy)
    record = to_record(value)
    assert to_runtime(record) == value
    assert to_record(to_runtime(record)) == record
    # What the storage-writer persists is plain row data: re-validating the dump changes nothing.
    assert type(record).model_validate(record.model_dump(mode="json")) == record


@settings(max_examples=200, deadline=None)
@given(node=S.nodes)
def test_node_content_survives_storage_exactly(node: Node) -> None:
    restored = mappers.to_node(mappers.to_node_record(node))
    assert restored.content == node.content
    assert [type(b) for b in restored.content] == [type(b) for b in node.content]


def test_provider_error_payload_keeps_its_class() -> None:
    state = mappers.to_run_state(CANONICAL["run"])  # type: ignore[arg-type]
    assert isinstance(state.error, ProviderErrorPayload)
    assert state.error.status_code == 429
    assert state.last_node_id == "node_0000000000000005"
    assert state.turn == 3
    plain = state.model_copy(update={"error": ErrorPayload(type="t", code="c", message="m")})
    again = mappers.to_run_state(mappers.to_run_record(plain))
    assert type(again.error) is ErrorPayload


def test_agent_result_is_parsed() -> None:
    state = mappers.to_agent_state(CANONICAL["agent"])  # type: ignore[arg-type]
    assert state.agent_type is AgentType.SUB
    assert state.result is not None
    assert state.result.data == {"rows": 3}
    assert state.result.usage == Usage(input_tokens=10, output_tokens=5)
    assert state.metadata == {"purpose": "worker"}


def test_defaults_fill_sql_nulls() -> None:
    record = RunRecord(
        run_id="run_0000000000000001",
        session_id=SID,
        agent_id="agent_0000000000000001",
        status="queued",
        created_at=TS,
        updated_at=TS,
    )
    state = mappers.to_run_state(record)
    assert (state.turn, state.usage, state.error, state.metadata) == (0, Usage(), None, {})
    assert state.status is RunStatus.QUEUED and state.attempt == 0
    written = mappers.to_run_record(state)
    assert written.turn_count == 0
    assert json.loads(written.usage_json or "") == Usage().model_dump()
    assert written.metadata_json is None


def test_non_canonical_json_reads_the_same() -> None:
    base = CANONICAL["session"]
    spaced = base.model_copy(
        update={"metadata_json": '{ "title" : "数据分析", "tags": [ "a", "b" ] }'}
    )
    assert mappers.to_session_state(spaced) == mappers.to_session_state(base)  # type: ignore[arg-type]
    empty = base.model_copy(update={"metadata_json": "{}"})
    state = mappers.to_session_state(empty)  # type: ignore[arg-type]
    assert state.metadata == {}
    assert mappers.to_session_record(state).metadata_json is None


def test_timestamps_are_aware_utc_and_stored_fixed_width() -> None:
    state = mappers.to_session_state(CANONICAL["session"])  # type: ignore[arg-type]
    assert state.created_at == datetime(2026, 6, 12, 15, 30, 22, 123456, tzinfo=UTC)
    whole_second = state.model_copy(update={"created_at": datetime(2026, 1, 1, tzinfo=UTC)})
    assert mappers.to_session_record(whole_second).created_at == "2026-01-01T00:00:00.000000+00:00"


def test_stored_json_is_compact_and_keeps_unicode() -> None:
    node = Node(
        node_id="node_0000000000000001",
        node_seq=0,
        agent_id="agent_0000000000000001",
        role=Role.USER,
        content=[TextBlock(text="你好")],
        metadata={"k": "é"},
    )
    record = mappers.to_node_record(node)
    assert record.content_json == '[{"type":"text","text":"你好"}]'
    assert record.metadata_json == '{"k":"é"}'


# ---------------------------------------------------------------------------- failures


def _assert_mapping_failed(exc: SchemaError, field: str, secret: str | None = None) -> None:
    assert exc.code == "mapping_failed"
    assert any(f.startswith(field) for f in exc.details["fields"]), exc.details
    if secret is not None:
        assert secret not in str(exc.details) and secret not in exc.message


@pytest.mark.parametrize(
    ("name", "column", "bad"),
    [
        ("session", "metadata_json", '{"api_key": "sk-secretsecretsecret"'),
        ("session", "metadata_json", '["not", "an", "object"]'),
        ("agent", "result_json", '{"agent_id": "agent_0000000000000002"}'),
        ("run", "usage_json", '{"input_tokens": -1}'),
        ("run", "error_json", '{"type": "x"}'),
        ("node", "content_json", '[{"type": "audio", "url": "x"}]'),
        ("node", "content_json", '[{"type": "text", "text": "a", "extra": 1}]'),
        ("node", "content_json", '{"type": "text", "text": "not a list"}'),
        ("event", "payload_json", "not json at all"),
        ("artifact", "metadata_json", "42"),
    ],
)
def test_unconvertible_columns_are_schema_errors(name: str, column: str, bad: str) -> None:
    _, _, to_runtime = PAIRS[name]
    record = CANONICAL[name].model_copy(update={column: bad})
    with pytest.raises(SchemaError) as info:
        to_runtime(record)
    _assert_mapping_failed(info.value, column, secret="sk-secretsecretsecret")


def test_unallocated_node_seq_cannot_be_stored() -> None:
    node = Node(
        node_id="node_0000000000000001",
        agent_id="agent_0000000000000001",
        role=Role.ASSISTANT,
        node_type=NodeType.MESSAGE,
        content=[ToolCallBlock(id="c", name="t")],
    )
    with pytest.raises(SchemaError) as info:
        mappers.to_node_record(node)
    _assert_mapping_failed(info.value, "node_seq")


@pytest.mark.parametrize(
    "metadata",
    [{"x": math.nan}, {"x": math.inf}, {"when": datetime(2026, 1, 1, tzinfo=UTC)}, {"s": {1, 2}}],
)
def test_non_json_metadata_cannot_be_stored(metadata: dict[str, Any]) -> None:
    state = SessionState(
        session_id=SID,
        account_id="acct_1",
        cwd="/",
        root_agent_id="agent_0000000000000001",
        metadata=metadata,
    )
    with pytest.raises(SchemaError) as info:
        mappers.to_session_record(state)
    _assert_mapping_failed(info.value, "metadata")


@pytest.mark.parametrize("bad", [math.nan, -math.inf])
def test_non_json_numbers_in_content_cannot_be_stored(bad: float) -> None:
    node = Node(
        node_id="node_0000000000000001",
        node_seq=1,
        agent_id="agent_0000000000000001",
        role=Role.TOOL,
        content=[JsonBlock(data={"x": [1, bad]})],
    )
    with pytest.raises(SchemaError) as info:
        mappers.to_node_record(node)
    _assert_mapping_failed(info.value, "content")


def test_run_state_view_matches_record_fields() -> None:
    # Every runs column is reachable from RunState (renamed or parsed), so nothing is dropped.
    state = RunState.model_fields
    renamed = {
        "end_node_id": "last_node_id",
        "turn_count": "turn",
        "usage_json": "usage",
        "error_json": "error",
        "metadata_json": "metadata",
    }
    internal = {"claim_command_id"}  # the writer's record of who claimed the attempt
    for column in RunRecord.model_fields.keys() - internal:
        assert renamed.get(column, column) in state, column
    assert internal.isdisjoint(state)


def test_the_run_finished_event_of_an_ended_run_carries_its_end() -> None:
    record = RunRecord(
        run_id="run_0000000000000001",
        session_id=SID,
        agent_id="agent_0000000000000001",
        status="failed",
        attempt=2,
        end_node_id="node_0000000000000009",
        end_reason="failed",
        turn_count=3,
        usage_json='{"input_tokens":4}',
        error_json='{"type":"RuntimeError","code":"worker_lost","message":"lost"}',
        created_at=TS,
        updated_at="2026-06-12T15:31:00.000000+00:00",
    )
    event = mappers.to_run_finished(mappers.to_run_state(record))
    assert (event.run_id, event.session_id, event.agent_id) == (
        record.run_id,
        SID,
        record.agent_id,
    )
    assert event.status is RunStatus.FAILED and event.end_reason is not None
    assert event.end_reason.value == "failed"
    assert event.usage == Usage(input_tokens=4)
    assert event.error is not None and event.error.code == "worker_lost"
    assert event.last_node_id == "node_0000000000000009"
    assert event.created_at == datetime(2026, 6, 12, 15, 31, tzinfo=UTC)  # when it ended
