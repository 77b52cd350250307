"""Group commit: stage a batch of commands, write and fsync once per list, then apply and reply.

One batch at a time (a lock: the consumer's reader and its recovery sweeps share this one writer).
For each command in arrival order the domain's :func:`~agent_core.tasks.apply` runs against the
list's *staged* DAG, so later commands of the batch see earlier ones; the staged DAG is a copy made
once a batch and changed in place (a copy a command would cost time that grows with the list).
Then, in one worker-thread call, every touched list gets its records written and (if configured)
fsynced. Only a list whose write succeeded has its staged DAG installed and its commands
acknowledged; a list whose write failed is rolled back, dropped from memory (its next use replays
the file) and its commands get a retryable error. Queries of the batch are answered after the
commit, from acknowledged state.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from agent_core.bus.contracts.tasks import (
    TaskChangeResult,
    TaskCommandMessage,
    TaskDagView,
    TaskListInfo,
    TaskListsView,
    TaskMessage,
    TaskQueryMessage,
    TaskReply,
    TaskReplyData,
    TaskScope,
)
from agent_core.errors import AgentCoreError, ErrorPayload, StorageError
from agent_core.tasks import (
    TaskDAG,
    TaskErrorCode,
    TaskRuleError,
    TaskWalEvent,
    apply,
    blocked_ids,
    encode_record,
    ready_ids,
)
from services.task_wal.location import ListLocation, Projects, list_location, session_dir
from services.task_wal.store import ListState, TaskStore
from services.task_wal.walfile import request_line

__all__ = ["TaskWalHandler", "dag_view"]

log = logging.getLogger("soong.task_wal")


@dataclass
class _Group:
    """The staged changes of one list within a batch."""

    state: ListState
    dag: TaskDAG | None
    wal: bytearray = field(default_factory=bytearray)
    requests: bytearray = field(default_factory=bytearray)
    applied: dict[str, int] = field(default_factory=dict)
    replies: list[tuple[int, TaskReply]] = field(default_factory=list)


class TaskWalHandler:
    """Answers batches of task messages; see the module docstring for the order of effects."""

    def __init__(
        self,
        store: TaskStore,
        projects: Projects,
        *,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._store = store
        self._projects = projects
        self._clock = clock or (lambda: datetime.now(UTC))
        self._lock = asyncio.Lock()
        # Checked locations of the current batch: commands of one batch mostly share a list,
        # and checking a project costs system calls. Cleared per batch so a removed cwd is noticed.
        self._locations: dict[tuple[str, TaskScope, str], ListLocation] = {}

    async def handle(self, messages: Sequence[TaskMessage]) -> list[TaskReply]:
        """One reply per message, in order; commands are durable before this returns."""
        async with self._lock:
            replies: list[TaskReply | None] = [None] * len(messages)
            groups: dict[Path, _Group] = {}
            self._locations.clear()
            now = self._clock()
            for i, message in enumerate(messages):
                if isinstance(message, TaskCommandMessage):
                    await self._stage(i, message, groups, replies, now)
            await self._commit(groups, replies)
            for i, message in enumerate(messages):
                if isinstance(message, TaskQueryMessage):
                    replies[i] = await self._query(message)
        assert all(r is not None for r in replies)
        return [r for r in replies if r is not None]

    # -- commands ------------------------------------------------------------------------------

    async def _stage(
        self,
        i: int,
        message: TaskCommandMessage,
        groups: dict[Path, _Group],
        replies: list[TaskReply | None],
        now: datetime,
    ) -> None:
        try:
            loc = self._location(message.session_id, message.scope, message.list_name)
            state = await self._store.get(loc)
        except AgentCoreError as exc:
            replies[i] = _failed(exc.to_payload())
            return
        except OSError as exc:
            replies[i] = _failed(_io_error("read", message.list_name, exc))
            return
        if state.corruption is not None:
            replies[i] = _failed(state.corruption.to_payload())
            return
        group = groups.get(loc.wal)
        if group is None:
            group = groups[loc.wal] = _Group(state, state.dag and _private(state.dag))
        group.replies.append((i, _apply(group, message, now)))

    def _location(self, session_id: str, scope: TaskScope, list_name: str) -> ListLocation:
        key = (session_id, scope, list_name)
        loc = self._locations.get(key)
        if loc is None:
            loc = self._locations[key] = list_location(session_id, scope, list_name, self._projects)
        return loc

    async def _commit(self, groups: dict[Path, _Group], replies: list[TaskReply | None]) -> None:
        work = [(g.state, bytes(g.wal), bytes(g.requests)) for g in groups.values() if g.wal]
        failures = await self._store.write(work)
        for g in groups.values():
            error = failures.get(g.state.location.wal)
            if error is not None:
                log.error("task WAL %s: write failed: %s", g.state.location.wal, error)
                self._store.forget(g.state)
                payload = (
                    error.to_payload()
                    if isinstance(error, AgentCoreError)
                    else _io_error("write", g.state.location.stem, error)
                )
                for i, _ in g.replies:
                    replies[i] = _failed(payload)
                continue
            g.state.dag = g.dag
            for request_id, seq in g.applied.items():
                g.state.remember(request_id, seq)
            for i, reply in g.replies:
                replies[i] = reply

    # -- queries -------------------------------------------------------------------------------

    async def _query(self, message: TaskQueryMessage) -> TaskReply:
        try:
            if message.list_name is None:
                directory = session_dir(message.session_id, message.scope, self._projects)
                states = await self._store.session_lists(message.session_id, directory)
                infos = [_info(s) for s in states]
                return _ok(TaskListsView(session_id=message.session_id, lists=infos))
            loc = list_location(
                message.session_id, message.scope, message.list_name, self._projects
            )
            state = await self._store.get(loc)
        except AgentCoreError as exc:
            return _failed(exc.to_payload())
        except OSError as exc:
            return _failed(_io_error("read", message.list_name or message.session_id, exc))
        if state.corruption is not None:
            return _failed(state.corruption.to_payload())
        if state.dag is None or state.dag.name != message.list_name:
            error = TaskRuleError(
                TaskErrorCode.LIST_NOT_FOUND,
                f"task list {message.list_name!r} does not exist",
                details={"list_name": message.list_name},
            )
            return _failed(error.to_payload())
        return _ok(dag_view(state.dag))


def dag_view(dag: TaskDAG) -> TaskDagView:
    """A DAG with its ready and blocked sets."""
    return TaskDagView(dag=dag, ready=ready_ids(dag), blocked=blocked_ids(dag))


def _apply(group: _Group, message: TaskCommandMessage, now: datetime) -> TaskReply:
    """Stage one command on ``group``; the reply is sent only if the group's write succeeds."""
    command = message.operation
    known = group.applied.get(message.request_id) or group.state.requests.get(message.request_id)
    try:
        if known is not None and group.dag is not None:
            return _ok(_result(message, group.dag, changed=False, duplicate=True))
        applied = apply(group.dag, command, now=now, in_place=True)
    except AgentCoreError as exc:
        return _failed(exc.to_payload())
    except Exception as exc:  # a bug must cost one reply, not the whole batch
        log.exception("task command %s failed unexpectedly", message.request_id)
        return _failed(
            ErrorPayload(type="task_error", code="task_internal_error", message=str(exc)[:500])
        )
    if applied.changed:
        group.dag = applied.dag
        for event in applied.events:
            group.wal += encode_record(event)
        seq = applied.events[-1].seq
        group.requests += request_line(message.request_id, seq)
        group.applied[message.request_id] = seq
    return _ok(_result(message, applied.dag, changed=applied.changed, events=applied.events))


def _result(
    message: TaskCommandMessage,
    dag: TaskDAG,
    *,
    changed: bool,
    duplicate: bool = False,
    events: tuple[TaskWalEvent, ...] = (),
) -> TaskChangeResult:
    task_id = getattr(message.operation, "task_id", None)
    return TaskChangeResult(
        list_name=dag.name,
        seq=dag.seq,
        changed=changed,
        duplicate=duplicate,
        events=events,
        task=dag.tasks.get(task_id) if isinstance(task_id, str) else None,
        # A copy: later commands of the batch go on changing the staged DAG's tasks in place.
        dag=dag_view(_private(dag)) if message.include_dag else None,
    )


def _private(dag: TaskDAG) -> TaskDAG:
    """``dag`` with a tasks dict of its own, for staging changes in place."""
    return dag.model_copy(update={"tasks": dict(dag.tasks)})


def _info(state: ListState) -> TaskListInfo:
    file_name = state.location.wal.name
    if state.corruption is not None:
        payload = state.corruption.to_payload()
        return TaskListInfo(name=None, file_name=file_name, available=False, error=payload)
    dag = state.dag
    if dag is None:  # an empty file: nothing was ever acknowledged
        return TaskListInfo(name=None, file_name=file_name, available=False)
    counts: dict[str, int] = {}
    for task in dag.tasks.values():
        counts[str(task.status)] = counts.get(str(task.status), 0) + 1
    return TaskListInfo(
        name=dag.name,
        file_name=file_name,
        available=True,
        seq=dag.seq,
        task_count=len(dag.tasks),
        status_counts=counts,
    )


def _io_error(action: str, what: str, exc: OSError) -> ErrorPayload:
    error = StorageError(
        "task_wal_io_error",
        f"could not {action} the task WAL of {what!r}: {exc.strerror or exc}",
        retryable=True,
        details={"errno": exc.errno},
    )
    return error.to_payload()


def _ok(data: TaskReplyData) -> TaskReply:
    return TaskReply(ok=True, data=data)


def _failed(error: ErrorPayload) -> TaskReply:
    return TaskReply(ok=False, error=error)
