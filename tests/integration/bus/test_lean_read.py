"""A consumer on a single plain-TCP node reads its stream on a lean socket of its own: the same
entries as redis-py's read, a stop that leaves no read blocked on the server, and a read
cut by the server taken up again."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from agent_core.bus import Bus, BusNames, ConsumerOptions, Delivery, StreamConsumer
from agent_core.bus.broker import make_broker
from agent_core.bus.consumer import _LeanGroupRead
from agent_core.bus.contracts.runs import RUNS_MESSAGE, RunNudge
from tests.integration.bus.helpers import make_consumer, running, wait_for


async def _blocked_readers(redis: Redis) -> list[dict[str, Any]]:
    """The server's clients blocked in an ``XREADGROUP``."""
    clients = await redis.client_list()
    return [c for c in clients if c.get("cmd") == "xreadgroup" and "b" in c.get("flags", "")]


async def _nudge(redis_url: str, stream: str, session_id: str) -> None:
    broker = make_broker(redis_url)
    await broker.connect()
    await broker.publish(RunNudge(session_id=session_id), stream=stream)
    await broker.stop()


async def test_the_lean_read_returns_what_redis_pys_read_returns(
    bus: Bus, redis: Redis, names: BusNames
) -> None:
    """Entry ids and field maps, whatever the fields (an envelope with headers beside it, a flat
    map), come out of both reads alike."""
    assert bus.plain
    stream = names.runs
    await redis.xadd(stream, {"__data__": b'{"a":1}', "traceparent": "00-ab-cd-01", "x": "é"})
    await redis.xadd(stream, {"k1": "v1", "k2": b"\x00\xff"})
    await redis.xadd(stream, {"__data__": b""})
    options = ConsumerOptions(max_records=10, polling_interval_ms=100)

    async def ignore(message: Any, delivery: Delivery) -> None:
        return None

    lean_side = make_consumer(
        bus, names, stream, RUNS_MESSAGE, ignore, group="lean", options=options
    )
    py_side = make_consumer(bus, names, stream, RUNS_MESSAGE, ignore, group="py", options=options)
    for c in (lean_side, py_side):
        await c.ensure_group()
    read = _LeanGroupRead(lean_side)
    try:
        lean_entries = await read()
    finally:
        await read.aclose()
    py_entries = await py_side._read_redis_py()
    assert len(lean_entries) == 3
    assert lean_entries == py_entries
    assert lean_entries[0].fields[b"traceparent"] == b"00-ab-cd-01"
    assert lean_entries[1].fields == {b"k1": b"v1", b"k2": b"\x00\xff"}


async def test_stopping_a_blocked_read_leaves_no_read_on_the_server(
    redis_url: str, bus: Bus, redis: Redis, names: BusNames
) -> None:
    consumer, handled = _recording(bus, names)
    before = len(await _blocked_readers(redis))
    await consumer.ensure_group()
    consumer.start_reading()
    try:
        await _nudge(redis_url, names.runs, "s1")  # an entry ends a blocked read at once
        await wait_for(lambda: handled == ["s1"])
        await wait_for(lambda: _count_above(redis, before))
    finally:
        await consumer.stop_reading(10)
    assert not consumer.running
    # The read blocks for 20 s: stopping cancelled it and closed its socket, so the server
    # holds no read of it any more.
    await wait_for(lambda: _count_is(redis, before))


async def test_a_read_cut_by_the_server_is_taken_up_again(
    redis_url: str, bus: Bus, redis: Redis, names: BusNames
) -> None:
    consumer, handled = _recording(bus, names)
    before = len(await _blocked_readers(redis))
    async with running(redis_url, consumer):
        await wait_for(lambda: _count_above(redis, before))
        for client in await _blocked_readers(redis):
            await redis.client_kill_filter(_id=client["id"])
        await _nudge(redis_url, names.runs, "after-the-cut")
        await wait_for(lambda: handled == ["after-the-cut"], timeout_s=10)
        assert consumer.running
    assert (await redis.xpending(names.runs, "g"))["pending"] == 0


def _recording(bus: Bus, names: BusNames) -> tuple[StreamConsumer[Any], list[str]]:
    """A consumer of the runs stream whose reads block for 20 s, and the sessions it handled."""
    handled: list[str] = []

    async def handle(message: Any, delivery: Delivery) -> None:
        handled.append(message.session_id)

    options = ConsumerOptions(max_records=4, polling_interval_ms=20_000, claim_interval_s=0.1)
    return make_consumer(bus, names, names.runs, RUNS_MESSAGE, handle, options=options), handled


async def _count_above(redis: Redis, n: int) -> bool:
    return len(await _blocked_readers(redis)) > n


async def _count_is(redis: Redis, n: int) -> bool:
    return len(await _blocked_readers(redis)) == n
