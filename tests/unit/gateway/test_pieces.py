"""SSE ids and frames, error statuses and request models."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from agent_core.errors import AgentCoreError, BusTimeoutError, ErrorPayload, StorageError
from agent_core.runqueue import SessionBusyError
from agent_core.tasks.client import TaskServiceError
from agent_core.types.api import AgentConfigOverrides, PatchSessionRequest, PostMessageRequest
from agent_core.types.runtime import RunTextDelta
from services.gateway.bodies import json_problem
from services.gateway.errors import _STATUS_BY_TYPE, ApiError, _core_status
from services.gateway.sse import Cursor, frame, parse_cursor

SID = "sess_20260101_120000_0123456789abcdef"


def test_cursor_forms_cannot_be_confused() -> None:
    assert parse_cursor(None) == Cursor(redis_id="0-0")
    assert parse_cursor("1718000000000-3") == Cursor(redis_id="1718000000000-3")
    assert parse_cursor("db-42") == Cursor(seq=42)
    assert parse_cursor("db-end") == Cursor(ended=True)
    top = "18446744073709551615"  # each half of a Redis id is an unsigned 64-bit integer
    assert parse_cursor(f"{top}-{top}") == Cursor(redis_id=f"{top}-{top}")
    out_of_range = ("18446744073709551616-0", "0-18446744073709551616", "99999999999999999999-1")
    for bad in ("db-", "db-x", "12", "1-2-3", "0-0; DROP", "db-1-0", "-1-0", *out_of_range):
        with pytest.raises(ApiError) as err:
            parse_cursor(bad)
        assert err.value.status == 400


@pytest.mark.parametrize(
    "text", ["a\n\nb", "data: x\r\nid: 9", "\u2028\u2029\x85", "\x00\x1b[31m", "plain"]
)
def test_frames_are_one_data_line_whatever_the_text(text: str) -> None:
    event = RunTextDelta(run_id="run_0123456789abcdef", session_id=SID, turn=0, text=text)
    raw = frame("5-0", event).decode()
    assert raw.endswith("\n\n") and raw.count("\n\n") == 1
    lines = raw[:-2].splitlines()  # splitlines also splits on U+2028 and friends
    assert [ln.split(":", 1)[0] for ln in lines] == ["id", "event", "data"]
    assert json.loads(lines[2][6:])["text"] == text


def test_core_errors_map_to_statuses() -> None:
    assert _core_status(StorageError("not_found", "x")) == 404
    assert _core_status(StorageError("node_not_found", "x")) == 404
    assert _core_status(StorageError("invalid_transition", "x")) == 409
    assert _core_status(SessionBusyError("session_busy", "x")) == 409
    assert _core_status(BusTimeoutError("bus_timeout", "x")) == 503
    assert _core_status(AgentCoreError("boom", "x")) == 500
    task = TaskServiceError(ErrorPayload(type="schema_error", code="invalid_cwd", message="x"))
    assert _core_status(task) == 409  # a session whose project is unusable is no server fault


def _subclasses(cls: type[AgentCoreError]) -> list[type[AgentCoreError]]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out


def test_every_error_type_the_services_raise_has_its_status() -> None:
    import services.memory_extraction.service
    import services.run_worker.service
    import services.storage_writer.service
    import services.task_wal.service  # noqa: F401  (their error classes register as subclasses)

    for cls in [AgentCoreError, *_subclasses(AgentCoreError)]:
        assert cls.error_type in _STATUS_BY_TYPE or cls.error_type == "storage_error", cls


def test_request_models_refuse_server_owned_fields() -> None:
    with pytest.raises(ValidationError):
        AgentConfigOverrides.model_validate({"base_url": "http://169.254.169.254"})
    with pytest.raises(ValidationError):
        AgentConfigOverrides.model_validate({"api_key_env": "HOME"})
    with pytest.raises(ValidationError):
        PatchSessionRequest.model_validate({"metadata": {"agent_config": {"model": "x"}}})
    with pytest.raises(ValidationError):
        PostMessageRequest.model_validate({})
    with pytest.raises(ValidationError):
        PostMessageRequest.model_validate({"text": "a", "content": [{"type": "text", "text": "b"}]})
    with pytest.raises(ValidationError):
        PostMessageRequest.model_validate(
            {"content": [{"type": "attachment", "path": "../other/secret"}]}
        )
    ok = PostMessageRequest.model_validate({"text": "hi", "agent_config": {"max_turns": 2}})
    assert [b.model_dump() for b in ok.blocks()] == [{"type": "text", "text": "hi"}]
    assert ok.agent_config is not None and ok.agent_config.overrides() == {"max_turns": 2}


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b'{"text": "\\ud800"}', "unpaired surrogate"),
        (b'{"metadata": {"\\udfff": 1}}', "unpaired surrogate"),
        (b"[" * 33 + b"]" * 33, "nesting deeper than 32"),
        (b"[" * 100_000 + b"]" * 100_000, "nesting deeper than 32"),
        (b'{"n": ' + b"9" * 5000 + b"}", "64-bit range"),
        (b'{"n": 9223372036854775808}', "64-bit range"),
        (b'{"n": 1e999}', "64-bit float"),
        (b'{"n": NaN}', "not a JSON value"),
    ],
)
def test_json_the_system_cannot_hold_is_refused_at_the_edge(raw: bytes, says: str) -> None:
    problem = json_problem(raw)
    assert problem is not None and says in problem


def test_ordinary_json_passes() -> None:
    assert (
        json_problem(b'{"text": "\\ud83d\\ude00 ok", "n": -9223372036854775808, "f": 1.5}') is None
    )
    assert json_problem(b"[" * 32 + b"]" * 32) is None
    assert json_problem(b"{not json") is None  # malformed: the route's own 422
