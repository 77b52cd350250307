"""The lean Cluster calls (``agent_core.bus.cluster_calls``) on a real three-primary Cluster:
routing by slot, ``MOVED`` after a slot migrated, ``ASK`` during a migration, and a primary's
failover. The suites of ``test_topologies.py`` run the services' calls through it as well."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest
import redis as sync_redis
from redis.crc import key_slot

from agent_core.bus import Bus, BusNames
from agent_core.bus.cluster_calls import ClusterCalls
from agent_core.bus.connection import connect_bus
from agent_core.runqueue import SessionQueue
from tests.engines.valkey_topologies import ClusterSet, Server, running_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterSet]:
    with running_cluster(tmp_path_factory.mktemp("cluster")) as started:
        yield started


async def _bus(cluster: ClusterSet) -> Bus:
    return Bus(connect_bus(cluster.url, topology="cluster"))


@pytest.fixture
async def bus(cluster: ClusterSet) -> AsyncIterator[Bus]:
    made = await _bus(cluster)
    yield made
    await made.aclose()


def _lean(bus: Bus) -> ClusterCalls:
    calls = bus.calls
    assert isinstance(calls, ClusterCalls), "a plain Cluster must get the lean calls"
    return calls


def _owner(cluster: ClusterSet, slot: int) -> Server:
    """The primary that serves ``slot`` now, as the cluster says."""
    with cluster.servers[0].client() as client:
        for start, end, primary, *_ in client.execute_command("CLUSTER", "SLOTS"):
            if int(start) <= slot <= int(end):
                return next(s for s in cluster.servers if s.port == int(primary[1]))
    raise AssertionError(f"slot {slot} unserved")


def _primaries(cluster: ClusterSet) -> list[Server]:
    with cluster.servers[0].client() as client:
        ports = {int(p[1]) for _, _, p, *_ in client.execute_command("CLUSTER", "SLOTS")}
    return [s for s in cluster.servers if s.port in ports]


def _id(server: Server) -> str:
    with server.client() as client:
        return str(client.execute_command("CLUSTER", "MYID").decode())


async def test_commands_go_to_their_slots_node_and_replies_keep_their_order(
    cluster: ClusterSet, bus: Bus
) -> None:
    calls = _lean(bus)
    keys = [f"route:{{t{i}}}" for i in range(12)]
    assert len({_owner(cluster, key_slot(k.encode())).port for k in keys}) == 3
    for i, key in enumerate(keys):
        await calls.execute("SET", key, f"v{i}")
    replies = await calls.execute_many([["GET", k] for k in keys])
    assert replies == [f"v{i}".encode() for i in range(len(keys))]
    for i, key in enumerate(keys):  # each key lives on its slot's primary
        with _owner(cluster, key_slot(key.encode())).client() as node:
            assert node.execute_command("GET", key) == f"v{i}".encode()
    assert len(calls._nodes) >= 3 and calls.moved == 0 and calls.asked == 0
    await calls.transaction(
        [["SET", "route:{tx}:a", "1"], ["SET", "route:{tx}:b", "2"]],
        then=[["SET", "route:{other}", "3"]],
    )
    assert await calls.execute_many([["GET", "route:{tx}:b"], ["GET", "route:{other}"]]) == [
        b"2",
        b"3",
    ]


class _Refuse:
    """A stand-in for the redis-py cluster client that fails the test if a call reaches it."""

    async def execute(self, *args: object) -> object:
        raise AssertionError(f"sent to the redis-py cluster client: {args!r}")

    async def execute_many(self, commands: object, **_: object) -> object:
        raise AssertionError(f"sent to the redis-py cluster client: {commands!r}")

    async def transaction(self, commands: object, **_: object) -> object:
        raise AssertionError(f"a transaction sent to the redis-py cluster client: {commands!r}")


async def test_the_services_commands_are_routed_by_their_key(bus: Bus) -> None:
    """Every command the services send through ``Bus.calls`` by name is in the key table, so
    it goes on the lean sockets, which retry through a failover. The run queue's ``LREM`` (a
    run's end) once went to redis-py's client instead, and failed there during a failover."""
    calls = _lean(bus)
    fallback, calls.fallback = calls.fallback, _Refuse()
    try:
        await calls.execute("RPUSH", "lane:{k1}", "a", "b")
        assert await calls.execute("LREM", "lane:{k1}", 0, "a") == 1
        assert await calls.execute("EXISTS", "lane:{k1}") == 1
        assert await calls.execute("LRANGE", "lane:{k1}", 0, -1) == [b"b"]
        # a claim's prelude: a transaction of EXISTS, INCR and EXPIRE on one run's keys (its
        # INCR once sent every claim to redis-py's cluster transactions, a thread per call)
        queue = SessionQueue(bus, BusNames("routed"))
        assert await queue.claim_prelude("run_routed") == (False, 1)
        await queue.request_cancel("run_routed")
        assert await queue.claim_prelude("run_routed") == (True, 2)
    finally:
        calls.fallback = fallback


def _getkeys_calls(cluster: ClusterSet) -> int:
    """``COMMAND GETKEYS`` calls every node of the cluster has served so far."""
    calls = 0
    for server in cluster.servers:
        with server.client() as node:
            stats = node.info("commandstats")
            calls += int(stats.get("cmdstat_command|getkeys", {}).get("calls", 0))
    return calls


async def test_stream_reads_on_redis_pys_cluster_client_ask_no_node_for_their_keys(
    cluster: ClusterSet, bus: Bus
) -> None:
    """A consumer's ``XREADGROUP`` and a follower's ``XREAD`` go through redis-py's cluster
    client; their keys come from the command, not from ``COMMAND GETKEYS`` on a node (two round
    trips before every read, which redis-py makes for keys that follow ``STREAMS``)."""
    redis = bus.redis
    streams = [f"reads:{{r{i}}}" for i in range(6)]
    assert len({_owner(cluster, key_slot(k.encode())).port for k in streams}) == 3
    for stream in streams:
        await redis.xgroup_create(stream, "g", id="0", mkstream=True)
        await redis.xadd(stream, {"data": stream})
    before = _getkeys_calls(cluster)
    for stream in streams:
        read = await redis.xreadgroup("g", "c", {stream: ">"}, count=10, block=10)
        assert read[0][1][0][1] == {b"data": stream.encode()}
        tail = await redis.xread({stream: "0-0"}, count=10, block=10)
        assert tail[0][1][0][1] == {b"data": stream.encode()}
    assert await redis.xreadgroup("g", "c", {streams[0]: ">"}, count=10, block=10) in ([], None)
    assert _getkeys_calls(cluster) == before


def _migrating(cluster: ClusterSet, key: str) -> tuple[int, Server, Server]:
    """Mark ``key``'s slot as migrating from its owner to another primary; move ``key``."""
    slot = key_slot(key.encode())
    source = _owner(cluster, slot)
    target = next(s for s in _primaries(cluster) if s.port != source.port)
    with target.client() as t, source.client() as s:
        t.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", _id(source))
        s.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", _id(target))
        s.execute_command("MIGRATE", target.host, target.port, key, 0, 5000)
    return slot, source, target


def _finish(cluster: ClusterSet, slot: int, target: Server) -> None:
    """Give ``slot`` to ``target`` on every primary (the end of a migration)."""
    target_id = _id(target)
    for server in [target, *(s for s in _primaries(cluster) if s.port != target.port)]:
        with server.client() as client:
            client.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)


async def test_a_slot_migrated_is_followed_after_moved(cluster: ClusterSet, bus: Bus) -> None:
    calls = _lean(bus)
    key = "moved:{m1}"
    await calls.execute("SET", key, "before")  # the map is read: the slot's old owner
    slot, _, target = _migrating(cluster, key)
    _finish(cluster, slot, target)
    assert await calls.execute("GET", key) == b"before"
    assert calls.moved >= 1
    await calls.execute_many([["SET", key, "after"], ["SET", "moved:{other}", "x"]])
    with target.client() as node:
        assert node.execute_command("GET", key) == b"after"


async def test_a_slot_being_migrated_is_asked_on_the_importing_node(
    cluster: ClusterSet, bus: Bus
) -> None:
    calls = _lean(bus)
    key, new = "ask:{a1}", "ask:{a1}:new"
    await calls.execute("SET", key, "moving")
    slot, source, target = _migrating(cluster, key)
    try:
        # The source still owns the slot: it answers ASK for keys it no longer holds.
        assert await calls.execute("GET", key) == b"moving"
        await calls.execute("SET", new, "made")
        assert calls.asked >= 2 and calls.moved == 0
        with target.client() as node:  # both live on the importing node
            assert node.execute_command("ASKING") and node.execute_command("GET", new) == b"made"
    finally:
        _finish(cluster, slot, target)
    assert await calls.execute_many([["GET", key], ["GET", new]]) == [b"moving", b"made"]


async def test_calls_succeed_again_after_a_primary_fails_over(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    with running_cluster(tmp_path_factory.mktemp("cluster")) as cluster:
        bus = await _bus(cluster)
        try:
            calls = _lean(bus)
            key = "failover:{f1}"
            await calls.execute("SET", key, "kept")
            primary = _owner(cluster, key_slot(key.encode()))
            with primary.client() as node:  # the replica has the key before its primary dies
                assert int(node.execute_command("WAIT", 1, 5000)) == 1
            primary.kill()
            # Each call tries for ~3.5 s (redirections, reconnects, the map read again); the
            # replica is promoted within a few node timeouts (one second each here).
            reply: object = None
            seen: list[str] = []
            for _ in range(5):
                try:
                    reply = await calls.execute("GET", key)
                    break
                except (sync_redis.ConnectionError, sync_redis.exceptions.ClusterDownError):
                    await asyncio.sleep(0)
            assert reply == b"kept", seen
            owner = calls._slots[key_slot(key.encode())]
            assert owner is not None and owner[1] != primary.port
            await calls.execute_many([["SET", key, "again"], ["SET", "failover:{g}", "1"]])
            assert await calls.execute("GET", key) == b"again"
        finally:
            await bus.aclose()
