"""The Task DAG rules, applied to WAL records: ``evolve(dag, event) -> new dag`` or a refusal.

This is the single place the rules live. Commands reach it through :func:`agent_core.tasks.dag.apply`
(which turns a command into a record and checks it here *before* anything is written), and replay
runs every stored record through it again, so a record that breaks a rule reads as corruption
instead of being trusted.

Rules:
- records come in ``seq`` order from 1, without gaps; the first one creates the list, once;
- task ids are unique; dependencies name existing tasks, not the task itself, not twice, and never
  close a cycle; dependencies change only while a task is pending;
- transitions: pending → in_progress (claim, only when every dependency is completed),
  in_progress → pending (release), in_progress → completed | failed, pending | in_progress →
  cancelled; finished tasks never change;
- a claimed (in_progress) task changes only through its claimant.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import assert_never

from agent_core.tasks.errors import TaskErrorCode, TaskRuleError
from agent_core.types.tasks import (
    FINISHED_STATUSES,
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
    TaskNote,
    TaskReleased,
    TaskStatus,
    TaskUpdated,
    TaskWalEvent,
)

__all__ = ["depends_transitively", "evolve", "unmet_dependencies"]

_E = TaskErrorCode


def evolve(dag: TaskDAG | None, event: TaskWalEvent, *, in_place: bool = False) -> TaskDAG:
    """The DAG after ``event``, or :class:`TaskRuleError` if the record breaks a rule.

    ``dag`` is ``None`` before the first record. The input is never modified, unless
    ``in_place``: then the caller owns ``dag.tasks`` (no other DAG it still uses shares that
    dict) and the new DAG takes the dict over with the one changed task set in it, instead of a
    copy of every task — a constant cost a record where a copy grows with the list, for a caller
    that evolves one private DAG many times (a replay, a batch). A refused record changes nothing
    either way.
    """
    expected = 1 if dag is None else dag.seq + 1
    if event.seq != expected:
        raise TaskRuleError(
            _E.SEQ_MISMATCH,
            f"record seq {event.seq}, expected {expected}",
            details={"seq": event.seq},
        )
    change = event.payload
    if isinstance(change, ListCreated):
        if dag is not None:
            raise TaskRuleError(_E.LIST_EXISTS, f"task list {dag.name!r} already exists")
        return TaskDAG(
            name=change.name,
            session_id=change.session_id,
            plan=change.plan,
            seq=event.seq,
            created_at=event.ts,
            updated_at=event.ts,
        )
    if dag is None:
        raise TaskRuleError(_E.LIST_NOT_FOUND, "the task list has not been created")
    task = _apply_task_change(dag, change, event.ts)
    tasks = dag.tasks if in_place else dict(dag.tasks)
    tasks[task.id] = task
    return dag.model_copy(update={"tasks": tasks, "seq": event.seq, "updated_at": event.ts})


def unmet_dependencies(dag: TaskDAG, task: Task) -> tuple[str, ...]:
    """The dependencies of ``task`` that are not completed, in declaration order."""
    return tuple(d for d in task.dependencies if dag.tasks[d].status is not TaskStatus.COMPLETED)


def depends_transitively(dag: TaskDAG, start: str, target: str) -> bool:
    """Whether ``start`` depends on ``target`` through one or more dependency edges."""
    seen: set[str] = set()
    stack = list(dag.tasks[start].dependencies)
    while stack:
        current = stack.pop()
        if current == target:
            return True
        if current not in seen:
            seen.add(current)
            stack.extend(dag.tasks[current].dependencies)
    return False


def _apply_task_change(dag: TaskDAG, change: TaskChange, ts: datetime) -> Task:
    """The new version of the one task ``change`` touches."""
    if isinstance(change, ListCreated):  # evolve handles it; reaching here is a bug
        raise AssertionError("list_created is not a task change")
    if isinstance(change, TaskAdded):
        return _added(dag, change, ts)
    task = _existing(dag, change.task_id)
    if task.status in FINISHED_STATUSES:
        raise TaskRuleError(
            _E.INVALID_TRANSITION,
            f"task {task.id} is {task.status} and can no longer change",
            details={"task_id": task.id, "status": str(task.status)},
        )
    match change:
        case TaskUpdated():
            return _updated(task, change, ts)
        case TaskClaimed():
            return _claimed(dag, task, change, ts)
        case TaskReleased() | TaskCompleted() | TaskFailed():
            _require_claimant(task, change.agent_id)
            status = _TARGET[type(change)]
            claimant = None if status is TaskStatus.PENDING else task.claimant
            return _moved(task, status, claimant, change.agent_id, change.note, ts)
        case TaskCancelled():
            if task.status is TaskStatus.IN_PROGRESS:
                _require_claimant(task, change.agent_id)
            return _moved(
                task, TaskStatus.CANCELLED, task.claimant, change.agent_id, change.note, ts
            )
        case DependencyAdded():
            return _dependency_added(dag, task, change, ts)
        case DependencyRemoved():
            return _dependency_removed(task, change, ts)
    assert_never(change)


_TARGET: dict[type, TaskStatus] = {
    TaskReleased: TaskStatus.PENDING,
    TaskCompleted: TaskStatus.COMPLETED,
    TaskFailed: TaskStatus.FAILED,
}


def _existing(dag: TaskDAG, task_id: str, code: TaskErrorCode = _E.TASK_NOT_FOUND) -> Task:
    task = dag.tasks.get(task_id)
    if task is None:
        raise TaskRuleError(
            code,
            f"task {task_id} does not exist in list {dag.name!r}",
            details={"task_id": task_id},
        )
    return task


def _check_dependencies(dag: TaskDAG, task_id: str, deps: Iterable[str]) -> None:
    seen: set[str] = set()
    for dep in deps:
        if dep == task_id:
            raise TaskRuleError(
                _E.SELF_DEPENDENCY,
                f"task {task_id} cannot depend on itself",
                details={"task_id": task_id},
            )
        if dep in seen:
            raise TaskRuleError(
                _E.DUPLICATE_DEPENDENCY,
                f"task {task_id} already depends on {dep}",
                details={"task_id": task_id, "depends_on": dep},
            )
        seen.add(dep)
        _existing(dag, dep, _E.DEPENDENCY_NOT_FOUND)


def _added(dag: TaskDAG, change: TaskAdded, ts: datetime) -> Task:
    if change.task_id in dag.tasks:
        raise TaskRuleError(
            _E.TASK_EXISTS,
            f"task {change.task_id} already exists",
            details={"task_id": change.task_id},
        )
    _check_dependencies(dag, change.task_id, change.dependencies)
    return Task(
        id=change.task_id,
        title=change.title,
        description=change.description,
        dependencies=change.dependencies,
        created_at=ts,
        updated_at=ts,
    )


def _require_claimant(task: Task, agent_id: str) -> None:
    if task.status is not TaskStatus.IN_PROGRESS:
        raise TaskRuleError(
            _E.INVALID_TRANSITION,
            f"task {task.id} is {task.status}, not in_progress: claim it first",
            details={"task_id": task.id, "status": str(task.status)},
        )
    if task.claimant != agent_id:
        raise TaskRuleError(
            _E.NOT_CLAIMANT,
            f"task {task.id} is claimed by {task.claimant}; only its claimant can change it",
            details={"task_id": task.id, "claimant": task.claimant, "agent_id": agent_id},
        )


def _with_note(task: Task, agent_id: str, note: str | None, ts: datetime) -> tuple[TaskNote, ...]:
    if note is None:
        return task.notes
    return (*task.notes, TaskNote(agent_id=agent_id, text=note, at=ts))


def _updated(task: Task, change: TaskUpdated, ts: datetime) -> Task:
    if change.title is None and change.description is None and change.note is None:
        raise TaskRuleError(
            _E.EMPTY_UPDATE, "an update must change the title, description or notes"
        )
    if task.status is TaskStatus.IN_PROGRESS:
        _require_claimant(task, change.agent_id)
    return task.model_copy(
        update={
            "title": task.title if change.title is None else change.title,
            "description": task.description if change.description is None else change.description,
            "notes": _with_note(task, change.agent_id, change.note, ts),
            "updated_at": ts,
        }
    )


def _claimed(dag: TaskDAG, task: Task, change: TaskClaimed, ts: datetime) -> Task:
    if task.status is TaskStatus.IN_PROGRESS:
        raise TaskRuleError(
            _E.ALREADY_CLAIMED,
            f"task {task.id} is already claimed by {task.claimant}",
            details={"task_id": task.id, "claimant": task.claimant},
        )
    unmet = unmet_dependencies(dag, task)
    if unmet:
        raise TaskRuleError(
            _E.BLOCKED,
            f"task {task.id} is blocked by unfinished dependencies: {', '.join(unmet)}",
            details={"task_id": task.id, "unmet": list(unmet)},
        )
    return _moved(task, TaskStatus.IN_PROGRESS, change.agent_id, change.agent_id, change.note, ts)


def _moved(
    task: Task,
    status: TaskStatus,
    claimant: str | None,
    agent_id: str,
    note: str | None,
    ts: datetime,
) -> Task:
    return task.model_copy(
        update={
            "status": status,
            "claimant": claimant,
            "notes": _with_note(task, agent_id, note, ts),
            "updated_at": ts,
            "finished_at": ts if status in FINISHED_STATUSES else None,
        }
    )


def _require_pending(task: Task) -> None:
    if task.status is not TaskStatus.PENDING:
        raise TaskRuleError(
            _E.NOT_PENDING,
            f"dependencies of task {task.id} can change only while it is pending (it is {task.status})",
            details={"task_id": task.id, "status": str(task.status)},
        )


def _dependency_added(dag: TaskDAG, task: Task, change: DependencyAdded, ts: datetime) -> Task:
    _require_pending(task)
    _check_dependencies(dag, task.id, (*task.dependencies, change.depends_on))
    # The new edge task → dep closes a cycle exactly when dep already reaches task.
    if depends_transitively(dag, change.depends_on, task.id):
        raise TaskRuleError(
            _E.CYCLE,
            f"task {change.depends_on} already depends on {task.id}: the edge would close a cycle",
            details={"task_id": task.id, "depends_on": change.depends_on},
        )
    deps = (*task.dependencies, change.depends_on)
    return task.model_copy(update={"dependencies": deps, "updated_at": ts})


def _dependency_removed(task: Task, change: DependencyRemoved, ts: datetime) -> Task:
    _require_pending(task)
    if change.depends_on not in task.dependencies:
        raise TaskRuleError(
            _E.DEPENDENCY_NOT_FOUND,
            f"task {task.id} does not depend on {change.depends_on}",
            details={"task_id": task.id, "depends_on": change.depends_on},
        )
    deps = tuple(d for d in task.dependencies if d != change.depends_on)
    return task.model_copy(update={"dependencies": deps, "updated_at": ts})
