"""The writer through the real bus, on each backend (real SQLite files, a private PostgreSQL):
seqs, idempotency, fencing, faults, queries beside a held batch, hostile ids; and SQLite's own
checkpoints and search outbox. What is counted is asked through the bus, so the same assertion
holds on both."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from redis.asyncio import Redis

from agent_core.bus import BusNames
from agent_core.bus.broker import make_broker  # publishes as another FastStream app would
from agent_core.bus.contracts.storage import (
    ClaimRun,
    CommandReceipt,
    GetSession,
    GetTree,
    ListEvents,
    ListSessions,
    RunFence,
    SearchSessions,
)
from agent_core.config import Settings
from agent_core.ids import new_id
from agent_core.storage_client import StorageClient
from agent_core.types.protocol import TextBlock
from services.storage_writer.checkpoint import CheckpointPolicy
from services.storage_writer.schema import nodes_table
from services.storage_writer.writer import Writer
from tests.engines.postgres import postgres_cluster, postgres_dsn
from tests.integration.storage_writer.helpers import (
    in_process_writer,
    layout_of,
    storage_client,
    writer_settings,
)
from tests.unit.storage_writer.factories import append_node, create_run, create_session

__all__ = ["postgres_cluster", "postgres_dsn"]


@pytest.fixture(params=["sqlite", "postgres"])
def settings(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    redis_url: str,
    names: BusNames,
    monkeypatch: pytest.MonkeyPatch,
) -> Settings:
    """A writer's settings on the backend under test (PostgreSQL: the module's database)."""
    base = writer_settings(tmp_path, redis_url, names)
    if request.param == "sqlite":
        return base
    monkeypatch.setenv("SOONG_POSTGRES_DSN", request.getfixturevalue("postgres_dsn"))
    storage = base.storage.model_copy(update={"backend": "postgres"})
    return base.model_copy(update={"storage": storage})


async def _nodes(client: StorageClient, session_id: str) -> int:
    return len(await client.read(GetTree(session_id=session_id)) or [])


async def _events(client: StorageClient, session_id: str, node_id: str | None = None) -> int:
    reply = await client.query(ListEvents(session_id=session_id, limit=5000))
    return sum(1 for e in reply.data if node_id is None or e["node_id"] == node_id)


def _count(home: Path, session_id: str, table: str, where: str = "1", *args: object) -> int:
    layout = layout_of(home)
    conn = sqlite3.connect(layout.path(layout.shard_of(session_id)))
    try:
        return int(conn.execute(f"SELECT count(*) FROM {table} WHERE {where}", args).fetchone()[0])
    finally:
        conn.close()


async def test_seqs_are_gap_free_and_ordered_under_8_producers(
    settings: Settings, redis_url: str, names: BusNames
) -> None:
    s = create_session()
    async with in_process_writer(settings), storage_client(redis_url, names) as client:
        assert (await client.send(s)).ok

        async def producer() -> list[CommandReceipt]:
            return [await client.send(append_node(s)) for _ in range(40)]

        results = await asyncio.gather(*(producer() for _ in range(8)))
        events = await client.query(ListEvents(session_id=s.session_id, limit=5000))
    for receipts in results:  # each producer's own writes are ordered
        seqs = [r.result["node_seq"] for r in receipts]
        assert seqs == sorted(seqs)
    all_receipts = [r for rs in results for r in rs]
    assert sorted(r.result["node_seq"] for r in all_receipts) == list(range(1, 321))
    assert sorted(r.result["seq"] for r in all_receipts) == list(range(2, 322))
    assert [e["seq"] for e in events.data] == list(range(1, 322))


async def test_same_command_delivered_three_times_is_one_row(
    settings: Settings, redis_url: str, names: BusNames
) -> None:
    s = create_session()
    cmd = append_node(s)
    async with in_process_writer(settings), storage_client(redis_url, names) as client:
        await client.send(s)
        receipts = [await client.send(cmd) for _ in range(3)]
        # And three raw deliveries of the same entry content, without a reply channel.
        broker = make_broker(redis_url)
        await broker.connect()
        for _ in range(3):
            await broker.publish(cmd, stream=names.storage_commands(s.session_id))
        await broker.stop()
        last = await client.send(cmd)
        nodes, events = await _nodes(client, s.session_id), await _events(client, s.session_id)
        of_node = await _events(client, s.session_id, cmd.node.node_id)
    assert [r.duplicate for r in receipts] == [False, True, True] and last.duplicate
    assert receipts[0].result == receipts[1].result == receipts[2].result == last.result
    assert (nodes, events, of_node) == (1, 2, 1)  # session_created and node_created


async def test_stale_attempt_is_refused_through_the_bus(
    settings: Settings, redis_url: str, names: BusNames
) -> None:
    s = create_session()
    run = create_run(s)

    def claim(n: int) -> ClaimRun:
        return ClaimRun(
            command_id=new_id("cmd"),
            session_id=s.session_id,
            fence=RunFence(run_id=run.run_id, attempt=n),
        )

    async with in_process_writer(settings), storage_client(redis_url, names) as client:
        for command in (s, run, claim(1), claim(2)):
            assert (await client.send(command)).ok
        stale = append_node(s, run_id=run.run_id, fence=RunFence(run_id=run.run_id, attempt=1))
        receipt = await client.send(stale)
        nodes = await _nodes(client, s.session_id)
    assert not receipt.ok and receipt.error is not None
    assert receipt.error.code == "stale_attempt" and receipt.error.type == "storage_error"
    assert nodes == 0


async def test_fault_between_node_and_event_leaves_neither_then_recovers(
    settings: Settings, redis_url: str, names: BusNames
) -> None:
    s = create_session()
    cmd = append_node(s)
    armed = True

    def fault(point: str) -> None:
        if armed and point == "between_node_and_event":
            raise RuntimeError("injected fault")

    async with (
        in_process_writer(settings) as svc,
        storage_client(redis_url, names, timeout_s=1.0, attempts=20) as client,
    ):
        await client.send(s)
        svc.writer.fault = fault
        sending = asyncio.create_task(client.send(cmd))
        await asyncio.sleep(1.5)  # several failed deliveries (re-claimed after min_idle)
        assert not sending.done()
        assert await _nodes(client, s.session_id) == 0
        assert await _events(client, s.session_id) == 1  # session_created
        armed = False
        async with asyncio.timeout(30):
            receipt = await sending
        nodes, events = await _nodes(client, s.session_id), await _events(client, s.session_id)
    assert receipt.ok and receipt.result["node_seq"] == 1 and receipt.result["seq"] == 2
    assert (nodes, events) == (1, 2)


async def test_queries_do_not_wait_behind_a_write_batch(
    settings: Settings, redis_url: str, names: BusNames
) -> None:
    s = create_session(account="acct_q")
    gate = threading.Event()  # the batch holds its transaction until the test opens it
    entered = threading.Event()
    held_too_long: list[bool] = []

    def fault(point: str) -> None:
        if point == "before_commit" and not gate.is_set():
            entered.set()
            held_too_long.append(not gate.wait(60))  # a hang guard: opened long before

    async with in_process_writer(settings) as svc, storage_client(redis_url, names) as client:
        await client.send(s)
        svc.writer.fault = fault
        writing = asyncio.create_task(client.send(append_node(s)))
        assert await asyncio.to_thread(entered.wait, 60), "the write never reached its commit"
        reply = await client.query(GetSession(session_id=s.session_id, account_id="acct_q"))
        # Answered while the gate was still shut: the batch still held its transaction.
        assert not writing.done() and not held_too_long
        gate.set()
        assert (await writing).ok
        assert held_too_long == [False]
        other = await client.query(GetSession(session_id=s.session_id, account_id="acct_other"))
        listed = await client.query(ListSessions(account_id="acct_q"))
    assert reply.ok and reply.data["session_id"] == s.session_id
    assert other.ok and other.data is None
    assert [row["session_id"] for row in listed.data] == [s.session_id]


async def test_hostile_session_id_is_refused_through_the_bus(
    settings: Settings, redis_url: str, names: BusNames, redis: Redis
) -> None:
    hostile = create_session().model_copy(update={"session_id": 'x"; DROP TABLE sessions; --'})
    async with in_process_writer(settings), storage_client(redis_url, names) as client:
        receipt = await client.send(hostile)
        ok = await client.send(create_session())
    assert not receipt.ok and receipt.error is not None
    assert receipt.error.code in ("invalid_identifier", "invalid_session_id")
    assert ok.ok


async def test_stopping_while_checkpoints_run_is_clean(
    tmp_path: Path, redis_url: str, names: BusNames, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Back-to-back, slow checkpoint rounds, so that stopping lands in the middle of one.
    monkeypatch.setattr("services.storage_writer.checkpoint.INTERVAL_S", 0.0005)
    monkeypatch.setattr(
        "services.storage_writer.checkpoint.CheckpointPolicy",
        lambda: CheckpointPolicy(commands_due=1, max_age_s=0),  # every round checkpoints
    )
    take_dirty = Writer.take_dirty

    def slow_take_dirty(self: Writer) -> dict[int, int]:
        time.sleep(0.02)
        return take_dirty(self)

    monkeypatch.setattr(Writer, "take_dirty", slow_take_dirty)
    settings = writer_settings(tmp_path, redis_url, names)
    s = create_session()
    for round_ in range(10):
        # in_process_writer asserts that the service exits with 0 when stopped.
        async with in_process_writer(settings), storage_client(redis_url, names) as client:
            if round_ == 0:
                assert (await client.send(s)).ok
            assert all(
                r.ok for r in await asyncio.gather(*(client.send(append_node(s)) for _ in range(5)))
            )
    assert _count(tmp_path, s.session_id, nodes_table(s.session_id)) == 50


async def test_a_search_finds_an_acknowledged_message_while_its_row_is_pending(
    tmp_path: Path, redis_url: str, names: BusNames, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No timed flush during the test: only the search can make the message searchable.
    monkeypatch.setattr("services.storage_writer.index_flush.FLUSH_DELAY_S", 3600.0)
    settings = writer_settings(tmp_path, redis_url, names)
    s = create_session(account="acct_s")
    search = SearchSessions(account_id="acct_s", q="quokka")
    async with in_process_writer(settings), storage_client(redis_url, names) as client:
        assert (await client.send(s)).ok
        message = append_node(s, content=[TextBlock(text="a quokka sighting")])
        assert (await client.send(message)).ok
        # Acknowledged: stored with its pending index row, not yet in FTS5.
        assert _count(tmp_path, s.session_id, "search_outbox") == 1
        assert _count_catalog(tmp_path, "search_rows") == 0
        found = search.reply_of(await client.query(search))
        assert _count_catalog(tmp_path, "search_rows") == 1
    assert [m.session.session_id for m in found] == [s.session_id]
    assert _count(tmp_path, s.session_id, "search_outbox") == 0  # a clean stop drops it


def _count_catalog(home: Path, table: str) -> int:
    conn = sqlite3.connect(layout_of(home).db_path)
    try:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    finally:
        conn.close()
