"""The group commit without the bus: batches, failed writes, request-log repair."""

from __future__ import annotations

import errno
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent_core.bus.contracts.tasks import (
    TaskChangeResult,
    TaskCommandMessage,
    TaskDagView,
    TaskMessage,
    TaskQueryMessage,
    TaskScope,
)
from agent_core.ids import new_id, new_session_id
from agent_core.tasks import ReplayStatus, replay
from agent_core.types.task_commands import AddTask, CreateList, TaskCommand, UpdateTask
from services.task_wal.handler import TaskWalHandler
from services.task_wal.location import Projects, list_location
from services.task_wal.store import TaskStore
from services.task_wal.walfile import ListFiles, load_list, request_line

T0 = datetime(2025, 1, 1, tzinfo=UTC)
AGENT = "agent_unit"
SCOPE = TaskScope(account_id="unit", project="t")  # the project root ``t``: the test's folder


def projects(folder: Path) -> Projects:
    """A host whose project root ``t`` is ``folder``."""
    return Projects(folder / "home", {"t": folder})


def command(session_id: str, cwd: Path, op: TaskCommand, request_id: str = "") -> TaskMessage:
    return TaskCommandMessage(
        request_id=request_id or new_id("cmd"),
        session_id=session_id,
        scope=SCOPE,
        list_name=op.list_name,
        operation=op,
    )


def ops(session_id: str) -> tuple[CreateList, AddTask, AddTask]:
    common = {"session_id": session_id, "list_name": "l", "agent_id": AGENT}
    return (
        CreateList(**common),
        AddTask(**common, task_id="task_a", title="a"),
        AddTask(**common, task_id="task_b", title="b"),
    )


async def test_a_batch_applies_in_order_and_its_queries_see_the_commit(tmp_path: Path) -> None:
    sid = new_session_id()
    create, add_a, add_b = ops(sid)
    handler = TaskWalHandler(TaskStore(fsync=True), projects(tmp_path), clock=lambda: T0)
    query = TaskQueryMessage(session_id=sid, scope=SCOPE, list_name="l")
    replies = await handler.handle(
        [query, *(command(sid, tmp_path, op) for op in (create, add_a, add_b))]
    )
    assert all(r.ok for r in replies)
    view = replies[0].data
    assert isinstance(view, TaskDagView) and sorted(view.dag.tasks) == ["task_a", "task_b"]
    seqs = [r.data.seq for r in replies[1:] if isinstance(r.data, TaskChangeResult)]
    assert seqs == [1, 2, 3]


async def test_a_failed_write_is_rolled_back_and_answered_retryable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = new_session_id()
    create, add_a, add_b = ops(sid)
    handler = TaskWalHandler(TaskStore(fsync=True), projects(tmp_path), clock=lambda: T0)
    await handler.handle([command(sid, tmp_path, create), command(sid, tmp_path, add_a)])
    loc = list_location(sid, SCOPE, "l", projects(tmp_path))
    before = loc.wal.read_bytes()
    real_write = ListFiles.write

    def torn_write(self: ListFiles, wal: bytes, requests: bytes, *, fsync: bool) -> None:
        real_write(self, wal[: len(wal) // 2], requests, fsync=fsync)  # half a record reached disk
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(ListFiles, "write", torn_write)
    [failed] = await handler.handle([command(sid, tmp_path, add_b, "cmd_b")])
    assert not failed.ok and failed.error is not None
    assert failed.error.code == "task_wal_io_error" and failed.error.retryable
    assert loc.wal.read_bytes() == before
    monkeypatch.undo()
    [retried] = await handler.handle([command(sid, tmp_path, add_b, "cmd_b")])
    assert retried.ok and isinstance(retried.data, TaskChangeResult)
    assert retried.data.changed and not retried.data.duplicate and retried.data.seq == 3
    result = replay(loc.wal.read_bytes())
    assert result.status is ReplayStatus.CLEAN and result.dag is not None
    assert sorted(result.dag.tasks) == ["task_a", "task_b"]


async def test_request_log_forgets_ids_whose_records_were_lost(tmp_path: Path) -> None:
    sid = new_session_id()
    handler = TaskWalHandler(TaskStore(fsync=False), projects(tmp_path), clock=lambda: T0)
    create, add_a, _ = ops(sid)
    await handler.handle([command(sid, tmp_path, create, "cmd_1"), command(sid, tmp_path, add_a)])
    loc = list_location(sid, SCOPE, "l", projects(tmp_path))
    # seq 2 was written twice (the first record was lost in a torn tail), seq 5 never reached
    # the WAL, and the last line was cut by a crash.
    loc.requests.write_bytes(
        request_line("cmd_1", 1)
        + request_line("cmd_lost", 2)
        + request_line("cmd_2", 2)
        + request_line("cmd_future", 5)
        + b'{"r":"cmd_to'
    )
    loaded = load_list(loc, fsync=False)
    assert dict(loaded.requests) == {"cmd_1": 1, "cmd_2": 2}
    assert loc.requests.read_bytes().endswith(b"\n")


async def test_a_duplicate_inside_one_batch_is_applied_once(tmp_path: Path) -> None:
    sid = new_session_id()
    create, add_a, _ = ops(sid)
    note = UpdateTask(session_id=sid, list_name="l", agent_id=AGENT, task_id="task_a", note="n")
    handler = TaskWalHandler(TaskStore(fsync=True), projects(tmp_path), clock=lambda: T0)
    await handler.handle([command(sid, tmp_path, create), command(sid, tmp_path, add_a)])
    replies = await handler.handle([command(sid, tmp_path, note, "cmd_same") for _ in range(3)])
    results = [r.data for r in replies if isinstance(r.data, TaskChangeResult)]
    assert [(r.changed, r.duplicate) for r in results] == [
        (True, False),
        (False, True),
        (False, True),
    ]
    task = results[-1].task
    assert task is not None and [n.text for n in task.notes] == ["n"]


async def test_a_reply_shows_its_own_commands_dag_not_the_batchs_later_ones(
    tmp_path: Path,
) -> None:
    """The batch stages its changes in place on one copy: a reply's DAG must not move on."""
    sid = new_session_id()
    create, add_a, add_b = ops(sid)
    handler = TaskWalHandler(TaskStore(fsync=True), projects(tmp_path), clock=lambda: T0)
    await handler.handle([command(sid, tmp_path, create)])
    [query] = await handler.handle([TaskQueryMessage(session_id=sid, scope=SCOPE, list_name="l")])
    committed = query.data
    assert isinstance(committed, TaskDagView) and committed.dag.tasks == {}
    first = command(sid, tmp_path, add_a)
    assert isinstance(first, TaskCommandMessage)
    first = first.model_copy(update={"include_dag": True})
    replies = await handler.handle([first, command(sid, tmp_path, add_b)])
    shown = replies[0].data
    assert isinstance(shown, TaskChangeResult) and shown.dag is not None
    assert list(shown.dag.dag.tasks) == ["task_a"] and shown.dag.ready == ("task_a",)
    assert committed.dag.tasks == {}  # what a query answered before is not changed either
    [after] = await handler.handle([TaskQueryMessage(session_id=sid, scope=SCOPE, list_name="l")])
    assert isinstance(after.data, TaskDagView)
    assert list(after.data.dag.tasks) == ["task_a", "task_b"]
