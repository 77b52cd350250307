"""Storage-writer throughput and latency through the real bus, against the raw SQLite ceiling.

Starts its own Valkey and runs the writer as a subprocess (``soong-agent serve storage_writer``),
exactly as deployed. Producers are closed-loop coroutines in this process, each appending
node+event pairs to its own session and waiting for each receipt (retry under the same ids on
timeout). Measured in one run:

* group commit (``batch_max`` default) at 1 and 16 producers, and one transaction per command
  (``batch_max = 1``) at 16 producers — pairs/s and receipt latency;
* saturated: a backlog of 128 sessions × ``BACKLOG_PAIRS`` commands published faster than the
  writer drains it (pre-encoded, pipelined ``XADD``s, as many in flight as there are), timed
  until the group has read and acknowledged every entry: pairs/s (``saturated_pairs_per_s``)
  and the writer's CPU per command (``writer_cpu_us_per_command``: the ``utime + stime`` of
  its process and of its search index's process over the phase ÷ commands;
  ``writer_busy_saturated`` is that CPU ÷ the phase's wall time, near 1.0 when the writer is
  the bottleneck, up to 2.0 with the index's process busy beside it), and that CPU split in two:
  the writer's own process (``writer_process_cpu_us_per_command``) and the search index's
  (``index_process_cpu_us_per_command``; 0 on PostgreSQL, whose writer indexes in its own
  transaction). Afterwards every session's
  tables are counted: each command wrote its node and its event, and nothing was dead-lettered;
* closed loop at 128 producers, each waiting for its receipt: pairs/s and the writer's CPU per
  command (``closed_loop_*_128``). On two cores the producers' own client CPU (~200 µs a
  command through the storage client) bounds this one, not the writer;
* the raw ceiling: plain ``sqlite3`` inserting the same rows into one session's tables in
  1,000-pair transactions, with the writer's pragmas (WAL, its ``synchronous`` level);
* with 1,000 and 10,000 sessions' tables present (created directly with sqlite3 before the
  writer starts): create-session latency through the service, and the latency of a query on an
  existing session of the *same shard* sent right after each create (the worst case for the
  reader's schema re-parse).

The last line printed is one JSON object. ``--quick``: the saturated backlog alone.
``--backend postgres``: the saturated backlog on SQLite and on PostgreSQL in the same run (a
private durable server, ``tests/engines/postgres.py``, fsync at every commit as deployed; SQLite
keeps its ``synchronous`` level), each with its writer CPU per command, and their ratio; for
PostgreSQL also the server's CPU per command (``server_cpu_us_per_command``: ``utime + stime``
of the postmaster and every process under it over the phase ÷ commands). Each PostgreSQL phase
has a database of its own.

``--backend postgres --partitions N`` (N even, 2 or more) adds, in the same run, the backlog on
``[storage] partitions = N`` drained by two writer processes pinned to cores 0 and 1
(``sched_setaffinity`` on every thread), each command published to its session's stream
(``BusNames(ns, N).storage_commands(session_id)``); the clock starts once each writer owns N/2
partitions and stops when every partition's group has lag 0 and nothing pending. Its baseline,
also measured in the run, is one writer pinned to core 0 with one partition. Keys:
``postgres_one_writer_pinned_pairs_per_s``, ``postgres_partitions_N_pairs_per_s``,
``partitions_N_vs_one`` (their ratio; the goal is 1.6), and for both phases the writers', the
server's and the total CPU per command (``*_writer_cpu_us_per_command``,
``*_server_cpu_us_per_command``, ``*_total_cpu_us_per_command``: on two cores the total is what
bounds the rate), and each of the two writers' CPU per command of the partitions it owned, its
busy share of the phase and its command count (``postgres_partitions_N_writer<i>_*``). The
producer (this process) and PostgreSQL's processes are not pinned: they share both cores.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from redis.asyncio import Redis

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "shared"), str(ROOT / "bench")]

from helpers.proc_cpu import cpu_seconds, descendants, tree_cpu  # noqa: E402

from agent_core.bus import GROUP_STORAGE, Bus, BusNames, RpcClient, make_redis  # noqa: E402
from agent_core.bus.contracts.storage import CommandReceipt, ListEvents  # noqa: E402
from agent_core.bus.contracts.storage_queries import SearchSessions  # noqa: E402
from agent_core.errors import BusTimeoutError  # noqa: E402
from agent_core.ids import new_id, new_session_id  # noqa: E402
from agent_core.service.valkey import EmbeddedValkey  # noqa: E402
from agent_core.storage_client import StorageClient  # noqa: E402
from services.storage_writer.backends.pg_connect import DSN_ENV  # noqa: E402
from services.storage_writer.schema import (  # noqa: E402
    SYNCHRONOUS,
    configure,
    create_session_tables,
    events_table,
    nodes_table,
)
from services.storage_writer.shards import open_catalog  # noqa: E402
from tests.engines.postgres import start_cluster  # noqa: E402
from tests.integration.storage_writer.helpers import partition_owners  # noqa: E402
from tests.unit.storage_writer.factories import append_node, create_session  # noqa: E402

PAIRS_16 = 250  # per producer
PAIRS_1 = 800
PAIRS_PER_COMMAND_16 = 60
SATURATING_PRODUCERS = 128
PAIRS_SATURATED = 40  # per producer
BACKLOG_SESSIONS = 128
BACKLOG_PAIRS = 200  # per session
BACKLOG_CHUNK = 500  # XADDs per pipeline
RAW_PAIRS = 20_000
CREATES = 60


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


class WriterProcess:
    """The writer subprocess under ``home`` (optionally with ``batch_max``)."""

    def __init__(
        self,
        home: Path,
        url: str,
        names: BusNames,
        batch_max: int | None,
        env_extra: dict[str, str] | None = None,
        *,
        instance: str = "0",
        core: int | None = None,
    ) -> None:
        home.mkdir(parents=True, exist_ok=True)
        if batch_max is not None:
            (home / "config.toml").write_text(f"[storage]\nbatch_max = {batch_max}\n")
        env = {
            **os.environ,
            "SOONG_REDIS_URL": url,
            "SOONG_NAMESPACE": names.namespace,
            "SOONG_AGENT_HOME": str(home),
            "SOONG_LOG_LEVEL": "WARNING",
            "PYTHONPATH": f"{ROOT}:{ROOT / 'shared'}",
            **(env_extra or {}),
        }
        self.log = home / "writer.log"
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "agent_core.cli",
                    "serve",
                    "storage_writer",
                    "--instance",
                    instance,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=ROOT,
            )
        self.core = core
        self.pin()

    def pin(self) -> None:
        """Pin every thread of the process to ``core`` (threads started later inherit it)."""
        if self.core is None:
            return
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                os.sched_setaffinity(int(task.name), {self.core})

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Client:
    """A storage client with its own Redis connection and reply channel."""

    def __init__(self, url: str, names: BusNames) -> None:
        self.url, self.names = url, names

    async def __aenter__(self) -> StorageClient:
        self.bus = Bus(make_redis(self.url))
        self.rpc = RpcClient(self.bus, self.names.reply_channel(new_id("cmd")))
        await self.rpc.start()
        return StorageClient(self.rpc, self.names, timeout_s=10.0, attempts=6)

    async def __aexit__(self, *exc: object) -> None:
        await self.rpc.stop()
        await self.bus.aclose()


async def _ready(client: StorageClient) -> None:
    s = create_session()
    for _ in range(100):
        try:
            await client.send(s)
            return
        except BusTimeoutError:
            continue
    raise RuntimeError("writer did not answer")


async def storm(
    url: str, home: Path, producers: int, pairs: int, batch_max: int | None
) -> dict[str, float]:
    """``producers`` closed-loop producers × ``pairs`` node+event pairs; pairs/s and latency."""
    names = BusNames(f"b{new_id('cmd')[-8:]}")
    writer = WriterProcess(home, url, names, batch_max)
    try:
        async with Client(url, names) as client:
            await _ready(client)
            sessions = [create_session() for _ in range(producers)]
            for s in sessions:
                assert (await client.send(s)).ok
            latencies: list[float] = []

            async def produce(s: Any) -> None:
                for _ in range(pairs):
                    cmd = append_node(s)
                    t0 = time.perf_counter()
                    receipt: CommandReceipt = await client.send(cmd)
                    latencies.append(time.perf_counter() - t0)
                    assert receipt.ok, receipt.error

            cpu0, t0 = tree_cpu(writer.proc.pid), time.perf_counter()
            await asyncio.gather(*(produce(s) for s in sessions))
            elapsed = time.perf_counter() - t0
            writer_cpu = tree_cpu(writer.proc.pid) - cpu0
    finally:
        writer.stop()
    return {
        "pairs_per_s": producers * pairs / elapsed,
        "writer_cpu_us_per_command": writer_cpu * 1e6 / (producers * pairs),
        "writer_busy": writer_cpu / elapsed,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": _pct(latencies, 99) * 1000,
    }


async def backlog(
    url: str,
    home: Path,
    sessions: int,
    pairs: int,
    pg_dsn: str | None = None,
    *,
    partitions: int = 1,
    cores: list[int | None] | None = None,
    server_pid: int | None = None,
) -> dict[str, Any]:
    """``sessions`` × ``pairs`` append_node commands as a backlog the writers drain at their pace.

    One writer per entry of ``cores`` (each pinned to that core, or not with ``None``; one
    unpinned writer by default) sharing ``partitions`` partitions (PostgreSQL only beyond one).
    Each command goes to its session's stream (``BusNames(ns, partitions).storage_commands``).
    The commands are built and encoded before the clock starts and carry no reply header (the
    storage client's request/reply would put the producer's CPU on the same two cores); with
    several writers the clock starts once each owns its share of the partitions. The phase ends
    when every partition's group has read every entry and none is pending, i.e. every batch was
    committed and acknowledged, and a search has been answered: SQLite's writer indexes the texts
    still in its outbox first, so the phase counts the index's work for the backlog (its process
    flushes beside the writer and could otherwise still be busy when the commands are acked).
    What was written is then checked in the database.
    ``server_pid``: PostgreSQL's postmaster, whose processes' CPU over the phase is counted too.
    """
    names = BusNames(f"b{new_id('cmd')[-8:]}", partitions)
    writers = _writers(home, url, names, pg_dsn, partitions, cores or [None])
    streams = [names.storage_partition_stream(p) for p in range(partitions)]
    redis = make_redis(url)
    made = [create_session() for _ in range(sessions)]
    stack = contextlib.AsyncExitStack()
    try:
        owners = {0: f"pid:{writers[0].proc.pid}"}
        if partitions > 1:
            assert pg_dsn is not None, "partitions are PostgreSQL's"
            owners = await _shared_out(pg_dsn, partitions, writers)
        for w in writers:
            w.pin()  # the threads started since Popen inherited it; this is belt and braces
        client = await stack.enter_async_context(Client(url, names))
        await _ready(client)
        for s in made:
            assert (await client.send(s)).ok
        frames = [
            (
                names.storage_commands(made[i % sessions].session_id),
                {"__data__": append_node(made[i % sessions]).model_dump_json()},
            )
            for i in range(sessions * pairs)
        ]
        mine = {
            w.proc.pid: sum(
                pairs
                for s in made
                if owners[names.storage_partition(s.session_id)].endswith(f":{w.proc.pid}")
            )
            for w in writers
        }
        cpu0, t0 = _CpuMark.now(writers, server_pid), time.perf_counter()
        await _publish(redis, frames)
        while not all([await _drained(redis, stream) for stream in streams]):
            await asyncio.sleep(0.002)
        # Answered once every text queued for the search index is in it (SQLite's writer
        # flushes its outbox before a search): the phase counts the index's work too.
        search = SearchSessions(account_id=made[0].account_id, q="hello", limit=1)
        found = search.reply_of(await client.query(search))
        elapsed = time.perf_counter() - t0
        cpu = _CpuMark.now(writers, server_pid).since(cpu0)
        dead = await redis.xlen(names.dead_letter)
    finally:
        await stack.aclose()
        for w in writers:
            w.stop()
        await redis.aclose()
    assert found, "the backlog's texts were not found by a search"
    assert dead == 0, f"{dead} commands were dead-lettered (see {[w.log for w in writers]})"
    if pg_dsn is None:
        _check_written(home / "sessions.sqlite", made, pairs)
    else:
        _check_written_pg(pg_dsn, made, pairs)
    n = sessions * pairs
    return {
        "pairs_per_s": n / elapsed,
        "writer_cpu_us_per_command": sum(cpu.tree) * 1e6 / n,
        "writer_busy": sum(cpu.tree) / elapsed,
        # Of that CPU, the writers' own processes; the rest is their children's (SQLite's
        # search index process).
        "writer_process_cpu_us_per_command": sum(cpu.own) * 1e6 / n,
        "server_cpu_us_per_command": cpu.server * 1e6 / n,
        # Each writer's CPU per command of the partitions it owned, and its share of the phase.
        "writers": [
            {
                "cpu_us_per_command": used * 1e6 / max(1, mine[w.proc.pid]),
                "busy": used / elapsed,
                "commands": mine[w.proc.pid],
            }
            for w, used in zip(writers, cpu.tree, strict=True)
        ],
    }


def _writers(
    home: Path,
    url: str,
    names: BusNames,
    pg_dsn: str | None,
    partitions: int,
    cores: list[int | None],
) -> list[WriterProcess]:
    """One writer process per entry of ``cores``, each with a home of its own when there are
    several; on PostgreSQL with ``partitions`` partitions."""
    env: dict[str, str] = {}
    if pg_dsn is not None:
        env = {"SOONG_STORAGE_BACKEND": "postgres", DSN_ENV: pg_dsn}
        env["SOONG_STORAGE_PARTITIONS"] = str(partitions)
    homes = [home] if len(cores) == 1 else [home / f"w{i}" for i in range(len(cores))]
    return [
        WriterProcess(h, url, names, None, env, instance=str(i), core=core)
        for i, (h, core) in enumerate(zip(homes, cores, strict=True))
    ]


async def _publish(redis: Redis, frames: list[tuple[str, dict[str, str]]]) -> None:
    """``XADD`` every frame, ``BACKLOG_CHUNK`` to a pipeline, as fast as the server takes them."""
    for start in range(0, len(frames), BACKLOG_CHUNK):
        async with redis.pipeline(transaction=False) as pipe:
            for stream, fields in frames[start : start + BACKLOG_CHUNK]:
                pipe.xadd(stream, fields)  # type: ignore[arg-type]
            await pipe.execute()


@dataclass(frozen=True, slots=True)
class _CpuMark:
    """CPU seconds so far: of each writer with its children (``tree``), of each writer's own
    process (``own``) and of PostgreSQL's processes (``server``; 0 without one)."""

    tree: list[float]
    own: list[float]
    server: float

    @classmethod
    def now(cls, writers: list[WriterProcess], server_pid: int | None) -> _CpuMark:
        return cls(
            tree=[tree_cpu(w.proc.pid) for w in writers],
            own=[cpu_seconds(w.proc.pid) for w in writers],
            server=_server_cpu(server_pid),
        )

    def since(self, start: _CpuMark) -> _CpuMark:
        """What was used between ``start`` and this mark."""
        return _CpuMark(
            tree=[b - a for a, b in zip(start.tree, self.tree, strict=True)],
            own=[b - a for a, b in zip(start.own, self.own, strict=True)],
            server=self.server - start.server,
        )


async def _shared_out(dsn: str, partitions: int, writers: list[WriterProcess]) -> dict[int, str]:
    """Wait until the writers own ``partitions ÷ len(writers)`` partitions each; partition ->
    owner (``host:pid``)."""
    share = partitions // len(writers)
    deadline = time.monotonic() + 120
    while True:
        owners = partition_owners(dsn)
        counts = [sum(o.endswith(f":{w.proc.pid}") for o in owners.values()) for w in writers]
        if len(owners) == partitions and counts == [share] * len(writers):
            return owners
        for w in writers:
            if w.proc.poll() is not None:
                raise RuntimeError(f"a writer exited: see {w.log}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the writers did not share the partitions out: {owners}")
        await asyncio.sleep(0.05)


def _server_cpu(postmaster: int | None) -> float:
    """CPU seconds so far of PostgreSQL's processes (the postmaster, its backends and helpers);
    0.0 without a server. A backend that exits within a phase takes its CPU with it: the
    writers' connections live as long as they do, so none of theirs is lost."""
    if postmaster is None:
        return 0.0
    return sum(cpu_seconds(pid) for pid in descendants(postmaster))


async def _drained(redis: Any, stream: str) -> bool:
    """Whether the storage group has read every entry of ``stream`` and acknowledged them all."""
    [group] = [g for g in await redis.xinfo_groups(stream) if g["name"] == GROUP_STORAGE.encode()]
    return bool(group["lag"] == 0 and group["pending"] == 0)


def _check_written(db: Path, made: list[Any], pairs: int) -> None:
    """Every session has exactly ``pairs`` nodes and ``pairs`` ``node_created`` events."""
    layout = open_catalog(db)
    for s in made:
        conn = sqlite3.connect(layout.path(layout.shard_of(s.session_id)))
        try:
            (nodes,) = conn.execute(f"SELECT count(*) FROM {nodes_table(s.session_id)}").fetchone()
            (events,) = conn.execute(
                f"SELECT count(*) FROM {events_table(s.session_id)} "
                "WHERE event_type = 'node_created'"
            ).fetchone()
        finally:
            conn.close()
        assert nodes == pairs and events == pairs, (s.session_id, nodes, events)


def _check_written_pg(dsn: str, made: list[Any], pairs: int) -> None:
    """As :func:`_check_written`, in PostgreSQL's shared tables."""
    with psycopg.connect(dsn) as conn:
        for s in made:
            (nodes,) = conn.execute(
                "SELECT count(*) FROM nodes WHERE session_id = %s", (s.session_id,)
            ).fetchone() or (0,)
            (events,) = conn.execute(
                "SELECT count(*) FROM events WHERE session_id = %s AND event_type = 'node_created'",
                (s.session_id,),
            ).fetchone() or (0,)
            assert nodes == pairs and events == pairs, (s.session_id, nodes, events)


def raw_ceiling(home: Path) -> float:
    """Plain sqlite3, the writer's pragmas, the same rows, 1,000-pair transactions."""
    home.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(home / "raw.sqlite", isolation_level=None)
    configure(conn)
    sid = new_session_id()
    create_session_tables(conn, sid)
    content = json.dumps([{"type": "text", "text": "hello 1234"}], separators=(",", ":"))
    now = "2026-11-29T00:00:00.000000+00:00"
    nodes, events = nodes_table(sid), events_table(sid)
    t0 = time.perf_counter()
    for start in range(0, RAW_PAIRS, 1000):
        conn.execute("BEGIN IMMEDIATE")
        for i in range(start, start + 1000):
            node_id = f"node_{i:016x}"
            cur = conn.execute(
                f"INSERT INTO {nodes} (node_seq, node_id, parent_id, agent_id, run_id, role, "
                "node_type, content_json, metadata_json, token_count, created_at) "
                "VALUES (NULL, ?, NULL, 'agent_x', NULL, 'user', 'message', ?, NULL, NULL, ?)",
                (node_id, content, now),
            )
            assert cur.lastrowid
            conn.execute(
                f"INSERT INTO {events} (seq, event_id, run_seq, agent_id, run_id, level, "
                "event_type, node_id, tool_call_id, payload_json, created_at) "
                "VALUES (NULL, ?, NULL, 'agent_x', NULL, 'info', 'node_created', ?, NULL, NULL, ?)",
                (f"evt_{i:016x}", node_id, now),
            )
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    conn.close()
    return RAW_PAIRS / elapsed


def preload_sessions(home: Path, count: int) -> dict[int, list[str]]:
    """Create ``count`` sessions' rows and tables directly; return session ids per shard."""
    layout = open_catalog(home / "sessions.sqlite")
    by_shard: dict[int, list[str]] = {}
    for _ in range(count):
        sid = new_session_id()
        by_shard.setdefault(layout.shard_of(sid), []).append(sid)
    now = "2026-11-29T00:00:00.000000+00:00"
    for shard, sids in by_shard.items():
        conn = sqlite3.connect(layout.path(shard), isolation_level=None)
        configure(conn)
        conn.execute("BEGIN IMMEDIATE")
        for sid in sids:
            conn.execute(
                "INSERT INTO sessions (session_id, account_id, cwd, root_agent_id, status, "
                "created_at, updated_at) VALUES (?, 'acct_bench', '/tmp', 'agent_x', 'active', ?, ?)",
                (sid, now, now),
            )
            create_session_tables(conn, sid)
        conn.execute("COMMIT")
        conn.close()
    return by_shard


async def many_sessions(url: str, home: Path, count: int) -> dict[str, float]:
    """Create-session latency and query-after-create latency with ``count`` sessions present."""
    names = BusNames(f"b{new_id('cmd')[-8:]}")
    t0 = time.perf_counter()
    by_shard = preload_sessions(home, count)
    setup_s = time.perf_counter() - t0
    writer = WriterProcess(home, url, names, None)
    layout = open_catalog(home / "sessions.sqlite")
    rng = random.Random(count)
    creates: list[float] = []
    queries: list[float] = []
    try:
        async with Client(url, names) as client:
            await _ready(client)
            # Warm the reader's connections of every shard once, as a running service would be.
            for sids in by_shard.values():
                await client.query(ListEvents(session_id=sids[0]))
            for _ in range(CREATES):
                s = create_session()
                t = time.perf_counter()
                assert (await client.send(s)).ok
                creates.append(time.perf_counter() - t)
                neighbour = rng.choice(by_shard[layout.shard_of(s.session_id)])
                t = time.perf_counter()
                reply = await client.query(ListEvents(session_id=neighbour))
                queries.append(time.perf_counter() - t)
                assert reply.ok and reply.data is not None
    finally:
        writer.stop()
    return {
        "create_p50_ms": statistics.median(creates) * 1000,
        "create_p99_ms": _pct(creates, 99) * 1000,
        "query_p99_ms": _pct(queries, 99) * 1000,
        "query_max_ms": max(queries) * 1000,
        "setup_s": setup_s,
    }


@contextlib.asynccontextmanager
async def _valkey() -> AsyncIterator[tuple[str, Path]]:
    """A private Valkey (no AOF) and a scratch directory: ``(url, base)``."""
    with tempfile.TemporaryDirectory(prefix="bench-sw-") as tmp:
        base = Path(tmp)
        valkey = EmbeddedValkey(base / "valkey", appendonly=False)
        (base / "valkey").mkdir()
        valkey.start()
        try:
            yield valkey.url, base
        finally:
            valkey.stop()


def _saturation(sat: dict[str, float]) -> dict[str, Any]:
    return {
        "saturated_pairs_per_s": round(sat["pairs_per_s"]),
        "writer_cpu_us_per_command": round(sat["writer_cpu_us_per_command"], 1),
        "writer_process_cpu_us_per_command": round(sat["writer_process_cpu_us_per_command"], 1),
        "index_process_cpu_us_per_command": round(
            sat["writer_cpu_us_per_command"] - sat["writer_process_cpu_us_per_command"], 1
        ),
        "writer_busy_saturated": round(sat["writer_busy"], 2),
    }


async def main() -> dict[str, Any]:
    async with _valkey() as (url, base):
        g16 = await storm(url, base / "g16", 16, PAIRS_16, None)
        g1 = await storm(url, base / "g1", 1, PAIRS_1, None)
        sat = await backlog(url, base / "sat", BACKLOG_SESSIONS, BACKLOG_PAIRS)
        closed = await storm(url, base / "closed", SATURATING_PRODUCERS, PAIRS_SATURATED, None)
        per = await storm(url, base / "per", 16, PAIRS_PER_COMMAND_16, 1)
        raw = raw_ceiling(base / "raw")
        k1 = await many_sessions(url, base / "s1k", 1_000)
        k10 = await many_sessions(url, base / "s10k", 10_000)
    return {
        "group_commit_pairs_per_s_16": round(g16["pairs_per_s"]),
        "group_commit_pairs_per_s_1": round(g1["pairs_per_s"]),
        "per_command_pairs_per_s_16": round(per["pairs_per_s"]),
        **_saturation(sat),
        "closed_loop_pairs_per_s_128": round(closed["pairs_per_s"]),
        "closed_loop_writer_cpu_us_per_command_128": round(closed["writer_cpu_us_per_command"], 1),
        "writer_cpu_us_per_command_16": round(g16["writer_cpu_us_per_command"], 1),
        "raw_ceiling_pairs_per_s": round(raw),
        "group_commit_vs_raw": round(g16["pairs_per_s"] / raw, 3),
        "group_commit_vs_per_command_16": round(g16["pairs_per_s"] / per["pairs_per_s"], 2),
        "receipt_p50_ms_16": round(g16["p50_ms"], 2),
        "receipt_p99_ms_16": round(g16["p99_ms"], 2),
        "receipt_p50_ms_1": round(g1["p50_ms"], 2),
        "per_command_receipt_p99_ms_16": round(per["p99_ms"], 2),
        "create_session_p50_ms_1k": round(k1["create_p50_ms"], 2),
        "create_session_p99_ms_1k": round(k1["create_p99_ms"], 2),
        "query_p99_ms_after_create_1k": round(k1["query_p99_ms"], 2),
        "create_session_p50_ms_10k": round(k10["create_p50_ms"], 2),
        "create_session_p99_ms_10k": round(k10["create_p99_ms"], 2),
        "query_p99_ms_after_create_10k": round(k10["query_p99_ms"], 2),
        "query_max_ms_after_create_10k": round(k10["query_max_ms"], 2),
        "setup_10k_sessions_s": round(k10["setup_s"], 1),
        "shards": 64,
        "synchronous": SYNCHRONOUS,
    }


async def quick() -> dict[str, Any]:
    """The saturated backlog alone (for side-by-side comparisons)."""
    async with _valkey() as (url, base):
        return _saturation(await backlog(url, base / "sat", BACKLOG_SESSIONS, BACKLOG_PAIRS))


async def beside_postgres(partitions: int | None) -> dict[str, Any]:
    """The saturated backlog on SQLite, then on PostgreSQL, in one run; with ``partitions``,
    then one writer pinned to core 0 (one partition) and two writers pinned to cores 0 and 1
    sharing ``partitions``, each phase on a database of its own."""
    cluster = start_cluster(durable=True)
    postmaster = int((cluster.data_dir / "postmaster.pid").read_text().split()[0])
    try:
        async with _valkey() as (url, base):
            lite = await backlog(url, base / "lite", BACKLOG_SESSIONS, BACKLOG_PAIRS)
            pg = await backlog(
                url,
                base / "pg",
                BACKLOG_SESSIONS,
                BACKLOG_PAIRS,
                cluster.create_database("bench"),
                server_pid=postmaster,
            )
            if partitions is not None:
                one = await backlog(
                    url,
                    base / "one",
                    BACKLOG_SESSIONS,
                    BACKLOG_PAIRS,
                    cluster.create_database("bench_one"),
                    cores=[0],
                    server_pid=postmaster,
                )
                shared = await backlog(
                    url,
                    base / "shared",
                    BACKLOG_SESSIONS,
                    BACKLOG_PAIRS,
                    cluster.create_database("bench_shared"),
                    partitions=partitions,
                    cores=[0, 1],
                    server_pid=postmaster,
                )
    finally:
        cluster.stop()
    out: dict[str, Any] = {
        "sqlite": _saturation(lite),
        "postgres": {
            **_saturation(pg),
            "server_cpu_us_per_command": round(pg["server_cpu_us_per_command"], 1),
        },
        "postgres_vs_sqlite_pairs_per_s": round(pg["pairs_per_s"] / lite["pairs_per_s"], 2),
    }
    if partitions is not None:
        key = f"postgres_partitions_{partitions}"
        out |= {
            "postgres_one_writer_pinned_pairs_per_s": round(one["pairs_per_s"]),
            f"{key}_pairs_per_s": round(shared["pairs_per_s"]),
            f"partitions_{partitions}_vs_one": round(shared["pairs_per_s"] / one["pairs_per_s"], 2),
            **_cpu_keys("postgres_one_writer_pinned", one),
            **_cpu_keys(key, shared),
        }
        for i, w in enumerate(shared["writers"]):
            out[f"{key}_writer{i}_cpu_us_per_command"] = round(w["cpu_us_per_command"], 1)
            out[f"{key}_writer{i}_busy"] = round(w["busy"], 2)
            out[f"{key}_writer{i}_commands"] = w["commands"]
    return out


def _cpu_keys(key: str, phase: dict[str, Any]) -> dict[str, float]:
    """A PostgreSQL phase's CPU per command: the writers', the server's and their sum (on two
    cores the sum is what bounds the rate)."""
    writers, server = phase["writer_cpu_us_per_command"], phase["server_cpu_us_per_command"]
    return {
        f"{key}_writer_cpu_us_per_command": round(writers, 1),
        f"{key}_server_cpu_us_per_command": round(server, 1),
        f"{key}_total_cpu_us_per_command": round(writers + server, 1),
    }


def _option(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args[:-1] else None


if __name__ == "__main__":
    args = sys.argv[1:]
    if _option(args, "--backend") == "postgres":
        count = _option(args, "--partitions")
        partitions = None if count is None else int(count)
        if partitions is not None and (partitions < 2 or partitions % 2):
            sys.exit("--partitions must be an even number, 2 or more (two writers share them)")
        print(json.dumps(asyncio.run(beside_postgres(partitions))))
    else:
        print(json.dumps(asyncio.run(quick() if "--quick" in args else main())))
