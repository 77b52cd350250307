"""The ``postgres`` backend: PostgreSQL 15 or later through psycopg 3.

Configuration: ``[storage] backend = "postgres"`` in ``config.toml`` (or
``SOONG_STORAGE_BACKEND``); the server from the environment's ``SOONG_POSTGRES_DSN``, never from
``config.toml`` (:mod:`.pg_connect`, which also names each way connecting can fail as one typed
error without the password).

Opening the backend (:func:`open_postgres`) checks the server and applies the missing migrations
(:func:`migrate_database`), then takes ownership of the sessions' partition and opens the writer
and the query engine, each on its own connection (:class:`PostgresBackend`). With ``[storage]
partitions`` > 1 the writer shares the partitions with the others instead
(:mod:`.pg_partitions`).

A writer owns a partition by a session-level advisory lock on the connection it writes on
(:func:`try_own`), so ownership lasts exactly as long as that connection and a writer never
writes on one that does not hold it. A second writer is refused with ``writer_locked``; a
standby waits inside the server until the owner stops (:func:`own_when_free`,
:mod:`.pg_standby`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from concurrent.futures import Executor
from dataclasses import dataclass
from functools import partial
from typing import Final

from agent_core.config import Settings
from agent_core.errors import StorageError
from agent_core.files import open_file_store
from agent_core.service import BackgroundTask
from services.storage_writer.backends.pg_conn import PgConn
from services.storage_writer.backends.pg_connect import check_server, connect, resolve_dsn
from services.storage_writer.backends.pg_partitions import (
    PartitionedPostgres,
    check_layout,
    join,
)
from services.storage_writer.backends.pg_schema import migrate
from services.storage_writer.backends.pg_standby import ServerWait
from services.storage_writer.backends.pg_store import PgQueryEngine, PgWriter

__all__ = [
    "OWNER_LOCK_CLASS",
    "PostgresBackend",
    "migrate_database",
    "open_connection",
    "open_postgres",
    "own_when_free",
    "owned_connection",
    "try_own",
]

log = logging.getLogger("soong.storage_writer")


def migrate_database(dsn: str, partitions: int) -> list[int]:
    """Check the server and apply the missing migrations (``soong-agent migrate``, start-up)."""
    check_server(dsn)
    with connect(dsn, autocommit=True) as conn:
        return migrate(conn, partitions)


# pg_try_advisory_lock(OWNER_LOCK_CLASS, partition): the owner of a partition of the sessions.
OWNER_LOCK_CLASS: Final = 0x736F6F6E  # "soon"


def try_own(conn: PgConn, partition: int, owner: str) -> bool:
    """Take ownership of ``partition`` on ``conn`` if no live writer holds it.

    The lock is a session-level advisory lock of the connection the writer writes on: it lasts
    exactly as long as that connection, so a writer that died (even by SIGKILL), or whose
    connection broke, owns nothing any more, and a writer never writes on a connection that
    does not hold it. ``partition_owners`` records who holds it, for operators.
    """
    row = conn.execute(
        "SELECT pg_try_advisory_lock(?, ?)", (OWNER_LOCK_CLASS, partition)
    ).fetchone()
    if row is None or not row[0]:
        return False
    _record_owner(conn, partition=partition, owner=owner)
    return True


def _record_owner(conn: PgConn, *, partition: int, owner: str) -> None:
    """Say in ``partition_owners`` that ``owner`` (holding the lock on ``conn``) owns it."""
    conn.execute(
        "INSERT INTO partition_owners (partition, owner, since) VALUES (?, ?, now()) "
        "ON CONFLICT (partition) DO UPDATE SET owner = excluded.owner, since = excluded.since",
        (partition, owner),
    )


def _holder(conn: PgConn, partition: int) -> str:
    row = conn.execute(
        "SELECT owner FROM partition_owners WHERE partition = ?", (partition,)
    ).fetchone()
    return "unknown" if row is None else str(row[0])


def _locked(conn: PgConn, partition: int) -> StorageError:
    holder = _holder(conn, partition)
    return StorageError(
        "writer_locked",
        f"another storage-writer ({holder}) owns partition {partition} of the PostgreSQL "
        "database; only one writer may own a partition (a standby waits for it)",
        details={"partition": partition, "holder": holder},
    )


def owned_connection(dsn: str, owner: str, partition: int = 0) -> PgConn:
    """A write connection that owns ``partition``, or ``writer_locked`` (a reconnecting writer
    whose partition was taken over meanwhile must not write)."""
    conn = open_connection(dsn)
    if not try_own(conn, partition, owner):
        error = _locked(conn, partition)
        conn.close()
        raise error
    return conn


async def own_when_free(
    dsn: str, owner: str, *, standby: bool, partition: int = 0
) -> tuple[PgConn, bool]:
    """The first write connection: owning ``partition`` now, or (``standby``) as soon as its
    owner stops (a wait inside the server, :mod:`.pg_standby`), and whether it waited; a second
    non-standby writer is refused with ``writer_locked``."""
    conn = await asyncio.to_thread(open_connection, dsn)
    try:
        if await asyncio.to_thread(try_own, conn, partition, owner):
            return conn, False
        if not standby:
            raise await asyncio.to_thread(_locked, conn, partition)
    except BaseException:
        conn.close()
        raise
    log.info("standby: partition %d is owned; taking over when it stops", partition)
    wait = ServerWait(
        conn,
        (OWNER_LOCK_CLASS, partition),
        partial(_record_owner, partition=partition, owner=owner),
        asyncio.get_running_loop(),
    )
    try:
        await wait.taken
    except BaseException:
        if not wait.abandon():
            conn.close()
        raise
    log.warning("standby: took over partition %d (its previous writer stopped)", partition)
    return conn, True


@dataclass
class PostgresBackend:
    """The opened PostgreSQL backend: a writer and a query engine, each on its own connection."""

    writer: PgWriter
    engine: PgQueryEngine
    name: str = "postgres"
    # Whether this writer waited for the partition as a standby (``own_when_free``).
    took_over: bool = False

    def tasks(self, write_thread: Executor) -> list[BackgroundTask]:
        """No checkpoints (PostgreSQL makes its own); one watcher that stops the service when
        the writer was superseded (:class:`.pg_store.PgWriter`), and ends a held batch's wait
        for the server when the service stops."""
        return [self._watch]

    async def _watch(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        superseded = asyncio.Event()

        def wake() -> None:  # on the write thread
            loop.call_soon_threadsafe(superseded.set)

        self.writer.on_superseded = wake
        if self.writer.superseded is not None:  # before the callback was in place
            superseded.set()
        waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(superseded.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        if superseded.is_set():
            # The writer logged why; this says what follows from it.
            log.critical("storage-writer stopping: superseded [writer_superseded]")
            stop.set()
        self.writer.stop_holding()

    async def close(self, write_thread: Executor, read_thread: Executor) -> None:
        """Close both connections on their threads (a batch held for the server gives up first,
        or its thread would never take the close)."""
        self.writer.stop_holding()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(write_thread, self.writer.close)
        await loop.run_in_executor(read_thread, self.engine.close)


def open_connection(dsn: str) -> PgConn:
    """A connection as the writer and the engine use it (see :mod:`.pg_conn`)."""
    return PgConn(connect(dsn, autocommit=True))


async def open_postgres(settings: Settings) -> PostgresBackend | PartitionedPostgres:
    """Check the server and apply the migrations, take ownership (a standby waits for it),
    then open the writer and the engine. With ``[storage] partitions`` > 1 the writer shares
    the partitions with the others (:mod:`.pg_partitions`): it joins, and takes its share once
    the service runs."""
    dsn = resolve_dsn()
    partitions = settings.storage.partitions
    await asyncio.to_thread(migrate_database, dsn, partitions)
    owner = f"{socket.gethostname()}:{os.getpid()}"
    control = await asyncio.to_thread(join, partial(open_connection, dsn))
    try:
        await asyncio.to_thread(check_layout, control, partitions)
    except BaseException:
        control.close()
        raise
    if partitions > 1:
        return PartitionedPostgres(
            dsn,
            owner,
            partitions,
            settings.db_path.parent / "artifacts",
            settings.storage.json_artifact_threshold_bytes,
            await open_file_store(settings),
            PgQueryEngine(partial(open_connection, dsn)),
            control,
            partial(open_connection, dsn),
            try_own,
            lambda partition: owned_connection(dsn, owner, partition),
            claim_interval_s=settings.bus.claim_interval_s,
        )
    control.close()
    first, took_over = await own_when_free(dsn, owner, standby=settings.storage.standby)
    writer = PgWriter(
        partial(owned_connection, dsn, owner),
        settings.db_path.parent / "artifacts",
        settings.storage.json_artifact_threshold_bytes,
        first=first,
        files=await open_file_store(settings),
    )
    return PostgresBackend(
        writer, PgQueryEngine(partial(open_connection, dsn)), took_over=took_over
    )
