"""Running a StreamConsumer against the real server inside a test."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from pydantic import TypeAdapter
from redis.asyncio import Redis

from agent_core.bus import (
    Bus,
    BusNames,
    ConsumerOptions,
    DeadLetterSink,
    Delivery,
    StreamConsumer,
    drain_own,
    reclaim_loop,
)


def make_consumer(
    bus: Bus,
    names: BusNames,
    stream: str,
    adapter: TypeAdapter[Any],
    handler: Callable[[Any, Delivery], Any],
    *,
    name: str = "c1",
    group: str = "g",
    options: ConsumerOptions | None = None,
) -> StreamConsumer[Any]:
    """A consumer of ``stream`` whose dead letters go to the test's namespace."""
    options = options or ConsumerOptions(max_records=4, min_idle_ms=300, claim_interval_s=0.1)
    return StreamConsumer(
        stream=stream,
        group=group,
        consumer=name,
        adapter=adapter,
        dead_letters=DeadLetterSink(bus.redis, names.dead_letter),
        bus=bus,
        handler=handler,
        options=options,
    )


@contextlib.asynccontextmanager
async def running(redis_url: str, *consumers: StreamConsumer[Any]) -> AsyncIterator[None]:
    """Groups created, own PEL drained, reading and reclaim loops running."""
    for c in consumers:
        await c.ensure_group()
    for c in consumers:
        await drain_own(c)
    for c in consumers:
        c.start_reading()
    stop = asyncio.Event()
    loops = [asyncio.create_task(reclaim_loop(c, stop)) for c in consumers]
    try:
        yield
    finally:
        stop.set()
        await asyncio.gather(*loops)
        await asyncio.gather(*(c.stop_reading(2) for c in consumers))


async def dead_letters(redis: Redis, names: BusNames) -> list[dict[str, Any]]:
    """All dead letters of the test's namespace, oldest first."""
    entries = await redis.xrange(names.dead_letter)
    return [json.loads(fields[b"data"]) for _, fields in entries]


async def wait_for(predicate: Callable[[], Any], timeout_s: float = 10.0) -> None:
    """Poll an (async or sync) predicate until it is truthy; fail the test on timeout."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)
