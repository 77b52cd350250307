"""Task WALs in the file store (the ``s3`` engine) against a real S3-compatible server (moto, one
per test session): append and replay, one owner at a time, a crash between the PUT and the reply,
durability across instances. Each test takes task-wal instances that share nothing but the bucket,
as two hosts would."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent_core.bus import BusNames
from agent_core.bus.contracts.tasks import (
    TaskChangeResult,
    TaskCommandMessage,
    TaskDagView,
    TaskQueryMessage,
    TaskReply,
    TaskScope,
)
from agent_core.config import load_settings
from agent_core.config.files import S3Settings
from agent_core.files.s3 import S3FileStore
from agent_core.ids import new_id, new_session_id
from agent_core.service import ServiceContext, run_service
from agent_core.tasks import ReplayStatus, replay
from agent_core.tasks.client import TaskClient
from agent_core.types.task_commands import AddTask, CreateList, TaskCommand
from services.task_wal import objectwal
from services.task_wal.handler import TaskWalHandler
from services.task_wal.location import Projects, list_location
from services.task_wal.objectwal import ObjectTaskStore
from services.task_wal.service import build
from tests.engines.s3 import MotoS3, s3_server

__all__ = ["s3_server"]

T0 = datetime(2025, 1, 1, tzinfo=UTC)
AGENT = "agent_owner"
SCOPE = TaskScope(account_id="acct_wal")  # the session's workspace: no folder on any host


@pytest.fixture(scope="module")
def bucket(s3_server: MotoS3) -> str:
    return s3_server.new_bucket("task-wal-objects")


class Host:
    """One task-wal instance: its own client of the store, its own memory."""

    def __init__(self, server: MotoS3, bucket: str, home: Path) -> None:
        settings = S3Settings(bucket=bucket, endpoint_url=server.endpoint)
        self.files = S3FileStore(settings, env=server.env())
        self.store = ObjectTaskStore(self.files)
        projects = Projects(home, {}, in_store=True)
        self.projects = projects
        self.handler = TaskWalHandler(self.store, projects, clock=lambda: T0)

    async def send(self, op: TaskCommand, request_id: str = "") -> TaskReply:
        message = TaskCommandMessage(
            request_id=request_id or new_id("cmd"),
            session_id=op.session_id,
            scope=SCOPE,
            list_name=op.list_name,
            operation=op,
        )
        [reply] = await self.handler.handle([message])
        return reply

    async def dag(self, session_id: str) -> TaskDagView:
        query = TaskQueryMessage(session_id=session_id, scope=SCOPE, list_name="l")
        [reply] = await self.handler.handle([query])
        assert reply.ok and isinstance(reply.data, TaskDagView), reply.error
        return reply.data


def _add(session_id: str, task_id: str) -> AddTask:
    return AddTask(
        session_id=session_id, list_name="l", agent_id=AGENT, task_id=task_id, title=task_id
    )


def _create(session_id: str) -> CreateList:
    return CreateList(session_id=session_id, list_name="l", agent_id=AGENT)


async def _log(host: Host, session_id: str) -> bytes:
    """The list's WAL records as the store holds them, in key order."""
    keys = [o.key for o in await host.files.list(f"task-wal/{session_id}/l", limit=1000)]
    records = b""
    for key in keys:
        data, _ = await host.files.get(key)
        head, _, rest = data.partition(b"\n")
        records += rest[int(head) :]
    return records


async def test_appended_changes_replay_in_a_fresh_instance(
    s3_server: MotoS3, bucket: str, tmp_path: Path
) -> None:
    sid = new_session_id()
    first = Host(s3_server, bucket, tmp_path)
    for op in (_create(sid), _add(sid, "task_a"), _add(sid, "task_b")):
        reply = await first.send(op, request_id=f"cmd_{op.type}_{getattr(op, 'task_id', '')}")
        assert reply.ok, reply.error
    served = (await first.dag(sid)).dag
    # Durability: every acknowledged change is read back by an instance that never saw it.
    second = Host(s3_server, bucket, tmp_path)
    again = await second.dag(sid)
    assert again.dag == served and sorted(again.dag.tasks) == ["task_a", "task_b"]
    result = replay(await _log(second, sid))
    assert result.status is ReplayStatus.CLEAN and result.dag == served
    # The request ids travel with the records: a retry is recognised by the other instance.
    retried = await second.send(_add(sid, "task_b"), request_id="cmd_add_task_task_b")
    assert retried.ok and isinstance(retried.data, TaskChangeResult)
    assert retried.data.duplicate and retried.data.seq == 3
    # Nothing on a host's disk: the lists are only in the store.
    assert not list(tmp_path.rglob("*.jsonl"))


async def test_a_second_owner_racing_on_a_stale_list_is_refused_then_catches_up(
    s3_server: MotoS3, bucket: str, tmp_path: Path
) -> None:
    sid = new_session_id()
    one, two = Host(s3_server, bucket, tmp_path), Host(s3_server, bucket, tmp_path)
    assert (await one.send(_create(sid))).ok
    await two.dag(sid)  # both now hold the list at seq 1
    assert (await one.send(_add(sid, "task_a"))).ok
    refused = await two.send(_add(sid, "task_b"), request_id="cmd_late")
    assert not refused.ok and refused.error is not None
    assert refused.error.code == "task_wal_owner_changed" and refused.error.retryable
    # The retry re-reads the list: it applies after the winner's record, never over it.
    retried = await two.send(_add(sid, "task_b"), request_id="cmd_late")
    assert retried.ok and isinstance(retried.data, TaskChangeResult) and retried.data.seq == 3
    result = replay(await _log(one, sid))
    assert result.status is ReplayStatus.CLEAN and result.dag is not None
    assert result.dag.seq == 3 and sorted(result.dag.tasks) == ["task_a", "task_b"]


async def test_a_crash_between_the_put_and_the_reply_leaves_a_replayable_log(
    s3_server: MotoS3, bucket: str, tmp_path: Path
) -> None:
    sid = new_session_id()
    host = Host(s3_server, bucket, tmp_path)
    assert (await host.send(_create(sid))).ok
    # The group reaches the store, then the instance dies before it answers or updates memory.
    loc = list_location(sid, SCOPE, "l", host.projects)
    state = await host.store.get(loc)
    lost = TaskCommandMessage(
        request_id="cmd_crash",
        session_id=sid,
        scope=SCOPE,
        list_name="l",
        operation=_add(sid, "task_a"),
    )
    staging = Host(s3_server, bucket, tmp_path)
    [staged] = await staging.handler.handle([lost])  # computes the very group the crash cut off
    assert staged.ok
    assert state.dag is not None and state.dag.seq == 1  # the dead instance's memory: stale
    # A fresh instance (the restart) replays the log and recognises the caller's retry.
    restarted = Host(s3_server, bucket, tmp_path)
    retried = await restarted.send(_add(sid, "task_a"), request_id="cmd_crash")
    assert retried.ok and isinstance(retried.data, TaskChangeResult)
    assert retried.data.duplicate and retried.data.seq == 2
    after = await restarted.send(_add(sid, "task_b"))
    assert after.ok and isinstance(after.data, TaskChangeResult) and after.data.seq == 3
    assert replay(await _log(restarted, sid)).status is ReplayStatus.CLEAN


async def test_the_service_keeps_lists_in_the_store_with_the_s3_engine(
    s3_server: MotoS3,
    bucket: str,
    redis_url: str,
    names: BusNames,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        f'[files]\nengine = "s3"\n[files.s3]\nbucket = "{bucket}"\n'
        f'endpoint_url = "{s3_server.endpoint}"\n'
    )
    env = {"SOONG_AGENT_HOME": str(home), "SOONG_REDIS_URL": redis_url}
    settings = load_settings(env={**env, "SOONG_NAMESPACE": names.namespace})
    stop = asyncio.Event()
    service = asyncio.create_task(
        run_service(build, settings, "task_wal", "0", stop=stop, configure_logging=False)
    )
    ctx = ServiceContext(settings, "tester", "0")
    await ctx.rpc.start()
    try:
        client = TaskClient(ctx.rpc, ctx.names, timeout_s=10)
        sid = new_session_id()
        await client.execute(_create(sid), scope=SCOPE)
        done = await client.execute(_add(sid, "task_a"), scope=SCOPE)
        assert done.seq == 2
        lists = await client.list_dags(sid, SCOPE)
        assert [i.name for i in lists.lists] == ["l"]
    finally:
        await ctx.rpc.stop()
        await ctx.bus.aclose()
        stop.set()
        async with asyncio.timeout(30):
            assert await service == 0
    # The records are objects of the bucket, none is a file under the home.
    host = Host(s3_server, bucket, tmp_path)
    assert replay(await _log(host, sid)).dag == (await host.dag(sid)).dag
    assert not list(home.rglob("*.wal.jsonl"))


async def test_a_snapshot_bounds_replay_to_the_groups_after_it(
    s3_server: MotoS3, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(objectwal, "COMPACT_AFTER", 3)
    sid = new_session_id()
    host = Host(s3_server, bucket, tmp_path)
    ops = [_create(sid), *(_add(sid, f"task_{c}") for c in "abcd")]
    for n, op in enumerate(ops):
        assert (await host.send(op, request_id=f"cmd_{n}")).ok
    served = (await host.dag(sid)).dag
    keys = [o.key.rsplit("/", 1)[-1] for o in await host.files.list(f"task-wal/{sid}/l", limit=99)]
    assert "000000000003.snap" in keys
    # The groups the snapshot covers are no longer needed: without them the list still replays.
    covered = [f"task-wal/{sid}/l/{n:012d}.wal" for n in (1, 2, 3)]
    await host.files.delete(covered)
    fresh = Host(s3_server, bucket, tmp_path)
    assert (await fresh.dag(sid)).dag == served
    retried = await fresh.send(ops[1], request_id="cmd_1")  # its request line is in the snapshot
    assert retried.ok and isinstance(retried.data, TaskChangeResult) and retried.data.duplicate
