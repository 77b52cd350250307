"""A standby writer of PostgreSQL waits for its partition inside the server (``pg_standby``): it
takes the partition when the owner's session ends, and one given up leaves no wait behind."""

from __future__ import annotations

import asyncio

import psycopg

from services.storage_writer.backends.postgres import (
    migrate_database,
    open_connection,
    own_when_free,
    owned_connection,
    try_own,
)
from tests.engines.postgres import postgres_cluster, postgres_dsn
from tests.waiting import HangGuard

__all__ = ["postgres_cluster", "postgres_dsn"]


def _waiting(dsn: str) -> list[int]:
    """The server processes waiting for an advisory lock."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        ).fetchall()
    return [int(r[0]) for r in rows]


def _alive(dsn: str, pid: int) -> bool:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,))
        return int(row.fetchone()[0]) == 1  # type: ignore[index]


def _holder(dsn: str) -> str:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT owner FROM partition_owners WHERE partition = 0").fetchone()
    assert row is not None
    return str(row[0])


async def _until(what: str, done: object) -> None:
    guard = HangGuard(60, what)
    while not await asyncio.to_thread(done):  # type: ignore[arg-type]
        guard.check()
        await asyncio.sleep(0.02)


async def test_a_standby_takes_the_partition_when_its_owner_stops(postgres_dsn: str) -> None:
    migrate_database(postgres_dsn, 1)
    owner = owned_connection(postgres_dsn, "writer-a")
    standby = asyncio.create_task(own_when_free(postgres_dsn, "writer-b", standby=True))
    try:
        await _until("the standby's wait in the server", lambda: _waiting(postgres_dsn))
        assert not standby.done() and _holder(postgres_dsn) == "writer-a"
        owner.close()
        async with asyncio.timeout(60):
            conn, waited = await standby
        assert waited  # a takeover, as the service learns it (PostgresBackend.took_over)
        try:
            assert _holder(postgres_dsn) == "writer-b"
            third = open_connection(postgres_dsn)
            try:
                assert not try_own(third, 0, "writer-c")  # the standby's connection holds it
            finally:
                third.close()
        finally:
            conn.close()
    finally:
        standby.cancel()
        owner.close()


async def test_a_writer_owning_a_free_partition_did_not_take_over(postgres_dsn: str) -> None:
    migrate_database(postgres_dsn, 1)
    conn, waited = await own_when_free(postgres_dsn, "writer-a", standby=True)
    try:
        assert not waited and _holder(postgres_dsn) == "writer-a"
    finally:
        conn.close()


async def test_a_cancelled_standby_leaves_no_wait_and_no_connection(postgres_dsn: str) -> None:
    migrate_database(postgres_dsn, 1)
    owner = owned_connection(postgres_dsn, "writer-a")
    try:
        standby = asyncio.create_task(own_when_free(postgres_dsn, "writer-b", standby=True))
        await _until("the standby's wait in the server", lambda: _waiting(postgres_dsn))
        (pid,) = _waiting(postgres_dsn)
        standby.cancel()
        await asyncio.gather(standby, return_exceptions=True)
        assert standby.cancelled()
        await _until("the wait cancelled", lambda: not _waiting(postgres_dsn))
        await _until("its connection closed", lambda: not _alive(postgres_dsn, pid))
        assert _holder(postgres_dsn) == "writer-a"
    finally:
        owner.close()
    nxt = open_connection(postgres_dsn)
    try:
        assert try_own(nxt, 0, "writer-c")  # nobody took it over in the meantime
    finally:
        nxt.close()
