"""Storage → runtime mappers: every column of a row reaches its runtime field, SQL NULLs read as
defaults, and unconvertible columns are schema errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from agent_core.errors import ErrorPayload, ProviderErrorPayload, SchemaError
from agent_core.types import mappers
from agent_core.types.enums import AgentType, RunStatus
from agent_core.types.protocol import CONTENT_BLOCKS, ContentBlock, Usage
from agent_core.types.runtime import (
    AgentState,
    ArtifactRef,
    Node,
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
from tests.unit.types import strategies as S

SID = "sess_20260612_153022_a1b2c3d4"
TS = "2026-06-12T15:30:22.123456+00:00"

# How each runtime field follows from its row, written out from the tables (not from the
# mappers): field → (column, the field's value from the column's, how the field is compared).
Column = tuple[str, Callable[[Any], Any], Callable[[Any], Any]]


def _same(value: Any) -> Any:
    return value


def _col(name: str) -> Column:
    return (name, _same, _same)


def _object(name: str) -> Column:
    return (name, lambda text: {} if text is None else json.loads(text), _same)


def _time(name: str) -> Column:
    return (name, datetime.fromisoformat, _same)


def _model_json(name: str, default: Any = None) -> Column:
    # Compared as JSON: the row's text against the field's own dump.
    return (
        name,
        lambda text: default if text is None else json.loads(text),
        lambda model: None if model is None else model.model_dump(mode="json"),
    )


def _content(name: str) -> Column:
    return (
        name,
        json.loads,
        lambda blocks: CONTENT_BLOCKS.dump_python(blocks, mode="json", exclude_none=True),
    )


def _cols(*names: str) -> dict[str, Column]:
    return {n: _col(n) for n in names}


_STAMPS = {"created_at": _time("created_at"), "updated_at": _time("updated_at")}
_ZERO_USAGE = Usage().model_dump(mode="json")

Row = tuple[type[BaseModel], type[BaseModel], st.SearchStrategy[Any], Callable[[Any], BaseModel]]
ROWS: dict[str, Row] = {
    "session": (SessionRecord, SessionState, S.session_records, mappers.to_session_state),
    "agent": (AgentRecord, AgentState, S.agent_records, mappers.to_agent_state),
    "run": (RunRecord, RunState, S.run_records, mappers.to_run_state),
    "node": (NodeRecord, Node, S.node_records, mappers.to_node),
    "event": (EventRecord, TimelineEvent, S.event_records, mappers.to_timeline_event),
    "artifact": (ArtifactRecord, ArtifactRef, S.artifact_records, mappers.to_artifact_ref),
}
FIELDS: dict[str, dict[str, Column]] = {
    "session": {
        **_cols("session_id", "account_id", "cwd", "root_agent_id", "active_node_id"),
        **_cols("parent_session_id", "status"),
        "metadata": _object("metadata_json"),
        **_STAMPS,
    },
    "agent": {
        **_cols("agent_id", "session_id", "parent_agent_id", "agent_type", "created_by_run_id"),
        **_cols("fork_from_node_id", "status"),
        "result": _model_json("result_json"),
        "metadata": _object("metadata_json"),
        **_STAMPS,
    },
    "run": {
        **_cols("run_id", "session_id", "agent_id", "attempt", "status", "end_reason"),
        "start_node_id": _col("start_node_id"),
        "last_node_id": _col("end_node_id"),
        "turn": ("turn_count", lambda n: n or 0, _same),
        "usage": _model_json("usage_json", default=_ZERO_USAGE),
        "error": _model_json("error_json"),
        "metadata": _object("metadata_json"),
        **_STAMPS,
    },
    "node": {
        **_cols("node_id", "node_seq", "parent_id", "agent_id", "run_id", "role", "node_type"),
        "content": _content("content_json"),
        "metadata": _object("metadata_json"),
        "token_count": _col("token_count"),
        "created_at": _time("created_at"),
    },
    "event": {
        **_cols("event_id", "seq", "run_seq", "agent_id", "run_id", "level", "event_type"),
        **_cols("node_id", "tool_call_id"),
        "payload": _object("payload_json"),
        "created_at": _time("created_at"),
    },
    "artifact": {
        **_cols("artifact_id", "session_id", "agent_id", "run_id", "node_id", "tool_call_id"),
        **_cols("path", "filename", "mime_type", "size_bytes", "summary"),
        "metadata": _object("metadata_json"),
        "created_at": _time("created_at"),
    },
}
# Columns no runtime field shows: the writer's record of who claimed the attempt.
INTERNAL: dict[str, set[str]] = {"run": {"claim_command_id"}}
# Runtime fields no column of the row holds: a session's usage totals (their own kept counters,
# read by their own query for the session's GET).
COMPUTED: dict[str, set[str]] = {"session": {"usage"}}


def _assert_maps_field_by_field(name: str, record: BaseModel) -> None:
    record_cls, runtime_cls, _, to_runtime = ROWS[name]
    value = to_runtime(record)
    assert type(value) is runtime_cls
    for field, (column, expected, comparable) in FIELDS[name].items():
        got = comparable(getattr(value, field))
        want = expected(getattr(record, column))
        assert got == want, (name, field, column)
    for field in ("created_at", "updated_at"):
        if field in runtime_cls.model_fields:
            assert getattr(value, field).tzinfo == UTC  # datetime.UTC or TzInfo(0)


@pytest.mark.parametrize("name", sorted(ROWS))
def test_every_runtime_field_comes_from_a_column_and_every_column_is_read(name: str) -> None:
    record_cls, runtime_cls, _, _ = ROWS[name]
    assert FIELDS[name].keys() == runtime_cls.model_fields.keys() - COMPUTED.get(name, set())
    read = {column for column, _, _ in FIELDS[name].values()}
    assert read == record_cls.model_fields.keys() - INTERNAL.get(name, set())
    assert INTERNAL.get(name, set()).isdisjoint(runtime_cls.model_fields)


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
            '"output_tokens":5,"cache_read_tokens":0,"cache_write_tokens":0,"estimated":false},"turns":2,"error":null}'
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
        usage_json='{"input_tokens":100,"output_tokens":20,"cache_read_tokens":7,"cache_write_tokens":1,"estimated":false}',
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


@pytest.mark.parametrize("name", sorted(ROWS))
def test_a_canonical_row_maps_field_by_field(name: str) -> None:
    _assert_maps_field_by_field(name, CANONICAL[name])


@pytest.mark.parametrize("name", sorted(ROWS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_any_row_maps_field_by_field(name: str, data: st.DataObject) -> None:
    _, _, rows, _ = ROWS[name]
    _assert_maps_field_by_field(name, data.draw(rows))


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        (f"/srv/home/artifacts/{SID}/artifact_00000000000000aa.json", None),
        ("/srv/home/accounts/a/sessions/s/output/report.csv", "report.csv"),
        ("C:\\soong\\out.txt", "out.txt"),
    ],
    ids=["offloaded-block", "other-host-path", "windows-path"],
)
def test_a_legacy_host_path_is_shown_logically(stored: str, shown: str | None) -> None:
    record = CANONICAL["artifact"].model_copy(update={"path": stored})
    ref = mappers.to_artifact_ref(record)  # type: ignore[arg-type]
    assert ref.path == (shown or f"artifacts/{SID}/artifact_00000000000000aa.json")


@settings(max_examples=200, deadline=None)
@given(content=st.lists(S.content_blocks, max_size=4))
def test_node_content_survives_storage_exactly(content: list[ContentBlock]) -> None:
    # Stored as the storage-writer stores it: compact, without the blocks' None fields.
    stored = json.dumps(
        CONTENT_BLOCKS.dump_python(content, exclude_none=True),
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )
    record = CANONICAL["node"].model_copy(update={"content_json": stored})
    restored = mappers.to_node(record)  # type: ignore[arg-type]
    assert restored.content == content
    assert [type(b) for b in restored.content] == [type(b) for b in content]


def test_provider_error_payload_keeps_its_class() -> None:
    state = mappers.to_run_state(CANONICAL["run"])  # type: ignore[arg-type]
    assert isinstance(state.error, ProviderErrorPayload)
    assert state.error.status_code == 429
    assert state.last_node_id == "node_0000000000000005"
    assert state.turn == 3
    plain = CANONICAL["run"].model_copy(
        update={"error_json": '{"type":"t","code":"c","message":"m"}'}
    )
    again = mappers.to_run_state(plain)  # type: ignore[arg-type]
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


def test_non_canonical_json_reads_the_same() -> None:
    base = CANONICAL["session"]
    spaced = base.model_copy(
        update={"metadata_json": '{ "title" : "数据分析", "tags": [ "a", "b" ] }'}
    )
    assert mappers.to_session_state(spaced) == mappers.to_session_state(base)  # type: ignore[arg-type]
    empty = base.model_copy(update={"metadata_json": "{}"})
    state = mappers.to_session_state(empty)  # type: ignore[arg-type]
    assert state.metadata == {}


def test_timestamps_are_aware_utc() -> None:
    state = mappers.to_session_state(CANONICAL["session"])  # type: ignore[arg-type]
    assert state.created_at == datetime(2026, 6, 12, 15, 30, 22, 123456, tzinfo=UTC)
    assert state.created_at.tzinfo == UTC  # datetime.UTC or TzInfo(0)
    # An offset other than UTC (model_copy does not normalise it) reads as the same instant.
    shifted = CANONICAL["session"].model_copy(update={"updated_at": "2026-06-12T17:30:22+02:00"})
    later = mappers.to_session_state(shifted)  # type: ignore[arg-type]
    assert later.updated_at == datetime(2026, 6, 12, 15, 30, 22, tzinfo=UTC)
    assert later.updated_at.tzinfo == UTC  # datetime.UTC or TzInfo(0)


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
    to_runtime = ROWS[name][3]
    record = CANONICAL[name].model_copy(update={column: bad})
    with pytest.raises(SchemaError) as info:
        to_runtime(record)
    _assert_mapping_failed(info.value, column, secret="sk-secretsecretsecret")


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
