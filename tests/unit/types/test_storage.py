"""Storage records: columns exactly as designed (plus this repository's additions), strict values."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from agent_core.types.enums import EventType, RunStatus
from agent_core.types.storage import (
    AgentRecord,
    ArtifactRecord,
    EventRecord,
    NodeRecord,
    RunRecord,
    SessionRecord,
)

SID = "sess_20260612_153022_a1b2c3d4"
TS = "2026-06-12T15:30:22.000000+00:00"

# The design's columns, in its order; this repository adds sessions.account_id and runs.attempt;
# the writer's own runs.claim_command_id (schema v3) comes last.
SEED_COLUMNS: dict[type[BaseModel], list[str]] = {
    SessionRecord: [
        "session_id", "account_id", "cwd", "root_agent_id", "active_node_id",
        "parent_session_id", "status", "metadata_json", "created_at", "updated_at",
    ],
    AgentRecord: [
        "agent_id", "session_id", "parent_agent_id", "agent_type", "created_by_run_id",
        "fork_from_node_id", "status", "result_json", "metadata_json", "created_at", "updated_at",
    ],
    RunRecord: [
        "run_id", "session_id", "agent_id", "status", "attempt", "start_node_id", "end_node_id",
        "end_reason", "turn_count", "usage_json", "error_json", "metadata_json", "created_at",
        "updated_at", "claim_command_id",
    ],
    NodeRecord: [
        "node_id", "node_seq", "parent_id", "agent_id", "run_id", "role", "node_type",
        "content_json", "metadata_json", "token_count", "created_at",
    ],
    EventRecord: [
        "event_id", "seq", "run_seq", "agent_id", "run_id", "level", "event_type", "node_id",
        "tool_call_id", "payload_json", "created_at",
    ],
    ArtifactRecord: [
        "artifact_id", "session_id", "agent_id", "run_id", "node_id", "tool_call_id", "path",
        "filename", "mime_type", "size_bytes", "summary", "metadata_json", "created_at",
    ],
}  # fmt: skip


@pytest.mark.parametrize("cls", list(SEED_COLUMNS), ids=lambda c: c.__name__)
def test_columns_match_the_schema(cls: type[BaseModel]) -> None:
    assert list(cls.model_fields) == SEED_COLUMNS[cls]
    assert cls.model_config.get("extra") == "forbid"


def _run(**overrides: Any) -> RunRecord:
    data: dict[str, Any] = {
        "run_id": "run_0000000000000001",
        "session_id": SID,
        "agent_id": "agent_0000000000000001",
        "status": "running",
        "created_at": TS,
        "updated_at": TS,
    }
    data.update(overrides)
    return RunRecord.model_validate(data)


def test_enum_columns_hold_enum_members() -> None:
    record = _run()
    assert record.status is RunStatus.RUNNING
    assert record.model_dump(mode="json")["status"] == "running"
    with pytest.raises(ValidationError):
        _run(status="paused")


def test_unknown_column_is_refused() -> None:
    with pytest.raises(ValidationError, match="extra"):
        _run(run_seq=1)  # run_seq lives on events, not runs


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("run_id", "node_0000000000000001"),
        ("run_id", "run_"),
        ("run_id", "run_abc; DROP TABLE runs"),
        ("agent_id", "agent_\u0430bc"),  # Cyrillic 'а'
        ("session_id", "sess_20260612_153022_a1b2'; --"),
        ("session_id", "sess_x"),
        ("start_node_id", "node_a b"),
        ("attempt", -1),
        ("turn_count", -1),
    ],
)
def test_bad_ids_and_counters_are_refused(field: str, value: object) -> None:
    with pytest.raises(ValidationError):
        _run(**{field: value})


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("2026-06-12T15:30:22Z", "2026-06-12T15:30:22.000000+00:00"),
        ("2026-06-12T17:30:22.5+02:00", "2026-06-12T15:30:22.500000+00:00"),
        ("2026-06-12T15:30:22.123456+00:00", "2026-06-12T15:30:22.123456+00:00"),
    ],
)
def test_timestamps_are_normalised_to_fixed_width_utc(given: str, stored: str) -> None:
    assert _run(created_at=given).created_at == stored


@pytest.mark.parametrize("bad", ["2026-06-12 15:30:22", "yesterday", "", "2026-13-01T00:00:00Z"])
def test_naive_or_malformed_timestamps_are_refused(bad: str) -> None:
    with pytest.raises(ValidationError):
        _run(updated_at=bad)


def test_account_id_must_be_a_safe_identifier() -> None:
    base = {
        "session_id": SID,
        "cwd": "/",
        "root_agent_id": "agent_0000000000000001",
        "status": "active",
        "created_at": TS,
        "updated_at": TS,
    }
    assert SessionRecord(account_id="acct_0123", **base).account_id == "acct_0123"
    for bad in ["../other", "a b", "", "x" * 65]:
        with pytest.raises(ValidationError):
            SessionRecord(account_id=bad, **base)


def test_event_record_keeps_run_seq_and_tool_call_id() -> None:
    record = EventRecord(
        event_id="evt_0000000000000001",
        seq=1,
        run_seq=1,
        level="info",
        event_type="tool_started",
        tool_call_id="toolu_01ABC",
        created_at=TS,
    )
    assert record.event_type is EventType.TOOL_STARTED
    assert record.tool_call_id == "toolu_01ABC"
    with pytest.raises(ValidationError):
        EventRecord.model_validate({**record.model_dump(), "tool_call_id": ""})
