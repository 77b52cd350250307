"""Two storage-writer processes sharing ``[storage] partitions = 4`` of one PostgreSQL database:
both own partitions, sessions of every partition are served, and when one is SIGKILLed under a
stream of commands the other takes its partitions over; every acknowledged write is there once."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import psycopg
import pytest

from agent_core.bus import BusNames
from agent_core.bus.contracts.storage import CommandReceipt, CreateSession, GetTree, ListEvents
from agent_core.errors import BusTimeoutError
from agent_core.storage_client import StorageClient
from services.storage_writer.backends.postgres import OWNER_LOCK_CLASS
from tests.engines.postgres import PostgresCluster, postgres_cluster, postgres_dsn
from tests.integration.storage_writer.helpers import (
    partition_owners,
    spawn_writer,
    storage_client,
)
from tests.procs import ServiceProcess
from tests.unit.storage_writer.factories import append_node, create_session
from tests.waiting import HangGuard

__all__ = ["postgres_cluster", "postgres_dsn"]

P = 4


async def _send(client: StorageClient, cmd: object) -> CommandReceipt:
    """Send until a receipt comes (a partition between owners answers late, never wrongly)."""
    while True:
        try:
            return await client.send(cmd)  # type: ignore[arg-type]
        except BusTimeoutError:
            continue


def _stop(proc: ServiceProcess) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except Exception:
            proc.kill()
            proc.wait()


def test_routing_is_stable_and_one_partition_keeps_its_stream() -> None:
    one, four = BusNames("t"), BusNames("t", 4)
    assert one.storage_commands("sess_x") == one.storage_commands() == "t:storage:commands"
    streams = {four.storage_commands(f"sess_{i}") for i in range(64)}
    assert streams == {"t:storage:commands"} | {f"t:storage:commands:{p}" for p in (1, 2, 3)}
    assert four.storage_partition("sess_abc") == BusNames("t", 4).storage_partition("sess_abc")
    assert four.storage_commands(None) == "t:storage:commands"  # an account's commands


async def test_two_writers_share_four_partitions_and_one_takes_over_a_killed_one(
    tmp_path: Path,
    redis_url: str,
    names: BusNames,
    postgres_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SOONG_STORAGE_BACKEND", "postgres")
    monkeypatch.setenv("SOONG_POSTGRES_DSN", postgres_dsn)
    monkeypatch.setenv("SOONG_STORAGE_PARTITIONS", str(P))
    routed = BusNames(names.namespace, P)
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    writers = [
        spawn_writer(tmp_path / "a", redis_url, routed, logs[0], instance="a"),
        spawn_writer(tmp_path / "b", redis_url, routed, logs[1], instance="b"),
    ]
    sessions: dict[int, CreateSession] = {}
    while len(sessions) < P:  # one session in each partition
        s = create_session()
        sessions.setdefault(routed.storage_partition(s.session_id), s)
    acknowledged: list[tuple[CreateSession, str, CommandReceipt]] = []
    try:
        async with storage_client(redis_url, routed, timeout_s=1.0, attempts=1) as client:
            guard = HangGuard(60, "both writers to own two partitions each")
            while True:
                owners = partition_owners(postgres_dsn)
                counts = sorted(list(owners.values()).count(o) for o in set(owners.values()))
                if len(owners) == P and counts == [2, 2]:
                    break
                for w, log in zip(writers, logs, strict=True):
                    assert w.poll() is None, log.read_text() if log.exists() else ""
                guard.check()
                await asyncio.sleep(0.05)
            for s in sessions.values():
                assert (await _send(client, s)).ok
            stop = asyncio.Event()

            async def producer(s: CreateSession) -> None:
                while not stop.is_set():
                    cmd = append_node(s)
                    receipt = await _send(client, cmd)
                    assert receipt.ok, receipt.error
                    acknowledged.append((s, cmd.node.node_id, receipt))

            tasks = [asyncio.create_task(producer(s)) for s in sessions.values()]
            guard = HangGuard(60, "writes to every partition before the kill")
            while {s.session_id for s, _, _ in acknowledged} != {
                s.session_id for s in sessions.values()
            } or len(acknowledged) < 40:
                guard.check()
                await asyncio.sleep(0.02)
            victim = writers[0]
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            before = {s.session_id: 0 for s in sessions.values()}
            for s, _, _ in acknowledged:
                before[s.session_id] += 1
            guard = HangGuard(60, "the survivor to take every partition over")
            while True:  # every session, whichever its partition, is written again
                after = {s.session_id: 0 for s in sessions.values()}
                for s, _, _ in acknowledged:
                    after[s.session_id] += 1
                if all(after[k] >= before[k] + 5 for k in after):
                    break
                assert writers[1].poll() is None, logs[1].read_text()
                guard.check()
                await asyncio.sleep(0.02)
            stop.set()
            async with asyncio.timeout(60):
                await asyncio.gather(*tasks)
            survivor = set(partition_owners(postgres_dsn).values())
            trees = {
                s.session_id: await client.read(GetTree(session_id=s.session_id))
                for s in sessions.values()
            }
            events = {
                s.session_id: await client.query(ListEvents(session_id=s.session_id, limit=5000))
                for s in sessions.values()
            }
    finally:
        for w in writers:
            _stop(w)
    assert len(survivor) == 1  # all four partitions: one owner, the writer left alive
    assert "owned by this writer" in logs[1].read_text()
    for s in sessions.values():
        mine = [(node_id, r) for t, node_id, r in acknowledged if t is s]
        tree = trees[s.session_id] or []
        seqs = [n.node_seq for n in tree]
        node_ids = [n.node_id for n in tree]
        # Every acknowledged node is stored once, with the sequence number its receipt gave.
        assert len(node_ids) == len(set(node_ids))
        assert seqs == list(range(1, len(seqs) + 1))
        by_id = {n.node_id: n.node_seq for n in tree}
        for node_id, receipt in mine:
            assert by_id[node_id] == receipt.result["node_seq"]
        got = [e["event_id"] for e in events[s.session_id].data]
        assert len(got) == len(set(got))  # no event twice
        assert [e["seq"] for e in events[s.session_id].data] == list(range(1, len(got) + 1))


async def test_what_a_superseded_owner_read_goes_to_the_new_owner_without_waiting_idle(
    tmp_path: Path,
    redis_url: str,
    names: BusNames,
    postgres_cluster: PostgresCluster,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A writer whose partition was taken over while it did not know (its connection ended,
    then another writer took the lock) reads commands of that partition once more; it finds
    itself superseded and drops the partition. What it read goes to the new owner at its next
    sweep: with ``min_idle_ms`` at ten minutes, a command that waited for it would hang (it did
    before the hand-back)."""
    dsn = postgres_cluster.create_database("soong_superseded_" + names.namespace[-8:].lower())
    monkeypatch.setenv("SOONG_STORAGE_BACKEND", "postgres")
    monkeypatch.setenv("SOONG_POSTGRES_DSN", dsn)
    monkeypatch.setenv("SOONG_STORAGE_PARTITIONS", "3")
    routed = BusNames(names.namespace, 3)
    logs = {name: tmp_path / f"{name}.log" for name in ("a", "b")}
    writers: dict[str, ServiceProcess] = {}
    for name in logs:
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.toml").write_text(
            "[bus]\nmin_idle_ms = 600000\nclaim_interval_s = 0.2\n"
        )
        writers[name] = spawn_writer(tmp_path / name, redis_url, routed, logs[name], instance=name)
    by_pid = {w.pid: name for name, w in writers.items()}
    try:
        guard = HangGuard(60, "the writers to own two partitions and one")
        while sorted((counts := _shares(dsn, by_pid)).values()) != [1, 2]:
            for name, w in writers.items():
                assert w.poll() is None, logs[name].read_text()
            guard.check()
            await asyncio.sleep(0.05)
        x = next(name for name, n in counts.items() if n == 2)  # to be superseded
        y = next(name for name in writers if name != x)
        p = next(p for p, owner in partition_owners(dsn).items() if _pid(owner) == writers[x].pid)
        session = create_session()
        while routed.storage_partition(session.session_id) != p:
            session = create_session()
        async with storage_client(redis_url, routed, timeout_s=60.0, attempts=1) as client:
            assert (await client.send(session)).ok
            with psycopg.connect(dsn, autocommit=True) as conn:  # x's write connection ends
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
                    "AND granted AND objsubid = 2 AND objid = %s AND classid = %s::oid",
                    (p, OWNER_LOCK_CLASS),
                )
            guard = HangGuard(60, f"writer {y} to take partition {p} over")
            while _pid(partition_owners(dsn).get(p, ":0")) != writers[y].pid:
                guard.check()
                await asyncio.sleep(0.02)
            writers[y].send_signal(signal.SIGSTOP)  # x alone reads the partition's stream now
            try:
                commands = [append_node(session) for _ in range(3)]
                sent = [asyncio.create_task(client.send(cmd)) for cmd in commands]
                guard = HangGuard(60, f"writer {x} to give partition {p} up")
                while "writer_superseded" not in logs[x].read_text():
                    guard.check(logs[x].read_text)
                    await asyncio.sleep(0.05)
            finally:
                writers[y].send_signal(signal.SIGCONT)
            async with asyncio.timeout(60):  # a hang bound: ten minutes without the hand-back
                receipts = await asyncio.gather(*sent)
            tree = await client.read(GetTree(session_id=session.session_id))
    finally:
        for w in writers.values():
            _stop(w)
    assert "writer_superseded" in logs[x].read_text()
    assert [r.ok for r in receipts] == [True] * 3, [r.error for r in receipts]
    node_ids = [n.node_id for n in tree or []]
    assert sorted(node_ids) == sorted(cmd.node.node_id for cmd in commands)


def _pid(owner: str) -> int:
    """The process id in a partition owner's name (``host:pid``)."""
    return int(owner.rsplit(":", 1)[1])


def _shares(dsn: str, by_pid: dict[int, str]) -> dict[str, int]:
    """How many partitions each of the writers (named by pid) owns now."""
    counts = dict.fromkeys(by_pid.values(), 0)
    for owner in partition_owners(dsn).values():
        if _pid(owner) in by_pid:
            counts[by_pid[_pid(owner)]] += 1
    return counts
