"""Several writers sharing the partitions of one PostgreSQL database (``[storage] partitions`` > 1).

Sessions are spread over P partitions by :meth:`BusNames.storage_partition` (CRC-32 of the
session id), each with its own command stream. Each partition is owned by at most one writer at a
time: a session-level advisory lock ``(OWNER_LOCK_CLASS, p)`` held by the connection that writes
the partition's batches (:func:`.postgres.try_own`), so ownership lasts exactly as long as that
connection and a writer that died (SIGKILL included) owns nothing any more.

Every writer also holds a shared "member" advisory lock on a control connection; counting its
holders tells each writer how many writers are alive (W), hence its fair share: at most
``ceil(P / W)`` partitions. A manager loop, every :data:`TICK_S`:

- gives back partitions above its share (a writer joined): it stops reading the partition's
  stream, lets the batch in flight finish, then closes the connection, which frees the lock;
- takes free partitions below its share (a writer left or died): the lock first, then the
  stream — its consumer group created if need be, and every entry still pending in it claimed
  (the previous owner's, whose connection is gone so it commits nothing more) and applied before
  new ones. Commands are idempotent by ``command_id``: one the dead owner committed but never
  acknowledged is answered with its first receipt.

A partition whose connection broke and was taken over meanwhile (``writer_superseded``) is
dropped by this writer; the others go on. Queries are answered by every writer (the service's
one query consumer): the tables are shared and a receipt is sent only after its commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Final, Protocol

from agent_core.errors import ConfigError, StorageError
from agent_core.files import FileStore
from agent_core.service import BackgroundTask
from services.storage_writer.backends.pg_conn import PgConn
from services.storage_writer.backends.pg_store import PgQueryEngine, PgWriter

__all__ = ["MEMBER_LOCK_CLASS", "TICK_S", "PartitionReader", "PartitionedPostgres"]

log = logging.getLogger("soong.storage_writer")

# pg_advisory_lock_shared(MEMBER_LOCK_CLASS, 0): held by every live writer of the database.
MEMBER_LOCK_CLASS: Final = 0x736F6F6D  # "soom"
# How often ownership is looked at: a dead owner's partitions move within about two ticks.
TICK_S: Final = 0.2
_GRACEFUL_S: Final = 15.0  # a released partition's batch in flight finishes within this


class PartitionReader(Protocol):
    """The bus side of one owned partition (the service builds it: a stream consumer)."""

    @property
    def running(self) -> bool:
        """Whether its reading loop is alive."""
        ...

    async def stop(self) -> None:
        """Stop reading; what is being applied finishes first."""
        ...

    async def reclaim(self) -> None:
        """Re-deliver its entries left pending longer than the consumer's idle time."""
        ...


# (partition, writer, its write thread) -> the partition's reader, started (its pending entries
# already claimed and applied).
OpenReader = Callable[[int, PgWriter, Executor], Awaitable[PartitionReader]]


@dataclass
class _Owned:
    writer: PgWriter
    thread: ThreadPoolExecutor
    reader: PartitionReader | None = None


class _NoSingleWriter:
    """``writer`` of a partitioned backend: each owned partition has its own."""

    def apply_batch(self, commands: Any) -> Any:
        raise StorageError(
            "writer_partitioned",
            "with [storage] partitions > 1 each owned partition has its own writer",
        )

    def close(self) -> None:
        """Nothing to close (the partitions' writers are closed with them)."""


@dataclass
class PartitionedPostgres:
    """The PostgreSQL backend of a writer that shares P > 1 partitions with others.

    ``open_reader`` must be set (by the service) before :meth:`tasks` runs.
    """

    dsn: str
    owner: str
    partitions: int
    data_dir: Path
    json_threshold_bytes: int
    files: FileStore
    engine: PgQueryEngine
    control: PgConn
    connect: Callable[[], PgConn]
    # postgres.try_own, and postgres.owned_connection bound to the DSN and owner (passed in:
    # that module opens this one).
    try_own: Callable[[PgConn, int, str], bool]
    owned_connection: Callable[[int], PgConn]
    claim_interval_s: float = 1.0
    open_reader: OpenReader | None = None
    name: str = "postgres"
    owned: dict[int, _Owned] = field(default_factory=dict)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _closed: bool = False

    @property
    def writer(self) -> _NoSingleWriter:
        """No single writer: see :attr:`owned`."""
        return _NoSingleWriter()

    @property
    def took_over(self) -> bool:
        """Never at its opening: a writer sharing partitions joins the others and takes its
        share (and a stopped writer's) while it runs."""
        return False

    def tasks(self, write_thread: Executor) -> list[BackgroundTask]:
        """The manager loop (the module's docstring)."""
        return [self._manage]

    async def _manage(self, stop: asyncio.Event) -> None:
        since_reclaim = 0.0
        while not stop.is_set():
            try:
                async with self._lock:
                    if self._closed:
                        return
                    await self._tick()
                    since_reclaim += TICK_S
                    if since_reclaim >= self.claim_interval_s:
                        since_reclaim = 0.0
                        for owned in list(self.owned.values()):
                            if owned.reader is not None:
                                await owned.reader.reclaim()
            except Exception:
                log.exception("partition ownership: a round failed; trying again")
                await asyncio.to_thread(self._reconnect_control)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(TICK_S):
                    await stop.wait()

    async def _tick(self) -> None:
        for p, owned in list(self.owned.items()):
            reader_died = owned.reader is not None and not owned.reader.running
            if owned.writer.superseded is not None or reader_died:
                log.warning("partition %d: given up (superseded or its reader stopped)", p)
                await self._release(p)
        writers = max(1, await asyncio.to_thread(self._count_writers))
        high = math.ceil(self.partitions / writers)
        low = self.partitions // writers
        if len(self.owned) > high:
            for p in sorted(self.owned, reverse=True)[: len(self.owned) - high]:
                log.info("partition %d: handed over (%d writers share %d)", p, writers, high)
                await self._release(p)
            return
        # Up to the lower share at once; one more per round beyond it, so that writers taking
        # partitions at the same moment end up with shares that differ by at most one.
        wanted = max(low - len(self.owned), 1) if len(self.owned) < high else 0
        for p in range(self.partitions):
            if wanted <= 0:
                break
            if p in self.owned:
                continue
            if await self._take(p):
                wanted -= 1

    async def _take(self, p: int) -> bool:
        conn = await asyncio.to_thread(self.connect)
        try:
            mine = await asyncio.to_thread(self.try_own, conn, p, self.owner)
        except BaseException:
            conn.close()
            raise
        if not mine:
            conn.close()
            return False
        writer = PgWriter(
            partial(self.owned_connection, p),
            self.data_dir,
            self.json_threshold_bytes,
            first=conn,
            files=self.files,
        )
        owned = _Owned(writer, ThreadPoolExecutor(1, thread_name_prefix=f"postgres-writer-{p}"))
        self.owned[p] = owned
        assert self.open_reader is not None, "the service sets open_reader"
        owned.reader = await self.open_reader(p, writer, owned.thread)
        log.warning("partition %d: owned by this writer (%s)", p, self.owner)
        return True

    async def _release(self, p: int) -> None:
        owned = self.owned.pop(p)
        if owned.reader is not None:
            await owned.reader.stop()
        owned.writer.stop_holding()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(owned.thread, owned.writer.close)  # frees the lock
        owned.thread.shutdown()

    def _count_writers(self) -> int:
        row = self.control.execute(
            "SELECT count(DISTINCT pid) FROM pg_locks WHERE locktype = 'advisory' "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND classid = ?::oid AND objid = 0 AND objsubid = 2 AND granted",
            (MEMBER_LOCK_CLASS,),
        ).fetchone()
        return 0 if row is None else int(str(row[0]))

    def _reconnect_control(self) -> None:
        """A control connection that failed is replaced (the membership lock taken again)."""
        with contextlib.suppress(Exception):
            self.control.close()
        with contextlib.suppress(Exception):
            self.control = join(self.connect)

    async def close(self, write_thread: Executor, read_thread: Executor) -> None:
        """Give every partition back (batches in flight finish), then close the connections."""
        async with self._lock:
            self._closed = True
            for p in list(self.owned):
                await self._release(p)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(read_thread, self.engine.close)
        self.control.close()


def join(connect: Callable[[], PgConn]) -> PgConn:
    """A control connection holding the member lock: this writer counts among the live ones."""
    conn = connect()
    conn.execute("SELECT pg_advisory_lock_shared(?, 0)", (MEMBER_LOCK_CLASS,))
    return conn


def check_layout(conn: PgConn, partitions: int) -> None:
    """Refuse a configuration whose partition count differs from the database's
    (``partitions_mismatch``): senders and writers would route sessions differently."""
    row = conn.execute("SELECT partitions FROM layout WHERE id = 1").fetchone()
    recorded = partitions if row is None else int(str(row[0]))
    if recorded != partitions:
        raise ConfigError(
            "partitions_mismatch",
            f"[storage] partitions is {partitions} but the PostgreSQL database was set up with "
            f"{recorded}; every writer and sender must use {recorded}",
            details={"configured": partitions, "database": recorded},
        )
