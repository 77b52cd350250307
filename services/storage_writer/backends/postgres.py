"""The ``postgres`` backend: PostgreSQL 15 or later through psycopg 3.

Configuration: ``[storage] backend = "postgres"`` in ``config.toml`` (or
``SOONG_STORAGE_BACKEND``); the server from the environment's ``SOONG_POSTGRES_DSN`` (a libpq
connection string or URI), with libpq's own ``PG*`` variables filling in what it leaves out, as
libpq does. The DSN never lives in ``config.toml``: it may carry a password.

Start-up checks the server before anything else and turns each way it can fail into one clear,
typed error (the CLI prints it as one line, the process exits non-zero):

- ``postgres_dsn_missing``: no DSN and no ``PG*`` variable either;
- ``postgres_unreachable``: no answer (wrong host or port, server down, name not resolved);
- ``postgres_auth_refused``: the server refused the user or password;
- ``postgres_too_old``: a server before PostgreSQL 15 (``MERGE``, ``UNIQUE NULLS NOT
  DISTINCT`` and the faster sorts this schema relies on are 15's).

The password never reaches a message: errors name host, port and database only.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import socket
from collections.abc import Mapping
from concurrent.futures import Executor
from dataclasses import dataclass
from functools import partial
from typing import Final

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from agent_core.config import Settings
from agent_core.errors import ConfigError, StorageError
from agent_core.files import open_file_store
from agent_core.service import BackgroundTask
from services.storage_writer.backends.pg_conn import PgConn
from services.storage_writer.backends.pg_partitions import (
    PartitionedPostgres,
    check_layout,
    join,
)
from services.storage_writer.backends.pg_schema import migrate
from services.storage_writer.backends.pg_standby import ServerWait
from services.storage_writer.backends.pg_store import PgQueryEngine, PgWriter

__all__ = [
    "DSN_ENV",
    "MIN_SERVER_VERSION",
    "check_server",
    "check_version",
    "connect",
    "connection_defaults",
    "PostgresBackend",
    "migrate_database",
    "open_connection",
    "open_postgres",
    "own_when_free",
    "owned_connection",
    "try_own",
    "resolve_dsn",
]

log = logging.getLogger("soong.storage_writer")

DSN_ENV: Final = "SOONG_POSTGRES_DSN"
MIN_SERVER_VERSION: Final = 150000  # libpq's server_version form: 15.0
_CONNECT_TIMEOUT_S: Final = 5
# What libpq reports, and SQLSTATEs, when the server refused who we are (not where we went).
_AUTH_STATES: Final = frozenset({"28000", "28P01"})
_AUTH_WORDS: Final = (
    "password authentication failed",
    "no pg_hba.conf entry",
    "authentication failed",
    "password is required",
    "does not exist",  # role "x" does not exist / database "y" does not exist
)


def resolve_dsn(env: Mapping[str, str] | None = None) -> str:
    """The DSN from ``SOONG_POSTGRES_DSN``; empty when only libpq's ``PG*`` variables name the
    server (libpq reads them itself); ``postgres_dsn_missing`` when nothing names it."""
    env = os.environ if env is None else env
    dsn = env.get(DSN_ENV, "").strip()
    if dsn or any(key in env for key in ("PGHOST", "PGSERVICE", "PGDATABASE")):
        return dsn
    raise ConfigError(
        "postgres_dsn_missing",
        f'[storage] backend is "postgres" but {DSN_ENV} is not set '
        "(e.g. postgresql://soong@db.internal:5432/soong)",
        details={"env": DSN_ENV},
    )


def _where(dsn: str) -> str:
    """host:port/dbname of a DSN, for messages (never its password)."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "the server named by " + DSN_ENV
    host = str(parts.get("host") or os.environ.get("PGHOST") or "localhost")
    port = str(parts.get("port") or os.environ.get("PGPORT") or "5432")
    db = str(parts.get("dbname") or os.environ.get("PGDATABASE") or parts.get("user") or "")
    return f"{host}:{port}/{db}"


def connect(dsn: str, *, autocommit: bool = False) -> psycopg.Connection[tuple[object, ...]]:
    """A connection, or the typed error of :mod:`the module <.postgres>`'s list."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise ConfigError(
            "postgres_dsn_invalid",
            f"{DSN_ENV} is not a libpq connection string or URI",
            details={"env": DSN_ENV},
        ) from exc
    conninfo = make_conninfo(dsn, **connection_defaults(parts))
    try:
        return psycopg.connect(conninfo, autocommit=autocommit)
    except psycopg.OperationalError as exc:
        raise _classify(exc, _where(dsn)) from None


# A server or host that goes silent (a power cut, a cut link: no FIN, no RST) is noticed from
# both ends within about idle + interval × count seconds instead of the kernel's two hours:
# libpq's keepalives and ``tcp_user_timeout`` on the writer's side, and the same numbers asked of
# the server for this session, so a dead writer host's backend (holding a partition's lock) ends
# and another writer can take the partition over.
_KEEPALIVE: Final = {
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
    "tcp_user_timeout": "30000",  # ms: data unacknowledged this long ends the connection
}
_SERVER_SIDE: Final = {  # the server's settings and the client parameter they mirror
    "tcp_keepalives_idle": "keepalives_idle",
    "tcp_keepalives_interval": "keepalives_interval",
    "tcp_keepalives_count": "keepalives_count",
    "tcp_user_timeout": "tcp_user_timeout",
}


# A server setting in libpq's ``options``: ``-c name=value``, ``-cname=value`` or
# ``--name=value`` (the server reads ``-`` in a name as ``_``).
_OPTION_SETTING = re.compile(r"(?:^|\s)(?:-c\s*|--)([A-Za-z0-9_.-]+)=")


def settings_named(options: str) -> set[str]:
    """The server settings a libpq ``options`` string sets, in the server's spelling (pure)."""
    return {m.group(1).replace("-", "_").lower() for m in _OPTION_SETTING.finditer(options)}


def connection_defaults(parts: Mapping[str, object]) -> dict[str, str | int]:
    """The parameters the writer adds to a DSN's ``parts`` (pure): a connect timeout, its
    application name, and keepalives on both ends (see ``_KEEPALIVE``). What the DSN sets wins,
    on either end: a client parameter it names is kept and mirrored to the server, a server
    setting its ``options`` already names (in any of libpq's spellings, :func:`settings_named`)
    is not added again, and ``keepalives=0`` turns both off.
    """
    off = str(parts.get("keepalives", "1")).strip() == "0"
    out: dict[str, str | int] = {
        "connect_timeout": _CONNECT_TIMEOUT_S,
        "application_name": "soong-storage-writer",
        **({} if off else _KEEPALIVE),
    }
    out = {k: v for k, v in out.items() if k not in parts}
    if off:
        return out
    client = {**_KEEPALIVE, **{k: str(v) for k, v in parts.items() if k in _KEEPALIVE}}
    options = str(parts.get("options") or "")
    named = settings_named(options)
    extra = [
        f"-c {name}={client[param]}" for name, param in _SERVER_SIDE.items() if name not in named
    ]
    if extra:
        out["options"] = " ".join([options, *extra]).strip()
    return out


def _classify(exc: psycopg.OperationalError, where: str) -> StorageError:
    text = str(exc)
    if exc.sqlstate in _AUTH_STATES or any(word in text for word in _AUTH_WORDS):
        return StorageError(
            "postgres_auth_refused",
            f"PostgreSQL at {where} refused the credentials of {DSN_ENV} "
            "(check the user, password and pg_hba.conf)",
            details={"server": where},
        )
    return StorageError(
        "postgres_unreachable",
        f"PostgreSQL at {where} did not answer (is it running, and are host and port right?)",
        details={"server": where},
        retryable=True,
    )


def check_version(server_version: int, where: str = "the server") -> None:
    """Refuse a server older than :data:`MIN_SERVER_VERSION` (``postgres_too_old``)."""
    if server_version < MIN_SERVER_VERSION:
        major = server_version // 10000
        raise StorageError(
            "postgres_too_old",
            f"PostgreSQL at {where} is version {major}; the storage-writer needs 15 or later",
            details={"server": where, "server_version": server_version},
        )


def check_server(dsn: str) -> int:
    """Connect once, check the version; return it (libpq's integer form, e.g. 150018)."""
    with connect(dsn, autocommit=True) as conn:
        version = conn.info.server_version
        check_version(version, _where(dsn))
        return version


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
