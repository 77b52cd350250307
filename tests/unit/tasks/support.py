"""Helpers shared by the task tests: a board that applies commands with a ticking clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agent_core.tasks.dag import Applied, apply
from agent_core.tasks.errors import TaskErrorCode, TaskRuleError
from agent_core.tasks.rules import depends_transitively
from agent_core.types.task_commands import TaskCommand
from agent_core.types.tasks import TaskDAG, TaskStatus, TaskWalEvent

SESSION = "sess_20260101_120000_abcd"
LIST = "Build the API"
ALICE = "agent_alice"
BOB = "agent_bob"
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


class Board:
    """Applies commands to one list the way the service will: state replaced only on success."""

    def __init__(self) -> None:
        self.dag: TaskDAG | None = None
        self.events: list[TaskWalEvent] = []
        self.clock = T0

    def do(self, cls: type[Any], *, agent_id: str = ALICE, **fields: Any) -> Applied:
        """Build a command of type ``cls`` for this list and apply it."""
        fields.setdefault("session_id", SESSION)
        fields.setdefault("list_name", LIST)
        command: TaskCommand = cls(agent_id=agent_id, **fields)
        return self.run(command)

    def run(self, command: TaskCommand) -> Applied:
        """Apply ``command`` one second after the previous one."""
        self.clock += timedelta(seconds=1)
        result = apply(self.dag, command, now=self.clock)
        self.dag = result.dag
        self.events.extend(result.events)
        return result

    def refuse(
        self, code: TaskErrorCode, cls: type[Any], *, agent_id: str = ALICE, **fields: Any
    ) -> TaskRuleError:
        """Assert the command is refused with ``code`` and that nothing changed."""
        before = self.dag
        snapshot = None if before is None else before.model_dump()
        count = len(self.events)
        with pytest.raises(TaskRuleError) as info:
            self.do(cls, agent_id=agent_id, **fields)
        assert info.value.task_code is code, info.value.message
        assert self.dag is before
        assert (None if before is None else before.model_dump()) == snapshot
        assert len(self.events) == count
        return info.value

    @property
    def state(self) -> TaskDAG:
        """The DAG, which must exist."""
        assert self.dag is not None
        return self.dag


def assert_invariants(dag: TaskDAG) -> None:
    """The structural invariants every reachable DAG keeps."""
    for task_id, task in dag.tasks.items():
        assert task.id == task_id
        assert len(set(task.dependencies)) == len(task.dependencies)
        for dep in task.dependencies:
            assert dep in dag.tasks and dep != task_id
        assert not depends_transitively(dag, task_id, task_id), f"cycle through {task_id}"
        if task.status is TaskStatus.PENDING:
            assert task.claimant is None and task.finished_at is None
        elif task.status is TaskStatus.IN_PROGRESS:
            assert task.claimant is not None and task.finished_at is None
        else:
            assert task.finished_at is not None
