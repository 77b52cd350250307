"""PostgreSQL's primary lost, and a writer's connection lost: the writer holds its commands and
reconnects by itself, to the promoted standby when the DSN names both servers
(``target_session_attrs=read-write``); with a synchronous standby nothing acknowledged is lost;
and a writer whose partition another writer took over while its connection was down stops
instead of refusing every batch."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import traceback
from pathlib import Path

import psycopg
import pytest

from agent_core.bus import BusNames
from agent_core.bus.contracts.storage import CommandReceipt, StorageCommand
from agent_core.config import Settings
from agent_core.errors import BusTimeoutError
from agent_core.service import ServiceContext, ServiceParts, run_service
from agent_core.storage_client import StorageClient
from services.storage_writer.service import StorageWriterService, assemble
from tests.engines.postgres import PostgresPair, postgres_cluster, postgres_dsn, postgres_pair
from tests.integration.storage_writer.helpers import storage_client, writer_settings
from tests.unit.storage_writer.factories import append_node, create_session
from tests.waiting import HangGuard

__all__ = ["postgres_cluster", "postgres_dsn", "postgres_pair"]

ACKED_BEFORE = 20


def _on_postgres(settings: Settings, *, standby: bool = False) -> Settings:
    storage = settings.storage.model_copy(update={"backend": "postgres", "standby": standby})
    return settings.model_copy(update={"storage": storage})


async def _send_until_receipt(client: StorageClient, cmd: StorageCommand) -> CommandReceipt:
    while True:
        try:
            return await client.send(cmd)
        except BusTimeoutError:
            continue


def _thread_stacks() -> str:
    """Where every other thread is (the writer's write and read threads among them): a hang
    seen once in CI left no trace of where the writer waited."""
    names = {t.ident: t.name for t in threading.enumerate()}
    me = threading.get_ident()
    return "\n".join(
        f"--- thread {names.get(ident, ident)}\n" + "".join(traceback.format_stack(frame)[-12:])
        for ident, frame in sys._current_frames().items()
        if ident != me
    )


async def _until(what: str, done: object, limit_s: float = 60) -> None:
    guard = HangGuard(limit_s, what)
    while not done():  # type: ignore[operator]
        guard.check(_thread_stacks)
        await asyncio.sleep(0.02)


def _stored(dsn: str, session_id: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT node_id, node_seq FROM nodes WHERE session_id = %s", (session_id,)
        ).fetchall()
    return {str(node_id): int(seq) for node_id, seq in rows}


def _start(
    settings: Settings,
) -> tuple[asyncio.Task[int], asyncio.Event, list[StorageWriterService]]:
    """A writer service in this event loop: its task (the exit code), its stop, and (once
    built: a standby only once it owns) its assembled service."""
    box: list[StorageWriterService] = []

    async def factory(ctx: ServiceContext) -> ServiceParts:
        svc = await assemble(ctx)
        box.append(svc)
        return svc.parts

    stop = asyncio.Event()
    task = asyncio.create_task(
        # The test's logging stays as pytest set it: caplog reads the writer's lines.
        run_service(factory, settings, "storage_writer", "0", stop=stop, configure_logging=False)
    )
    return task, stop, box


async def test_a_promoted_synchronous_standby_serves_with_every_acknowledged_write(
    tmp_path: Path,
    redis_url: str,
    names: BusNames,
    postgres_pair: PostgresPair,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="soong.storage_writer")
    monkeypatch.setenv("SOONG_POSTGRES_DSN", postgres_pair.dsn())  # both servers
    settings = _on_postgres(writer_settings(tmp_path, redis_url, names))
    s = create_session()
    acknowledged: list[tuple[str, CommandReceipt]] = []
    writer, stop, box = _start(settings)
    async with (
        storage_client(redis_url, names) as client,
        storage_client(redis_url, names, timeout_s=120, attempts=1, tag="held") as once,
    ):
        await _until("the writer to start", lambda: box or writer.done())
        assert box[0].backend.name == "postgres"
        assert (await client.send(s)).ok
        for _ in range(ACKED_BEFORE):  # each acknowledged only once the standby has it
            cmd = append_node(s)
            receipt = await client.send(cmd)
            assert receipt.ok, receipt.error
            acknowledged.append((cmd.node.node_id, receipt))

        postgres_pair.primary.kill()  # SIGKILL of the postmaster
        held = append_node(s)
        sent_once = asyncio.create_task(once.send(held))  # one send: never sent again
        await _until(
            "the writer to hold the command that met the lost primary",
            lambda: "reconnecting, commands held: 1" in caplog.text or sent_once.done(),
        )
        # Held, not refused (nor applied: the primary and its processes are gone).
        assert not sent_once.done(), sent_once.result()

        postgres_pair.standby.promote()
        async with asyncio.timeout(60):
            receipt = await sent_once
        assert receipt.ok, receipt.error  # acknowledged after the promotion
        acknowledged.append((held.node.node_id, receipt))
        after = append_node(s)
        receipt = await _send_until_receipt(client, after)
        assert receipt.ok, receipt.error
        acknowledged.append((after.node.node_id, receipt))
    stop.set()
    async with asyncio.timeout(30):
        assert await writer == 0

    standby = postgres_pair.standby
    assert f"reconnected to PostgreSQL at {standby.host}:{standby.port}" in caplog.text
    stored = _stored(standby.dsn(postgres_pair.dbname), s.session_id)
    # Every acknowledged write is on the promoted standby, once, with its receipt's number.
    assert len(acknowledged) == ACKED_BEFORE + 2
    for node_id, receipt in acknowledged:
        assert stored[node_id] == receipt.result["node_seq"]
    assert sorted(stored.values()) == list(range(1, len(stored) + 1))


def _backend_pid(dsn: str) -> int:
    """The server process of the connection that holds partition 0's advisory lock."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchone()
    assert row is not None
    return int(str(row[0]))


async def test_a_writer_whose_partition_was_taken_over_while_cut_off_stops(
    tmp_path: Path,
    redis_url: str,
    names: BusNames,
    postgres_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="soong.storage_writer")
    monkeypatch.setenv("SOONG_POSTGRES_DSN", postgres_dsn)
    owner, owner_stop, owner_box = _start(
        _on_postgres(writer_settings(tmp_path / "a", redis_url, names))
    )
    standby: asyncio.Task[int] | None = None
    standby_stop = asyncio.Event()
    s = create_session()
    acknowledged: list[tuple[str, CommandReceipt]] = []
    try:
        await _until("the owner to start", lambda: owner_box or owner.done())
        async with storage_client(redis_url, names, timeout_s=1.0, attempts=1) as client:
            assert (await _send_until_receipt(client, s)).ok
            old = _backend_pid(postgres_dsn)
            standby, standby_stop, standby_box = _start(
                _on_postgres(writer_settings(tmp_path / "b", redis_url, names), standby=True)
            )
            await _until(
                "the standby to wait for the partition",
                lambda: "partition 0 is owned" in caplog.text,
            )
            # The owner's write connection is cut (its server process ended) while it is idle:
            # the standby, polling the lock, owns the partition before the owner notices.
            with psycopg.connect(postgres_dsn, autocommit=True) as conn:
                conn.execute("SELECT pg_terminate_backend(%s)", (old,))
            await _until("the standby to take over", lambda: standby_box or standby.done())
            assert not standby.done()

            async def write() -> None:
                cmd = append_node(s)
                receipt = await _send_until_receipt(client, cmd)
                assert receipt.ok, receipt.error
                acknowledged.append((cmd.node.node_id, receipt))

            guard = HangGuard(60, "the superseded owner to stop")
            while not owner.done():  # the owner meets the cut on a batch it reads
                await write()
                guard.check()
            assert await owner == 0  # stopped by itself, as after a signal (a clean stop)
            for _ in range(5):  # the new owner serves
                await write()
    finally:
        owner_stop.set()
        standby_stop.set()
        for task in (owner, standby):
            if task is not None:
                async with asyncio.timeout(30):
                    await task
    assert "another writer" in caplog.text and "took its partition over" in caplog.text
    assert "storage-writer stopping: superseded [writer_superseded]" in caplog.text
    stored = _stored(postgres_dsn, s.session_id)
    assert len(stored) == len(acknowledged)  # every acknowledged write, once
    for node_id, receipt in acknowledged:
        assert stored[node_id] == receipt.result["node_seq"]
