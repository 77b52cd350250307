"""Control and reply channels on sharded Pub/Sub on a Cluster, classic Pub/Sub on one node.

On a three-primary Cluster (started once for the module) a run's cancel and an RPC reply are
published with ``SPUBLISH`` and heard through ``SSUBSCRIBE``: the test's own listener subscribes
with ``SSUBSCRIBE`` only (a classic ``PUBLISH`` never reaches it), and ``PUBSUB SHARDNUMSUB`` on
the channel's shard counts the services' subscriptions. The run-worker's flag poll, the safety net
that would cancel a run without any signal, is turned off, so a run that stops was stopped by the
signal. On the standalone Valkey every other test shares, the same cancel still arrives through
the worker's classic pattern subscription.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from redis.asyncio import Redis, RedisCluster

from agent_core.bus import Bus, BusNames, Delivery, RpcClient
from agent_core.bus.contracts.health import HEALTH_MESSAGE, HealthPing, HealthReply
from agent_core.bus.delivery import decode_reply
from agent_core.config import load_settings
from agent_core.config.schema import BusSettings
from agent_core.ids import new_id
from agent_core.runqueue import SessionQueue
from agent_core.runtime import RunningRuns
from agent_core.service import ServiceContext
from agent_core.service.context import bus_client
from services.run_worker import worker as worker_module
from services.run_worker.worker import RunWorker
from tests.engines.valkey_topologies import Topology, running_cluster
from tests.integration.bus.helpers import make_consumer, running
from tests.waiting import HangGuard

_GUARD_S = 20.0  # a hang guard, far beyond what any wait here takes


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topology]:
    with running_cluster(tmp_path_factory.mktemp("cluster")) as started:
        yield started


@pytest.fixture
async def cluster_bus(cluster: Topology) -> AsyncIterator[Bus]:
    """The services' bus client of the Cluster (from its ``[bus]`` settings)."""
    bus = Bus(bus_client(BusSettings.model_validate(cluster.bus_settings())))
    yield bus
    await bus.aclose()


@pytest.fixture
def cluster_redis(cluster_bus: Bus) -> Redis:
    """The redis-py client of :func:`cluster_bus`."""
    return cluster_bus.redis


async def _shard_subscribers(redis: Redis, channel: str) -> int:
    """``PUBSUB SHARDNUMSUB`` of ``channel`` on the node of its slot."""
    cluster = cast(RedisCluster, redis)
    await cluster.initialize()  # the slot map (a no-op once read)
    node = cluster.get_node_from_key(channel)
    reply = await cluster.execute_command("PUBSUB SHARDNUMSUB", channel, target_nodes=node)
    return int(dict(reply)[channel.encode()])


async def _until(check: Any, waiting_for: str) -> None:
    guard = HangGuard(_GUARD_S, waiting_for)
    while not await check():
        guard.check()
        await asyncio.sleep(0.02)


class _ShardListener:
    """The test's own ``SSUBSCRIBE``-only subscriber of one channel on a Cluster."""

    def __init__(self, redis: Redis, channel: str) -> None:
        assert isinstance(redis, RedisCluster)
        self.pubsub = redis.pubsub()
        self.channel = channel

    async def __aenter__(self) -> _ShardListener:
        await self.pubsub.ssubscribe(self.channel)
        first = await self.next(ignore_subscribe_messages=False)
        assert first["type"] == "ssubscribe"
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.pubsub.aclose()

    async def next(self, *, ignore_subscribe_messages: bool = True) -> dict[str, Any]:
        guard = HangGuard(_GUARD_S, f"a message on {self.channel} through SSUBSCRIBE")
        while True:
            message = await self.pubsub.get_sharded_message(
                ignore_subscribe_messages=ignore_subscribe_messages, timeout=0.1
            )
            if message is not None:
                return message
            guard.check()


async def test_an_rpc_reply_on_a_cluster_travels_on_its_shard(
    cluster: Topology, cluster_bus: Bus, cluster_redis: Redis, names: BusNames
) -> None:
    async def handler(message: Any, _: Delivery) -> HealthReply:
        return HealthReply(service="svc", instance="0", ok=True, nonce=message.nonce)

    stream = names.health("svc")
    channel = names.reply_channel(f"tester-{secrets.token_hex(3)}")
    consumer = make_consumer(cluster_bus, names, stream, HEALTH_MESSAGE, handler)
    rpc = RpcClient(cluster_bus, channel)
    await rpc.start()
    try:
        # The requester's subscription is a sharded one, on the channel's shard.
        assert await _shard_subscribers(cluster_redis, channel) == 1
        async with _ShardListener(cluster_redis, channel) as heard, running(cluster.url, consumer):
            reply = await rpc.request(
                HealthPing(nonce="n1"), stream=stream, reply=HealthReply, timeout_s=10
            )
            assert reply.nonce == "n1"
            # The same reply reached a subscriber that only SSUBSCRIBEd: it was SPUBLISHed.
            message = await heard.next()
            assert message["type"] == "smessage"
            _, body = decode_reply(message["data"])
            assert HealthReply.model_validate_json(body).nonce == "n1"
    finally:
        await rpc.stop()


async def _worker(
    redis_url: str, names: BusNames, home: Path, config: str, runs: RunningRuns | None = None
) -> RunWorker:
    """A run-worker whose executor is only its runs' registry (what a cancel reaches)."""
    (home / "config.toml").write_text(config)
    settings = load_settings(
        env={
            "SOONG_AGENT_HOME": str(home),
            "SOONG_REDIS_URL": redis_url,
            "SOONG_NAMESPACE": names.namespace,
        }
    )
    ctx = ServiceContext(settings, "run_worker", f"t-{secrets.token_hex(3)}")
    queue = SessionQueue(ctx.bus, ctx.names)
    runs = runs if runs is not None else RunningRuns()
    executor: Any = type("Runs", (), {"runs": runs, "cancel": staticmethod(runs.cancel)})()
    return RunWorker(ctx, queue, executor)


async def _forever() -> Any:
    await asyncio.Event().wait()


async def _cancelled_by_signal(
    worker: RunWorker,
    queue: SessionQueue,
    run_id: str,
    *,
    subscribed: Callable[[], Awaitable[bool]],
    dropped: Callable[[], Awaitable[bool]] | None = None,
) -> None:
    """Register ``run_id`` on ``worker``, wait for ``subscribed()``, cancel the run through the
    queue and see its task end cancelled; the worker's flag poll is off (the caller's
    monkeypatch), so only the signal can have ended it. Then the run ends (unregisters) and,
    with ``dropped``, that is awaited while the worker still listens."""
    task: asyncio.Task[Any] = asyncio.create_task(_forever())
    worker.executor.runs.register(run_id, task)
    stop = asyncio.Event()
    listener = asyncio.create_task(worker.listen_for_cancels(stop))
    try:
        await _until(subscribed, f"the worker's subscription for {run_id}")
        guard = HangGuard(_GUARD_S, f"the cancel signal of {run_id}")
        await queue.request_cancel(run_id)
        while not task.done():
            guard.check()
            if dropped is None:  # a pattern subscription cannot be seen: a signal may come early
                await queue.request_cancel(run_id)
            await asyncio.wait({task}, timeout=0.1)
        assert task.cancelled()
        worker.executor.runs.unregister(run_id)
        if dropped is not None:
            await _until(dropped, f"the worker to drop the channel of {run_id}, which ended")
    finally:
        worker.executor.runs.unregister(run_id)
        task.cancel()
        stop.set()
        await listener


async def test_a_cancel_on_a_cluster_reaches_the_worker_on_the_run_shard(
    cluster: Topology,
    cluster_bus: Bus,
    cluster_redis: Redis,
    names: BusNames,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(worker_module, "_CANCEL_POLL_S", 3600.0)  # the signal only
    worker = await _worker(cluster.url, names, tmp_path, '[bus]\ntopology = "cluster"\n')
    queue = SessionQueue(cluster_bus, names)
    run_id = new_id("run")
    channel = names.run_control(run_id)
    # The control channel shares the slot of the run's cancel flag (one node, in order).
    slot = cast(RedisCluster, cluster_redis).keyslot
    assert slot(channel) == slot(names.run_cancel(run_id))

    async def subscribers(expected: int) -> bool:
        return await _shard_subscribers(cluster_redis, channel) == expected

    try:
        await _cancelled_by_signal(
            worker,
            queue,
            run_id,
            subscribed=lambda: subscribers(1),
            dropped=lambda: subscribers(0),
        )
        # A cancel is heard by a subscriber that only SSUBSCRIBEd: it was SPUBLISHed.
        other = new_id("run")
        async with _ShardListener(cluster_redis, names.run_control(other)) as heard:
            await queue.request_cancel(other)
            message = await heard.next()
        assert (message["type"], message["data"]) == ("smessage", b"cancel")
    finally:
        await worker.ctx.bus.aclose()


class _CountedRuns(RunningRuns):
    """A registry that counts how often the list of its runs is read."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    @property
    def run_ids(self) -> list[str]:
        self.reads += 1
        return super().run_ids


async def test_the_cluster_listener_follows_runs_as_they_register_and_leave(
    cluster: Topology,
    cluster_bus: Bus,
    cluster_redis: Redis,
    names: BusNames,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Runs that register while the listener runs, on two shards: each control channel is
    subscribed when its run registers and dropped when it leaves, the other's staying; a run
    that registers and leaves at once ends with no subscription; and the listener never
    rescans the running runs (it reads their list once, when it starts)."""
    monkeypatch.setattr(worker_module, "_CANCEL_POLL_S", 3600.0)  # the signal only
    runs = _CountedRuns()
    worker = await _worker(cluster.url, names, tmp_path, '[bus]\ntopology = "cluster"\n', runs)
    queue = SessionQueue(cluster_bus, names)
    cluster_client = cast(RedisCluster, cluster_redis)
    await cluster_client.initialize()

    def node_of(run_id: str) -> str:
        return str(cluster_client.get_node_from_key(names.run_control(run_id)).name)

    first = new_id("run")
    second = new_id("run")
    while node_of(second) == node_of(first):  # the two runs' channels on two shards
        second = new_id("run")

    def subscribers(run_id: str, expected: int) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            return await _shard_subscribers(cluster_redis, names.run_control(run_id)) == expected

        return check

    async def started_up() -> bool:
        return runs.reads > 0

    tasks = {run_id: asyncio.create_task(_forever()) for run_id in (first, second)}
    stop = asyncio.Event()
    listener = asyncio.create_task(worker.listen_for_cancels(stop))
    try:
        await _until(started_up, "the listener to read the runs registered when it starts")
        reads_at_start = runs.reads
        runs.register(first, tasks[first])
        await _until(subscribers(first, 1), f"the subscription for {first}")
        runs.register(second, tasks[second])
        await _until(subscribers(second, 1), f"the subscription for {second}")

        await queue.request_cancel(second)
        await asyncio.wait({tasks[second]}, timeout=_GUARD_S)
        assert tasks[second].cancelled()
        assert not tasks[first].done()
        runs.unregister(second)
        await _until(subscribers(second, 0), f"the worker to drop the channel of {second}")
        assert await subscribers(first, 1)()

        brief = new_id("run")  # registers and leaves before the listener can act on it
        runs.register(brief, asyncio.create_task(_forever()))
        runs.cancel(brief)
        runs.unregister(brief)
        await queue.request_cancel(first)
        await asyncio.wait({tasks[first]}, timeout=_GUARD_S)
        assert tasks[first].cancelled()
        runs.unregister(first)
        await _until(subscribers(first, 0), f"the worker to drop the channel of {first}")
        assert await subscribers(brief, 0)()

        assert runs.reads == reads_at_start  # followed through the watch, never rescanned
    finally:
        for task in tasks.values():
            task.cancel()
        stop.set()
        await listener
        await worker.ctx.bus.aclose()


async def test_a_cancel_on_one_node_reaches_the_worker_through_its_pattern(
    redis_url: str,
    bus: Bus,
    names: BusNames,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(worker_module, "_CANCEL_POLL_S", 3600.0)  # the signal only
    worker = await _worker(redis_url, names, tmp_path, "")
    queue = SessionQueue(bus, names)

    async def subscribed() -> bool:  # a pattern subscription has no count of its own
        return True

    try:
        await _cancelled_by_signal(worker, queue, new_id("run"), subscribed=subscribed)
    finally:
        await worker.ctx.bus.aclose()
