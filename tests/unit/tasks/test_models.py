"""Models and commands refuse what the contract does not allow."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from agent_core.ids import is_valid_id
from agent_core.types.task_commands import TASK_COMMAND, AddTask, ClaimTask, UpdateTask
from agent_core.types.tasks import MAX_TITLE, Task, TaskStatus
from tests.unit.tasks.support import ALICE, LIST, SESSION, T0

ADDRESS: dict[str, Any] = {"session_id": SESSION, "list_name": LIST, "agent_id": ALICE}


def test_task_status_values_are_stored_strings() -> None:
    assert [s.value for s in TaskStatus] == [
        "pending",
        "in_progress",
        "completed",
        "failed",
        "cancelled",
    ]
    assert "blocked" not in {s.value for s in TaskStatus}  # derived, never stored


def test_command_union_dispatches_on_type() -> None:
    raw = {"type": "claim_task", "task_id": "task_a", **ADDRESS}
    assert TASK_COMMAND.validate_python(raw) == ClaimTask(task_id="task_a", **ADDRESS)
    json = '{"type":"add_task","title":"x","task_id":"task_b",' + (
        f'"session_id":"{SESSION}","list_name":"{LIST}","agent_id":"{ALICE}"}}'
    )
    assert isinstance(TASK_COMMAND.validate_json(json), AddTask)


@pytest.mark.parametrize(
    "raw",
    [
        {"type": "explode_task", "task_id": "task_a"},  # unknown type
        {"type": "claim_task", "task_id": "task_a", "force": True},  # extra field
        {"type": "claim_task", "task_id": "node_a"},  # wrong id prefix
        {"type": "claim_task", "task_id": "task_a", "agent_id": "bob"},  # actor not an agent id
        {"type": "claim_task", "task_id": "task_a", "session_id": "sess_x; DROP"},
        {"type": "create_list", "list_name": ""},
        {"type": "add_task", "title": "x" * (MAX_TITLE + 1)},
        {"type": "add_task", "title": ""},
    ],
)
def test_invalid_commands_are_refused_at_the_edge(raw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        TASK_COMMAND.validate_python({**ADDRESS, **raw})


def test_add_task_allocates_a_task_id_sender_side() -> None:
    first, second = AddTask(title="x", **ADDRESS), AddTask(title="x", **ADDRESS)
    assert is_valid_id(first.task_id, "task") and first.task_id != second.task_id


def test_update_must_change_something() -> None:
    with pytest.raises(ValidationError, match="title, description or note"):
        UpdateTask(task_id="task_a", **ADDRESS)


def test_task_is_frozen_and_requires_aware_times() -> None:
    task = Task(id="task_a", title="t", created_at=T0, updated_at=T0)
    with pytest.raises(ValidationError):
        task.title = "changed"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        Task(id="task_a", title="t", created_at=T0.replace(tzinfo=None), updated_at=T0)
