"""The storage-writer in-process (for fault hooks) or as a subprocess (for SIGKILL), and a client."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg

from agent_core.bus import Bus, BusNames, RpcClient, make_redis
from agent_core.config import Settings
from agent_core.config.schema import BusSettings
from agent_core.service import ServiceContext, run_service
from agent_core.storage_client import StorageClient
from services.storage_writer.backends.postgres import OWNER_LOCK_CLASS
from services.storage_writer.service import StorageWriterService, assemble
from services.storage_writer.shards import ShardLayout
from tests.conftest import REPO
from tests.procs import ServiceProcess, spawn_service


def writer_settings(home: Path, redis_url: str, names: BusNames) -> Settings:
    """Settings of a writer under ``home`` on the test's namespace, recovering quickly."""
    bus = BusSettings(
        redis_url=redis_url, namespace=names.namespace, min_idle_ms=500, claim_interval_s=0.2
    )
    return Settings(home=home, bus=bus)


@contextlib.asynccontextmanager
async def in_process_writer(settings: Settings) -> AsyncIterator[StorageWriterService]:
    """Run the service in this event loop; yields the assembled service (writer, engine)."""
    box: list[StorageWriterService] = []

    async def factory(ctx: ServiceContext):  # type: ignore[no-untyped-def]
        svc = await assemble(ctx)
        box.append(svc)
        return svc.parts

    stop = asyncio.Event()
    task = asyncio.create_task(run_service(factory, settings, "storage_writer", "0", stop=stop))
    deadline = time.monotonic() + 60  # bounds a hang only: start-up is slow on a busy machine
    while not (box or task.done()) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    if task.done():
        await task
    assert box, "writer did not start"
    try:
        yield box[0]
    finally:
        stop.set()
        async with asyncio.timeout(30):
            assert await task == 0


@contextlib.asynccontextmanager
async def storage_client(
    redis_url: str, names: BusNames, *, timeout_s: float = 10.0, attempts: int = 5, tag: str = "t"
) -> AsyncIterator[StorageClient]:
    """A :class:`StorageClient` with its own Redis client and reply channel."""
    bus = Bus(make_redis(redis_url))
    rpc = RpcClient(bus, names.reply_channel(f"client-{tag}-{os.getpid()}"))
    await rpc.start()
    try:
        yield StorageClient(rpc, names, timeout_s=timeout_s, attempts=attempts, backoff_s=0.05)
    finally:
        await rpc.stop()
        await bus.aclose()


def spawn_writer(
    home: Path, redis_url: str, names: BusNames, log: Path, *, instance: str = "0"
) -> ServiceProcess:
    """``soong-agent serve storage_writer --instance <instance>`` as its own process (stable
    consumer name), forked from the preloaded server of :mod:`tests.procs`."""
    env = {
        **os.environ,
        "SOONG_REDIS_URL": redis_url,
        "SOONG_NAMESPACE": names.namespace,
        "SOONG_AGENT_HOME": str(home),
        "PYTHONUNBUFFERED": "1",
    }
    return spawn_service("storage_writer", instance, env=env, cwd=REPO, log=log)


def layout_of(home: Path) -> ShardLayout:
    """The shard layout of the database under ``home`` (read from its catalog)."""
    db = home / "sessions.sqlite"
    conn = sqlite3.connect(db)
    try:
        (count,) = conn.execute("SELECT shard_count FROM shard_layout").fetchone()
    finally:
        conn.close()
    return ShardLayout(db, int(count))


def integrity_ok(home: Path) -> bool:
    """``PRAGMA integrity_check`` is ``ok`` on the catalog and every shard."""
    layout = layout_of(home)
    for path in [layout.db_path, *layout.paths()]:
        conn = sqlite3.connect(path)
        try:
            if conn.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
                return False
        finally:
            conn.close()
    return True


def partition_owners(dsn: str) -> dict[int, str]:
    """Partition -> owner, of the partitions of a PostgreSQL record whose advisory lock is held
    right now (``[storage] partitions``); empty before the first migration."""
    with psycopg.connect(dsn) as conn:
        if conn.execute("SELECT to_regclass('partition_owners')").fetchone() == (None,):
            return {}
        rows = conn.execute(
            "SELECT o.partition, o.owner FROM partition_owners o WHERE EXISTS ("
            "SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted "
            "AND l.objsubid = 2 AND l.objid = o.partition AND l.classid = %s::oid "
            "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))",
            (OWNER_LOCK_CLASS,),
        ).fetchall()
    return {int(p): str(owner) for p, owner in rows}
