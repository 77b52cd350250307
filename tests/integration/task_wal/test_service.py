"""task-wal over the real bus: commands are durable before their reply, lists are independent,
torn tails are repaired, corruption stays inside its list, retries apply once."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent_core.bus.contracts.tasks import TaskScope
from agent_core.ids import new_id, new_session_id
from agent_core.tasks import ReplayStatus, TaskStatus, list_file_name, replay
from agent_core.tasks.client import TaskClient, TaskServiceError
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
from tests.integration.task_wal.conftest import RunningService, scope_of

ALICE = "agent_alice"
BOB = "agent_bob"


def wal_path(project: Path, session_id: str, name: str) -> Path:
    return project / ".soong-agent" / "tasks" / session_id / list_file_name(name)


async def make_list(client: TaskClient, project: Path, session_id: str, name: str) -> None:
    await client.execute(
        CreateList(session_id=session_id, list_name=name, agent_id=ALICE), scope=scope_of(project)
    )


async def add(
    client: TaskClient, project: Path, session_id: str, name: str, task_id: str, *deps: str
) -> None:
    command = AddTask(
        session_id=session_id,
        list_name=name,
        agent_id=ALICE,
        task_id=task_id,
        title=f"do {task_id}",
        dependencies=deps,
    )
    await client.execute(command, scope=scope_of(project))


@pytest.mark.parametrize("fsync", [True, False], ids=["fsync", "no-fsync"])
async def test_every_command_is_in_the_wal_and_replays_to_the_served_dag(
    task_wal: RunningService, client: TaskClient, project: Path, session_id: str, fsync: bool
) -> None:
    cwd, common = (
        scope_of(project),
        {"session_id": session_id, "list_name": "build", "agent_id": ALICE},
    )
    async with task_wal(fsync=fsync):
        await make_list(client, project, session_id, "build")
        await add(client, project, session_id, "build", "task_a")
        await add(client, project, session_id, "build", "task_b")
        await add(client, project, session_id, "build", "task_c", "task_a")
        steps: list[TaskCommand] = [
            AddDependency(**common, task_id="task_c", depends_on="task_b"),
            RemoveDependency(**common, task_id="task_c", depends_on="task_b"),
            UpdateTask(**common, task_id="task_b", note="looked at it"),
            ClaimTask(**common, task_id="task_a"),
            CompleteTask(**common, task_id="task_a", note="done"),
            ClaimTask(**{**common, "agent_id": BOB}, task_id="task_c"),
            ReleaseTask(**{**common, "agent_id": BOB}, task_id="task_c"),
            ClaimTask(**{**common, "agent_id": BOB}, task_id="task_c"),
            FailTask(**{**common, "agent_id": BOB}, task_id="task_c", note="no luck"),
            CancelTask(**common, task_id="task_b"),
        ]
        for step in steps:
            done = await client.execute(step, scope=cwd)
            assert done.changed and done.events and done.events[-1].seq == done.seq
        view = await client.get_dag(session_id, cwd, "build")
        replayed = replay(wal_path(project, session_id, "build").read_bytes())
    assert replayed.status is ReplayStatus.CLEAN
    assert replayed.dag == view.dag and view.dag.seq == 14
    statuses = {t.id: t.status for t in view.dag.tasks.values()}
    assert statuses == {
        "task_a": TaskStatus.COMPLETED,
        "task_b": TaskStatus.CANCELLED,
        "task_c": TaskStatus.FAILED,
    }


async def test_refused_command_writes_nothing_and_reports_the_rule(
    task_wal: RunningService, client: TaskClient, project: Path, session_id: str
) -> None:
    async with task_wal():
        await make_list(client, project, session_id, "l")
        await add(client, project, session_id, "l", "task_a")
        await add(client, project, session_id, "l", "task_b", "task_a")
        path = wal_path(project, session_id, "l")
        size = path.stat().st_size
        with pytest.raises(TaskServiceError) as info:  # task_b waits for task_a
            await client.execute(
                ClaimTask(session_id=session_id, list_name="l", agent_id=BOB, task_id="task_b"),
                scope=scope_of(project),
            )
        assert info.value.code == "task_blocked" and "task_a" in info.value.payload.message
        with pytest.raises(TaskServiceError) as missing:
            await add(client, project, session_id, "nope", "task_x")
        assert missing.value.code == "task_list_not_found"
        assert path.stat().st_size == size
        assert (await client.get_dag(session_id, scope_of(project), "l")).ready == ("task_a",)


async def test_lists_of_one_session_and_of_many_sessions_are_independent(
    task_wal: RunningService, client: TaskClient, project: Path
) -> None:
    sessions = [new_session_id() for _ in range(6)]

    async def fill(session_id: str, name: str, count: int) -> None:
        await make_list(client, project, session_id, name)
        await asyncio.gather(
            *(add(client, project, session_id, name, f"task_{name}{i}") for i in range(count))
        )

    async with task_wal():
        await asyncio.gather(
            *(fill(s, n, 3 + k) for k, s in enumerate(sessions) for n in ("alpha", "beta"))
        )
        for k, s in enumerate(sessions):
            for name in ("alpha", "beta"):
                dag = (await client.get_dag(s, scope_of(project), name)).dag
                assert sorted(dag.tasks) == sorted(f"task_{name}{i}" for i in range(3 + k))
                assert dag.seq == 4 + k and dag.session_id == s and dag.name == name
                assert replay(wal_path(project, s, name).read_bytes()).dag == dag
            lists = await client.list_dags(s, scope_of(project))
            assert [(i.name, i.task_count) for i in lists.lists] == [
                ("alpha", 3 + k),
                ("beta", 3 + k),
            ]


async def test_concurrent_changes_to_one_list_are_all_applied_once(
    task_wal: RunningService, client: TaskClient, project: Path, session_id: str
) -> None:
    async with task_wal():
        await make_list(client, project, session_id, "busy")
        ids = [f"task_{i:03d}" for i in range(60)]
        await asyncio.gather(*(add(client, project, session_id, "busy", t) for t in ids))
        view = await client.get_dag(session_id, scope_of(project), "busy")
    assert sorted(view.dag.tasks) == ids and view.dag.seq == 61
    assert replay(wal_path(project, session_id, "busy").read_bytes()).dag == view.dag


async def test_a_corrupt_list_is_unavailable_and_its_neighbours_are_not(
    task_wal: RunningService, client: TaskClient, project: Path, session_id: str
) -> None:
    cwd = scope_of(project)
    async with task_wal():
        for name in ("good", "bad"):
            await make_list(client, project, session_id, name)
            await add(client, project, session_id, name, "task_a")
            await add(client, project, session_id, name, "task_b")
    bad = wal_path(project, session_id, "bad")
    lines = bad.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b"do task_a", b"do task_A")  # bit rot in the middle of the file
    bad.write_bytes(b"".join(lines))
    async with task_wal():
        with pytest.raises(TaskServiceError) as info:
            await client.get_dag(session_id, cwd, "bad")
        assert info.value.code == "task_wal_corrupt"
        assert info.value.payload.details["line"] == 2
        assert "unavailable" in info.value.payload.message
        with pytest.raises(TaskServiceError) as refused:
            await add(client, project, session_id, "bad", "task_c")
        assert refused.value.code == "task_wal_corrupt"
        await add(client, project, session_id, "good", "task_c")
        assert sorted((await client.get_dag(session_id, cwd, "good")).dag.tasks) == [
            "task_a",
            "task_b",
            "task_c",
        ]
        infos = {i.file_name: i for i in (await client.list_dags(session_id, cwd)).lists}
    error = infos[bad.name].error
    assert infos[bad.name].available is False and error is not None
    assert error.code == "task_wal_corrupt"
    assert infos[list_file_name("good")].available and infos[list_file_name("good")].seq == 4
    assert bad.read_bytes() == b"".join(lines)  # a corrupt file is left for a person to repair


async def test_a_torn_tail_is_dropped_and_the_file_stays_appendable(
    task_wal: RunningService, client: TaskClient, project: Path, session_id: str
) -> None:
    async with task_wal():
        await make_list(client, project, session_id, "l")
        await add(client, project, session_id, "l", "task_a")
    path = wal_path(project, session_id, "l")
    good = path.read_bytes()
    path.write_bytes(good + b'{"seq":3,"ts":"2025-01-01T00:00:0')  # a crash mid-append
    async with task_wal():
        assert sorted((await client.get_dag(session_id, scope_of(project), "l")).dag.tasks) == [
            "task_a"
        ]
        assert path.read_bytes() == good
        await add(client, project, session_id, "l", "task_b")
    result = replay(path.read_bytes())
    assert result.status is ReplayStatus.CLEAN and result.dag is not None
    assert result.dag.seq == 3 and sorted(result.dag.tasks) == ["task_a", "task_b"]


async def test_a_retried_request_is_applied_once_even_across_a_restart(
    task_wal: RunningService, client: TaskClient, project: Path, session_id: str
) -> None:
    cwd = scope_of(project)
    note = UpdateTask(
        session_id=session_id, list_name="l", agent_id=ALICE, task_id="task_a", note="halfway"
    )
    async with task_wal():
        await make_list(client, project, session_id, "l")
        await add(client, project, session_id, "l", "task_a")
        request_id = new_id("cmd")
        first = await client.execute(note, scope=cwd, request_id=request_id)
        again = await client.execute(note, scope=cwd, request_id=request_id)
        assert first.changed and not first.duplicate
        assert again.duplicate and not again.changed and not again.events
        assert again.seq == first.seq == 3
        both = await asyncio.gather(
            *(client.execute(note, scope=cwd, request_id="cmd_twice") for _ in range(2))
        )
        assert sorted(r.duplicate for r in both) == [False, True]
    async with task_wal():
        after = await client.execute(note, scope=cwd, request_id=request_id)
        assert after.duplicate and after.seq == 4
        notes = (await client.get_dag(session_id, cwd, "l")).dag.tasks["task_a"].notes
    assert [n.text for n in notes] == ["halfway", "halfway"]  # two distinct requests, not four


@pytest.mark.parametrize(
    ("session_id", "cwd", "codes"),
    [
        ("../../etc", "tests/project", {"invalid_identifier", "invalid_session_id"}),
        ("sess_x", "tests/project", {"invalid_session_id"}),
        ("{session}", "relative/dir", {"invalid_cwd"}),
        ("{session}", "tests/project/missing", {"invalid_cwd"}),
        ("{session}", "tests/project/file.txt", {"invalid_cwd"}),
        ("{session}", "tests/project/../..", {"invalid_cwd"}),
    ],
    ids=["traversal", "session", "unknown-root", "missing", "not-a-dir", "dot-dot"],
)
async def test_bad_session_ids_and_cwds_are_refused_before_touching_files(
    task_wal: RunningService,
    client: TaskClient,
    project: Path,
    session_id: str,
    cwd: str,
    codes: set[str],
) -> None:
    (project / "file.txt").write_text("x")
    real_session = new_session_id()
    sid = session_id.format(session=real_session)
    where = TaskScope(account_id="tests", project=cwd)
    async with task_wal():
        with pytest.raises(TaskServiceError) as info:
            await client.get_dag(sid, where, "l")
        assert info.value.code in codes
        with pytest.raises(TaskServiceError):
            await client.list_dags(sid, where)
    assert sorted(p.name for p in project.iterdir()) == ["file.txt"]


async def test_model_chosen_names_stay_inside_the_session_directory(
    task_wal: RunningService, client: TaskClient, project: Path, session_id: str
) -> None:
    names = ["../../escape", "a/b\\c", "Plan: ship it 🚀", "CON", "x" * 200]
    async with task_wal():
        for name in names:
            await make_list(client, project, session_id, name)
            await add(client, project, session_id, name, "task_a")
        views = [await client.get_dag(session_id, scope_of(project), n) for n in names]
        listed = await client.list_dags(session_id, scope_of(project))
    assert [v.dag.name for v in views] == names
    assert sorted(i.name or "" for i in listed.lists) == sorted(names)
    directory = project / ".soong-agent" / "tasks" / session_id
    files = sorted(p.name for p in directory.iterdir() if p.name.endswith(".wal.jsonl"))
    assert files == sorted(list_file_name(n) for n in names)
    assert sorted(p.name for p in project.iterdir()) == [".soong-agent"]
