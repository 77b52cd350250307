"""Idle leased lanes for the multi-host benches: sessions with a run queued whose lease a parked
worker holds, the load a sweep must not keep paying for (``bench/scale.py``'s ``*_idle`` keys).

Written against the bus of the revision being measured: ``make bench-compare`` runs the bench
on older revisions, whose lanes were kept in one due set or a plain set, so both are handled.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from helpers.cluster_meter import bus_client
from redis.asyncio import Redis

from agent_core.bus import Bus, BusNames
from agent_core.ids import new_id, new_session_id
from agent_core.runqueue import QueuedRun, SessionQueue

if TYPE_CHECKING:
    from tests.multinode.cluster import Cluster

__all__ = ["PARKED_TOKEN", "park_lanes", "unpark_lanes"]

PARKED_TOKEN = "parked-worker"


async def park_lanes(cl: Cluster, n: int) -> list[str]:
    """``n`` lanes with a run queued, each leased for ten minutes by a worker that is parked
    (alive, holding them, doing nothing): the sessions a sweep must not keep paying for."""
    bus = Bus(bus_client(cl))
    redis = bus.redis
    queue = SessionQueue(bus, BusNames(cl.namespace))
    lanes = [new_session_id() for _ in range(n)]
    try:
        for lane in lanes:
            assert await queue.acquire(lane, PARKED_TOKEN, 600_000)
            run = QueuedRun(
                run_id=new_id("run"),
                session_id=lane,
                account_id="dev",
                agent_id=new_id("agent"),
                start_node_id=new_id("node"),
            )
            await queue.enqueue(run)
        await _settled(redis, BusNames(cl.namespace))
    finally:
        await bus.aclose()
    return lanes


async def _settled(redis: Redis, names: BusNames) -> None:
    """Until the sweeps have met every parked lane once (found it leased, put it off until the
    lease runs out): what is measured next is the steady state, not that first pass. (Older
    revisions kept a plain set that every sweep reads whole: no first pass to wait for.)"""
    # The buckets' due sets (today), or the one due set before them.
    buckets = list(getattr(names, "all_lanes_due", ()))
    dues = buckets if buckets else [names.key("sessions", "due")]
    if not buckets and await redis.type(dues[0]) not in (b"zset", "zset"):
        await asyncio.sleep(3.0)  # the nudges read, a few sweeps run
        return
    deadline = time.monotonic() + 120

    async def due_now() -> int:
        now = int(time.time() * 1000)
        return sum([int(await redis.zcount(due, "-inf", now)) for due in dues])

    while await due_now() > 0:
        if time.monotonic() > deadline:
            raise RuntimeError("the parked lanes were never all put off")
        await asyncio.sleep(0.2)
    await asyncio.sleep(1.0)  # the nudges read


async def unpark_lanes(cl: Cluster, lanes: list[str]) -> None:
    names = BusNames(cl.namespace)
    redis = bus_client(cl)
    try:
        # Not one transaction: on a Cluster the lanes' keys live on every shard.
        async with redis.pipeline(transaction=False) as pipe:
            for lane in lanes:
                pipe.delete(names.session_fifo(lane))
                # Whichever list of lanes with work this version keeps (a sorted set, before it
                # a plain set): the bench also measures older revisions.
                pipe.zrem(names.key("sessions", "due"), lane)
                if hasattr(names, "lanes_due"):  # the buckets' due sets
                    pipe.zrem(names.lanes_due(lane), lane)
                pipe.srem(names.key("sessions", "pending"), lane)
                pipe.delete(names.session_lease(lane))
            await pipe.execute()
    finally:
        await redis.aclose()
