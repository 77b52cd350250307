"""Apply a command to a task list, and the derived views (ready, blocked) of a DAG.

:func:`apply` is pure: given the current DAG (``None`` before the list exists), a command and the
time, it returns the new DAG and the sealed WAL records to append, or raises
:class:`~agent_core.tasks.errors.TaskRuleError` and changes nothing. The task-wal service stages
a batch's commands on a private copy of the list (``in_place``, one copy a batch rather than one
a command), appends the records, flushes them, and only then replaces its DAG with the staged one.

A command whose effect already holds (claiming a task one already holds, completing or failing a
task one already finished that way, cancelling a cancelled task, re-adding an identical task,
adding a dependency that exists, removing one that does not) returns the DAG unchanged with no
records, so a retry after a lost reply is harmless.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from agent_core.tasks.codec import seal
from agent_core.tasks.errors import TaskErrorCode, TaskRuleError
from agent_core.tasks.rules import evolve, unmet_dependencies
from agent_core.types.task_commands import (
    AddDependency,
    AddTask,
    CancelTask,
    ClaimTask,
    CompleteTask,
    CreateList,
    FailTask,
    ReleaseTask,
    RemoveDependency,
    TaskCommand,
    UpdateTask,
)
from agent_core.types.tasks import (
    DependencyAdded,
    DependencyRemoved,
    ListCreated,
    Task,
    TaskAdded,
    TaskCancelled,
    TaskChange,
    TaskClaimed,
    TaskCompleted,
    TaskDAG,
    TaskFailed,
    TaskReleased,
    TaskStatus,
    TaskUpdated,
    TaskWalEvent,
)

__all__ = ["Applied", "apply", "blocked_ids", "ready_ids", "to_change"]


@dataclass(frozen=True, slots=True)
class Applied:
    """The outcome of an accepted command: the new DAG and the records to append (maybe none)."""

    dag: TaskDAG
    events: tuple[TaskWalEvent, ...]

    @property
    def changed(self) -> bool:
        """Whether the command changed anything (``False`` for a retry whose effect holds)."""
        return bool(self.events)


def apply(
    dag: TaskDAG | None, command: TaskCommand, *, now: datetime, in_place: bool = False
) -> Applied:
    """Apply ``command`` at time ``now`` (timezone-aware); raise ``TaskRuleError`` if refused.

    ``in_place`` is :func:`~agent_core.tasks.rules.evolve`'s: the caller owns ``dag.tasks``.
    """
    dag = _addressed(dag, command)
    if dag is not None and _already_holds(dag, command):
        return Applied(dag, ())
    event = seal(1 if dag is None else dag.seq + 1, now, to_change(command))
    return Applied(evolve(dag, event, in_place=in_place), (event,))


def ready_ids(dag: TaskDAG) -> tuple[str, ...]:
    """Pending tasks whose dependencies are all completed: the ones that can be claimed now."""
    return tuple(
        t.id
        for t in dag.tasks.values()
        if t.status is TaskStatus.PENDING and not unmet_dependencies(dag, t)
    )


def blocked_ids(dag: TaskDAG) -> tuple[str, ...]:
    """Pending tasks with at least one dependency that is not completed."""
    return tuple(
        t.id
        for t in dag.tasks.values()
        if t.status is TaskStatus.PENDING and unmet_dependencies(dag, t)
    )


def to_change(command: TaskCommand) -> TaskChange:
    """The WAL payload that records ``command`` (unchecked: :func:`apply` checks it)."""
    actor = command.agent_id
    match command:
        case CreateList():
            return ListCreated(
                name=command.list_name,
                session_id=command.session_id,
                plan=command.plan,
                agent_id=actor,
            )
        case AddTask():
            return TaskAdded(
                task_id=command.task_id,
                title=command.title,
                description=command.description,
                dependencies=command.dependencies,
                agent_id=actor,
            )
        case UpdateTask():
            return TaskUpdated(
                task_id=command.task_id,
                title=command.title,
                description=command.description,
                note=command.note,
                agent_id=actor,
            )
        case ClaimTask():
            return TaskClaimed(task_id=command.task_id, agent_id=actor, note=command.note)
        case ReleaseTask():
            return TaskReleased(task_id=command.task_id, agent_id=actor, note=command.note)
        case CompleteTask():
            return TaskCompleted(task_id=command.task_id, agent_id=actor, note=command.note)
        case FailTask():
            return TaskFailed(task_id=command.task_id, agent_id=actor, note=command.note)
        case CancelTask():
            return TaskCancelled(task_id=command.task_id, agent_id=actor, note=command.note)
        case AddDependency():
            return DependencyAdded(
                task_id=command.task_id, depends_on=command.depends_on, agent_id=actor
            )
        case RemoveDependency():
            return DependencyRemoved(
                task_id=command.task_id, depends_on=command.depends_on, agent_id=actor
            )


def _addressed(dag: TaskDAG | None, command: TaskCommand) -> TaskDAG | None:
    """Check that ``command`` targets ``dag`` (or creates it when there is none)."""
    if dag is None:
        if not isinstance(command, CreateList):
            raise TaskRuleError(
                TaskErrorCode.LIST_NOT_FOUND,
                f"task list {command.list_name!r} does not exist: create it first",
                details={"list_name": command.list_name},
            )
        return None
    if isinstance(command, CreateList):
        raise TaskRuleError(
            TaskErrorCode.LIST_EXISTS,
            f"task list {dag.name!r} already exists",
            details={"list_name": dag.name},
        )
    if (command.session_id, command.list_name) != (dag.session_id, dag.name):
        raise TaskRuleError(
            TaskErrorCode.LIST_MISMATCH,
            f"command for list {command.list_name!r} of {command.session_id} reached list "
            f"{dag.name!r} of {dag.session_id}",
            details={"list_name": command.list_name, "session_id": command.session_id},
        )
    return dag


def _already_holds(dag: TaskDAG, command: TaskCommand) -> bool:
    """Whether the effect of ``command`` is already in place (so a retry writes nothing)."""
    task_id = getattr(command, "task_id", None)
    task: Task | None = dag.tasks.get(task_id) if isinstance(task_id, str) else None
    if task is None:
        return False
    by_actor = task.claimant == command.agent_id
    match command:
        case AddTask():
            return (task.title, task.description, task.dependencies) == (
                command.title,
                command.description,
                command.dependencies,
            )
        case ClaimTask():
            return task.status is TaskStatus.IN_PROGRESS and by_actor
        case CompleteTask():
            return task.status is TaskStatus.COMPLETED and by_actor
        case FailTask():
            return task.status is TaskStatus.FAILED and by_actor
        case CancelTask():
            return task.status is TaskStatus.CANCELLED
        case AddDependency():
            return command.depends_on in task.dependencies
        case RemoveDependency():
            return command.depends_on in dag.tasks and command.depends_on not in task.dependencies
        case _:
            return False
