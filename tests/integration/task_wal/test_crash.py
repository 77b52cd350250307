"""SIGKILL task-wal (a real process) again and again during a stream of changes: after the last
restart every acknowledged change is there exactly once and every WAL replays cleanly."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from pathlib import Path

from agent_core.bus import BusNames
from agent_core.bus.contracts.tasks import TaskScope
from agent_core.errors import BusTimeoutError
from agent_core.ids import new_id, new_session_id
from agent_core.service import ServiceContext, ping_service
from agent_core.tasks import ReplayStatus, TaskStatus, list_file_name, replay
from agent_core.tasks.client import TaskClient, TaskServiceError
from agent_core.types.task_commands import (
    AddTask,
    ClaimTask,
    CompleteTask,
    CreateList,
    TaskCommand,
    UpdateTask,
)
from tests.conftest import REPO
from tests.integration.task_wal.conftest import scope_of, task_settings
from tests.procs import ServiceProcess, spawn_service

KILLS = 20
WORKERS = 8
AGENT = "agent_crashy"


def _spawn(redis_url: str, names: BusNames, home: Path, log: Path) -> ServiceProcess:
    env = {
        **os.environ,
        "SOONG_REDIS_URL": redis_url,
        "SOONG_NAMESPACE": names.namespace,
        "SOONG_AGENT_HOME": str(home),
    }
    return spawn_service("task_wal", "0", env=env, cwd=REPO, log=log)


async def _until_acked(client: TaskClient, command: TaskCommand, cwd: TaskScope) -> None:
    """Send ``command`` until acknowledged, always under the same request id."""
    request_id = new_id("cmd")
    deadline = time.monotonic() + 60
    while True:
        try:
            await client.execute(command, scope=cwd, request_id=request_id)
            return
        except BusTimeoutError:
            pass
        except TaskServiceError as exc:
            if not exc.retryable:
                raise
        assert time.monotonic() < deadline, "a change was never acknowledged"


async def test_sigkill_during_a_stream_of_changes_loses_and_doubles_nothing(
    redis_url: str, names: BusNames, tmp_path: Path
) -> None:
    home, project, log = tmp_path / "home", tmp_path / "project", tmp_path / "task_wal.log"
    project.mkdir()
    cwd = scope_of(project)
    lists = [(new_session_id(), name) for _ in range(2) for name in ("north", "south")]
    ctx = ServiceContext(task_settings(redis_url, names, home), "tester", "0")
    await ctx.rpc.start()
    client = TaskClient(ctx.rpc, ctx.names, timeout_s=2, attempts=1)
    acked: dict[tuple[str, str], list[str]] = {key: [] for key in lists}  # completed task ids
    progress = {"acks": 0}
    stop = asyncio.Event()

    async def worker(n: int) -> None:
        session_id, name = lists[n % len(lists)]
        common = {"session_id": session_id, "list_name": name, "agent_id": AGENT}
        while not stop.is_set():
            task_id = new_id("task")
            steps: list[TaskCommand] = [
                AddTask(**common, task_id=task_id, title=f"step of worker {n}"),
                ClaimTask(**common, task_id=task_id),
                UpdateTask(**common, task_id=task_id, note="progress"),
                CompleteTask(**common, task_id=task_id, note="done"),
            ]
            for step in steps:
                await _until_acked(client, step, cwd)
                progress["acks"] += 1
            acked[(session_id, name)].append(task_id)

    proc = _spawn(redis_url, names, home, log)
    try:
        await ping_service(ctx, "task_wal", timeout_s=30)
        for session_id, name in lists:
            await _until_acked(
                client, CreateList(session_id=session_id, list_name=name, agent_id=AGENT), cwd
            )
        workers = [asyncio.create_task(worker(n)) for n in range(WORKERS)]
        rng = random.Random(8)
        for _ in range(KILLS):
            seen = progress["acks"]
            deadline = time.monotonic() + 30
            while progress["acks"] < seen + 3:  # the new process is up and acknowledging
                assert time.monotonic() < deadline, log.read_text()
                await asyncio.sleep(0.01)
            await asyncio.sleep(rng.uniform(0, 0.2))
            proc.send_signal(signal.SIGKILL)
            await asyncio.to_thread(proc.wait)
            proc = _spawn(redis_url, names, home, log)
        stop.set()
        await asyncio.gather(*workers)
        views = {key: await client.get_dag(key[0], cwd, key[1]) for key in lists}
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        await ctx.rpc.stop()
        await ctx.bus.aclose()

    assert sum(len(v) for v in acked.values()) >= KILLS
    for (session_id, name), done in acked.items():
        dag = views[(session_id, name)].dag
        path = project / ".soong-agent" / "tasks" / session_id / list_file_name(name)
        result = replay(path.read_bytes())
        assert result.status is ReplayStatus.CLEAN and result.dag == dag
        # Every task a worker saw acknowledged end to end is complete, with each note once;
        # a task whose add was acknowledged but whose worker stopped is the only other kind.
        assert set(done) <= set(dag.tasks)
        for task_id in done:
            task = dag.tasks[task_id]
            assert task.status is TaskStatus.COMPLETED
            assert [note.text for note in task.notes] == ["progress", "done"]
        assert dag.seq == 1 + 4 * len(dag.tasks)
