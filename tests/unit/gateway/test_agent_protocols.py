"""The pure mappings of the MCP and A2A doors: a run's stream batch to progress, run statuses to
task states, an assistant to its tool and card, an outcome to a tool result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from typing import Any

import pytest
from a2a.types.a2a_pb2 import TaskState
from mcp.shared.exceptions import MCPError

from agent_core.types.api import Assistant
from agent_core.types.enums import RunStatus
from services.gateway import agent_calls
from services.gateway.a2a_server import card_for, state_of
from services.gateway.agent_calls import Call, Outcome, OutputFile, Progress, read_batch
from services.gateway.auth import Caller
from services.gateway.mcp_server import McpEndpoint, _arguments, tool_of, tool_result
from services.gateway.routes_a2a import AGENT_CARD_PATH
from tests.conftest import REPO

RUN = "run_" + "1" * 16
CHILD = "run_" + "2" * 16


def _event(kind: str, **data: Any) -> tuple[str, str, bytes]:
    return ("1-0", kind, json.dumps({"type": kind, **data}).encode())


def _assistant() -> Assistant:
    return Assistant(
        assistant_id="asst_" + "3" * 16,
        name="reviewer",
        description="Reviews patches",
        version=2,
        latest_version=2,
        status="active",
        created_at=datetime.now(UTC),
        updated_at=datetime.now(UTC),
    )


def test_a_batch_keeps_the_runs_own_text_and_its_steps() -> None:
    attempt = [1]
    batch = [
        _event("text_delta", run_id=RUN, text="Hel", attempt=1),
        _event("text_delta", run_id=CHILD, text="child's", attempt=1),
        _event("tool_started", run_id=CHILD, name="grep"),
        _event("permission_requested", run_id=RUN, request={"tool_call": {"name": "bash"}}),
        _event("text_delta", run_id=RUN, text="lo", attempt=1),
        _event("usage", run_id=RUN),
    ]
    step = read_batch(batch, RUN, attempt)
    assert (step.text, step.restart, step.finished, step.events) == ("Hello", False, None, 6)
    assert step.notes == ["tool grep", "waiting for permission to run bash"]


def test_a_new_attempt_voids_the_text_before_it() -> None:
    attempt = [1]
    batch = [
        _event("text_delta", run_id=RUN, text="abandoned", attempt=1),
        _event("text_delta", run_id=RUN, text="again", attempt=2),
    ]
    step = read_batch(batch, RUN, attempt)
    assert (step.text, step.restart, attempt) == ("again", True, [2])
    assert (
        read_batch([_event("text_delta", run_id=RUN, text="!", attempt=2)], RUN, attempt).restart
        is False
    )


def test_only_the_runs_own_end_finishes_it() -> None:
    child_end = read_batch([_event("run_finished", run_id=CHILD, status="completed")], RUN, [1])
    assert child_end.finished is None
    own = read_batch([_event("run_finished", run_id=RUN, status="failed")], RUN, [1])
    assert own.finished is not None and own.finished["status"] == "failed"


class _Slots:
    async def acquire(self, key_id: str) -> None:
        return None

    async def release(self, key_id: str) -> None:
        return None


class _Session:
    def __init__(self) -> None:
        self.told: list[tuple[float, str | None]] = []

    async def report_progress(
        self, progress: float, total: float | None, message: str | None
    ) -> None:
        self.told.append((progress, message))


async def _watched(
    monkeypatch: pytest.MonkeyPatch, steps: list[Progress], answer: str
) -> tuple[Outcome, list[tuple[float, str | None]]]:
    """``McpEndpoint._watch`` over ``steps`` (the reads of a run's stream): its outcome and the
    progress it told."""

    async def follow(gw: Any, caller: Caller, call: Call) -> Any:
        for step in steps:
            yield step

    async def outcome(gw: Any, caller: Caller, call: Call, finished: Any, base: str) -> Outcome:
        return Outcome(status=RunStatus(finished["status"]), text=answer, files=[])

    monkeypatch.setattr(agent_calls, "follow", follow)
    monkeypatch.setattr(agent_calls, "outcome", outcome)
    gw: Any = type("Gw", (), {"slots": _Slots()})()
    session = _Session()
    ctx: Any = type("Ctx", (), {"session": session, "request": None})()
    call = Call(assistant=_assistant(), session_id="sess_x", run_id=RUN)
    got = await McpEndpoint(gw)._watch(ctx, Caller(account_id="acct", key_id="key"), call)
    return got, session.told


async def test_the_batch_that_ends_a_run_still_tells_its_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run that outpaced its reader ends in one batch with its whole answer: the MCP client
    still gets that text as progress before the result (it used to be dropped)."""
    steps = [
        Progress(notes=["tool lookup"], events=2),
        Progress(text="the whole answer", finished={"status": "completed"}, events=5),
    ]
    got, told = await _watched(monkeypatch, steps, "the whole answer")
    assert got.status is RunStatus.COMPLETED
    assert told == [(2.0, "tool lookup"), (7.0, "the whole answer")]


async def test_one_batch_with_the_steps_and_the_answer_tells_both_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """All of a run in one read (it finished before the reader's first): its steps are told,
    then its text, with counts that increase (a CI run caught the steps dropped)."""
    step = Progress(
        text="the answer",
        notes=["tool lookup", "waiting for permission to run shell"],
        finished={"status": "completed"},
        events=14,
    )
    _, told = await _watched(monkeypatch, [step], "the answer")
    assert told == [
        (1.0, "tool lookup; waiting for permission to run shell"),
        (14.0, "the answer"),
    ]


@pytest.mark.parametrize(
    ("status", "state"),
    [
        (RunStatus.QUEUED, TaskState.TASK_STATE_SUBMITTED),
        (RunStatus.PENDING, TaskState.TASK_STATE_WORKING),
        (RunStatus.RUNNING, TaskState.TASK_STATE_WORKING),
        (RunStatus.COMPLETED, TaskState.TASK_STATE_COMPLETED),
        (RunStatus.FAILED, TaskState.TASK_STATE_FAILED),
        (RunStatus.ABORTED, TaskState.TASK_STATE_FAILED),
        (RunStatus.CANCELLED, TaskState.TASK_STATE_CANCELED),
    ],
)
def test_every_run_status_has_its_task_state(status: RunStatus, state: int) -> None:
    assert state_of(status) == state


def test_an_assistants_card_points_at_its_own_endpoint() -> None:
    card = card_for(_assistant(), "https://agents.example/")
    assert (card.name, card.description, card.version) == ("reviewer", "Reviews patches", "2")
    [interface] = card.supported_interfaces
    assert interface.url == "https://agents.example/a2a/asst_" + "3" * 16
    assert (interface.protocol_binding, interface.protocol_version) == ("JSONRPC", "1.0")
    assert card.capabilities.streaming and not card.capabilities.push_notifications
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "bearer"


def test_a_tool_per_assistant_takes_a_message_and_a_session() -> None:
    tool = tool_of("reviewer", "")
    assert tool.name == "reviewer" and "reviewer" in (tool.description or "")
    assert tool.input_schema["required"] == ["message"]
    assert set(tool.input_schema["properties"]) == {"message", "session_id"}
    assert _arguments({"message": "hi", "session_id": "sess_x"}) == ("hi", "sess_x")
    for bad in (None, {}, {"message": " "}, {"message": 3}, {"message": "hi", "session_id": 4},
                {"message": "hi", "other": 1}):  # fmt: skip
        with pytest.raises(MCPError) as caught:
            _arguments(bad)
        assert caught.value.code == -32602


def test_a_result_is_the_answer_its_files_and_ids() -> None:
    call = Call(assistant=_assistant(), session_id="sess_a", run_id=RUN)
    file = OutputFile("artifact_1", "r.md", "text/markdown", 5, "https://gw/v1/x/content")
    done = tool_result(call, Outcome(RunStatus.COMPLETED, "the answer", [file]))
    assert not done.is_error
    assert [c.type for c in done.content] == ["text", "resource_link"]
    assert done.content[0].text == "the answer"  # type: ignore[union-attr]
    assert str(done.content[1].uri) == file.url  # type: ignore[union-attr]
    assert done.structured_content == {"session_id": "sess_a", "run_id": RUN, "status": "completed"}
    failed = tool_result(
        call, Outcome(RunStatus.FAILED, "", [], error_code="provider_error", error_message="boom")
    )
    assert failed.is_error and failed.content[0].text == "[failed] boom"  # type: ignore[union-attr]


def test_the_gateway_imports_neither_protocol_sdk_until_a_request_needs_it() -> None:
    # Seconds of CPU at every gateway start otherwise (services/gateway/lazy.py).
    code = (
        "import sys, services.gateway.app\n"
        "print(sorted({m.split('.')[0] for m in sys.modules if m.startswith(('a2a', 'mcp.'))}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_card_path_is_the_sdks() -> None:
    from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH

    assert AGENT_CARD_PATH == AGENT_CARD_WELL_KNOWN_PATH


def test_the_a2a_sdks_own_spans_are_off_unless_the_operator_turns_them_on() -> None:
    code = (
        "import services.gateway.routes_a2a\n"
        "from a2a.utils import telemetry\n"
        "print(telemetry.otel_enabled)"
    )
    env = {k: v for k, v in os.environ.items() if k != "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED"}
    for setting, expected in ((None, "False"), ("true", "True")):
        run_env = (
            env if setting is None else {**env, "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED": setting}
        )
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            cwd=REPO,
            env=run_env,
            timeout=60,
        )
        assert done.stdout.strip() == expected, done.stderr
