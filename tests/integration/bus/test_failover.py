"""Losing a primary: behind Sentinel and in a Cluster, plain or on TLS, the bus serves again
and loses no run.

Each test starts its own topology (it kills a node of it), once: runs are queued on many lanes,
the replicas have caught up, the primary (of the Sentinel set; of one Cluster shard) is killed
with SIGKILL, and the services' client (``bus_client`` from the ``[bus]`` settings) enqueues
again once the replica is promoted, bounded by the 10 s the issue asks for. Then every lane is
drained through the lease scripts: each run comes out once, none is left queued.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import redis as sync_redis
from redis.exceptions import RedisClusterException, RedisError

from agent_core.bus import Bus, BusNames
from agent_core.config.schema import BusSettings
from agent_core.ids import new_id, new_session_id
from agent_core.runqueue import SessionQueue
from agent_core.service.context import bus_client
from agent_core.types.queued import QueuedRun
from tests.engines.valkey_tls import TlsServer
from tests.engines.valkey_topologies import (
    ClusterSet,
    SentinelSet,
    Server,
    running_cluster,
    start_topology,
)

_LANES = 10
_RUNS_PER_LANE = 5


def _run(lane: str) -> QueuedRun:
    return QueuedRun(
        run_id=new_id("run"),
        session_id=lane,
        account_id="acct",
        agent_id=new_id("agent"),
        start_node_id=new_id("node"),
    )


def _caught_up(primary: Server) -> bool:
    """Whether every replica of ``primary`` acknowledged its whole replication stream."""
    with primary.client() as client:
        info = client.info("replication")
    offset = int(info["master_repl_offset"])
    replicas = [v for k, v in info.items() if k.startswith("slave") and isinstance(v, dict)]
    return bool(replicas) and all(int(r["offset"]) >= offset for r in replicas)


async def _until(predicate: Callable[[], bool]) -> None:
    """Poll ``predicate`` until it holds (10 s at most)."""
    async with asyncio.timeout(10):
        while not predicate():
            await asyncio.sleep(0.05)


def _is_primary(server: Server) -> bool:
    with server.client() as client:
        return bool(client.info("replication")["role"] == "master")


async def _enqueue_until_served(queue: SessionQueue, lane: str) -> QueuedRun:
    """Enqueue one run on ``lane``, retrying while the failover is under way (10 s at most)."""
    run = _run(lane)
    async with asyncio.timeout(10):
        while True:
            try:
                await queue.enqueue(run)
                return run
            except (RedisError, RedisClusterException, OSError):
                await asyncio.sleep(0.1)


async def _drain(queue: SessionQueue, lanes: list[str]) -> list[str]:
    """Every run of ``lanes``, taken through the lease scripts as a worker takes them."""
    taken: list[str] = []
    for lane in lanes:
        start = await queue.start_drain(lane, "survivor", 30_000)
        assert start is not None
        item = start.item
        while item is not None:
            taken.append(item.run.run_id)
            await queue.finish(item)
            item = await queue.take_next(lane, "survivor")
        assert await queue.release_if_idle(lane, "survivor") == 1
    return taken


async def _load(queue: SessionQueue) -> tuple[list[str], list[str]]:
    lanes = [new_session_id() for _ in range(_LANES)]
    runs = [_run(lane) for lane in lanes for _ in range(_RUNS_PER_LANE)]
    await asyncio.gather(*(queue.enqueue(run) for run in runs))
    return lanes, [run.run_id for run in runs]


@pytest.fixture(scope="module", params=["sentinel", "tls_sentinel"])
def sentinel_set(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SentinelSet]:
    kind = str(request.param)
    started = start_topology(kind, Path(tmp_path_factory.mktemp(kind)))
    assert isinstance(started, SentinelSet)
    yield started
    started.stop()


@pytest.fixture(scope="module", params=["cluster", "tls_cluster"])
def cluster_set(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterSet]:
    if request.param == "cluster":
        with running_cluster(tmp_path_factory.mktemp("cluster")) as started:
            yield started
        return
    tls = start_topology("tls_cluster", Path(tmp_path_factory.mktemp("tls_cluster")))
    assert isinstance(tls, ClusterSet)
    yield tls
    tls.stop()


@contextlib.asynccontextmanager
async def _client(settings: dict[str, object]) -> AsyncIterator[Bus]:
    client = Bus(bus_client(BusSettings.model_validate(settings)))
    try:
        yield client
    finally:
        with contextlib.suppress(Exception):
            await client.aclose()


async def test_the_sentinel_primary_lost_the_replica_serves_and_no_run_is_lost(
    sentinel_set: SentinelSet,
) -> None:
    names = BusNames(f"t{secrets.token_hex(5)}")
    async with _client(sentinel_set.bus_settings()) as bus:
        queue = SessionQueue(bus, names)
        lanes, queued = await _load(queue)
        old = sentinel_set.primary()
        await _until(lambda: _caught_up(old))
        old.kill()
        late = await _enqueue_until_served(queue, lanes[0])
        assert sentinel_set.primary() is not old  # the sentinels promoted the replica
        taken = await _drain(queue, lanes)
    assert sorted(taken) == sorted([*queued, late.run_id])  # each run once, none left


async def test_a_cluster_shard_primary_lost_its_replica_serves_and_no_run_is_lost(
    cluster_set: ClusterSet,
) -> None:
    names = BusNames(f"t{secrets.token_hex(5)}")
    async with _client(cluster_set.bus_settings()) as bus:
        queue = SessionQueue(bus, names)
        lanes, queued = await _load(queue)
        primaries = [s for s in cluster_set.servers if _is_primary(s)]
        await _until(lambda: all(_caught_up(p) for p in primaries))
        # The primary of the first lane's slot: the lane's keys must move to its replica.
        seed = cluster_set.servers[0]
        tls = seed.tls_kwargs() if isinstance(seed, TlsServer) else {}
        with sync_redis.RedisCluster(host="127.0.0.1", port=seed.port, **tls) as probe:
            port = probe.get_node_from_key(names.session_fifo(lanes[0])).port
        lost = next(s for s in cluster_set.servers if s.port == port)
        lost.kill()
        late = await _enqueue_until_served(queue, lanes[0])
        taken = await _drain(queue, lanes)
    assert sorted(taken) == sorted([*queued, late.run_id])  # each run once, none left
