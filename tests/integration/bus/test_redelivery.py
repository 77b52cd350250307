"""Failed handlers are retried after the idle time and dead-lettered at the delivery cap; a consumer
killed with SIGKILL while holding messages has them processed by another consumer."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections import Counter
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from agent_core.bus import Bus, BusNames, ConsumerOptions, Delivery, hand_back, reclaim_idle
from agent_core.bus.broker import make_broker
from agent_core.bus.contracts.runs import RUNS_MESSAGE, RunNudge
from tests.conftest import REPO
from tests.integration.bus.helpers import dead_letters, make_consumer, running, wait_for


async def _publish(redis_url: str, stream: str, *session_ids: str) -> None:
    broker = make_broker(redis_url)
    await broker.connect()
    for sid in session_ids:
        await broker.publish(RunNudge(session_id=sid), stream=stream)
    await broker.stop()


async def test_failing_handler_is_retried_then_dead_lettered(
    redis_url: str, bus: Bus, redis: Redis, names: BusNames
) -> None:
    attempts: Counter[str] = Counter()
    deliveries: list[int] = []

    async def handler(message: Any, delivery: Delivery) -> None:
        attempts[message.session_id] += 1
        if message.session_id == "poison":
            deliveries.append(delivery.deliveries)
            raise RuntimeError("this message always fails")
        if message.session_id == "flaky" and attempts["flaky"] == 1:
            raise RuntimeError("fails once")

    options = ConsumerOptions(
        max_records=4, min_idle_ms=200, max_deliveries=3, claim_interval_s=0.1
    )
    consumer = make_consumer(bus, names, names.runs, RUNS_MESSAGE, handler, options=options)
    async with running(redis_url, consumer):
        await _publish(redis_url, names.runs, "poison", "flaky", "fine")
        await wait_for(lambda: redis.xlen(names.dead_letter), timeout_s=15)
        await wait_for(lambda: attempts["flaky"] == 2)

    assert attempts == Counter({"poison": 3, "flaky": 2, "fine": 1})
    assert deliveries == [1, 2, 3]
    letters = await dead_letters(redis, names)
    assert len(letters) == 1
    assert letters[0]["reason"] == "delivery_cap"
    assert letters[0]["deliveries"] == 3
    assert "always fails" in letters[0]["error"]
    assert (await redis.xpending(names.runs, "g"))["pending"] == 0


def _spawn(redis_url: str, names: BusNames, name: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.integration.bus._consumer_proc",
            redis_url,
            names.namespace,
            name,
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


async def test_sigkilled_consumers_messages_are_processed_by_another(
    redis_url: str, bus: Bus, redis: Redis, names: BusNames
) -> None:
    victim = _spawn(redis_url, names, "victim")
    try:
        await _publish(redis_url, names.runs, *(f"s{i}" for i in range(5)))
        # The victim fetched all five (max_records=10) and hangs in the first handler.
        await wait_for(_pending_for(redis, names, "victim", 5), timeout_s=20)
        await wait_for(lambda: redis.exists(names.key("seen", "victim")), timeout_s=10)
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait()

    handled: list[str] = []

    async def handler(message: Any, _: Delivery) -> None:
        handled.append(message.session_id)

    rescuer = make_consumer(bus, names, names.runs, RUNS_MESSAGE, handler, name="rescuer")
    async with running(redis_url, rescuer):
        await wait_for(lambda: len(handled) == 5, timeout_s=10)
    assert sorted(handled) == [f"s{i}" for i in range(5)]
    assert (await redis.xpending(names.runs, "g"))["pending"] == 0


async def test_restarted_consumer_drains_its_own_pending_entries_first(
    redis_url: str, bus: Bus, redis: Redis, names: BusNames
) -> None:
    victim = _spawn(redis_url, names, "w0")
    try:
        await _publish(redis_url, names.runs, "a", "b", "c")
        await wait_for(_pending_for(redis, names, "w0", 3), timeout_s=20)
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait()

    handled: list[str] = []

    async def handler(message: Any, _: Delivery) -> None:
        handled.append(message.session_id)

    # Same stable name, and an idle time far beyond the test: only the start-up drain can do it.
    options = ConsumerOptions(max_records=4, min_idle_ms=600_000)
    restarted = make_consumer(
        bus, names, names.runs, RUNS_MESSAGE, handler, name="w0", options=options
    )
    async with running(redis_url, restarted):
        await _publish(redis_url, names.runs, "d")
        await wait_for(lambda: len(handled) == 4, timeout_s=10)
    assert handled == ["a", "b", "c", "d"]


def _pending_for(redis: Redis, names: BusNames, consumer: str, n: int) -> Any:
    async def check() -> bool:
        try:
            rows = await redis.xpending_range(names.runs, "g", "-", "+", 100, consumername=consumer)
        except ResponseError:  # the consumer process has not created the group yet
            return False
        return len(rows) >= n

    return check


async def test_reply_reaches_requester(redis_url: str, bus: Bus, names: BusNames) -> None:
    from agent_core.bus import RpcClient
    from agent_core.bus.contracts.health import HEALTH_MESSAGE, HealthPing, HealthReply
    from agent_core.errors import BusTimeoutError

    async def handler(message: Any, _: Delivery) -> HealthReply:
        return HealthReply(service="svc", instance="0", ok=True, nonce=message.nonce)

    stream = names.health("svc")
    consumer = make_consumer(bus, names, stream, HEALTH_MESSAGE, handler)
    rpc = RpcClient(bus, names.reply_channel("tester"))
    await rpc.start()
    # The pool's connections are opened one at a time first: twenty TLS handshakes at once on a
    # starved machine outlast the 5 s connect timeout, and opening connections is not what this
    # test is about (the Cluster client keeps a pool per node: it opens them as it goes).
    pool = getattr(bus.redis, "connection_pool", None)
    if pool is not None:
        held = [await pool.get_connection() for _ in range(20)]
        for connection in held:
            await pool.release(connection)
    try:
        async with running(redis_url, consumer):
            replies = await asyncio.gather(
                *(
                    rpc.request(
                        HealthPing(nonce=str(i)), stream=stream, reply=HealthReply, timeout_s=5
                    )
                    for i in range(20)
                )
            )
        assert [r.nonce for r in replies] == [str(i) for i in range(20)]
        # Nobody consumes this stream: a typed, retryable timeout.
        try:
            await rpc.request(
                HealthPing(), stream=names.health("nobody"), reply=HealthReply, timeout_s=0.3
            )
        except BusTimeoutError as exc:
            assert exc.retryable and exc.code == "bus_timeout"
        else:
            raise AssertionError("expected BusTimeoutError")
    finally:
        await rpc.stop()


async def test_a_consumer_whose_group_is_gone_stops_for_good(
    redis_url: str, bus: Bus, redis: Redis, names: BusNames
) -> None:
    """Deleting the stream deletes its group: the reader stops (and stays stopped) rather than
    read a stream nobody will acknowledge, so the service's watchdog restarts the process."""
    handled: list[str] = []

    async def handler(message: Any, _: Delivery) -> None:
        handled.append(message.session_id)

    consumer = make_consumer(bus, names, names.runs, RUNS_MESSAGE, handler)
    async with running(redis_url, consumer):
        await _publish(redis_url, names.runs, "before")
        await wait_for(lambda: handled == ["before"])
        assert consumer.running
        await redis.delete(names.runs)
        await wait_for(lambda: not consumer.running, timeout_s=10)
        await asyncio.sleep(0.3)
        assert not consumer.running


async def test_entries_handed_back_are_taken_by_the_next_sweep_of_another(
    redis_url: str, bus: Bus, redis: Redis, names: BusNames
) -> None:
    """A consumer that stops for good hands what it holds to another consumer's next idle
    sweep, whatever ``min_idle_ms`` says, without counting a delivery."""
    seen: dict[str, list[tuple[str, int]]] = {"leaving": [], "staying": []}

    def handler(name: str) -> Any:
        async def handle(message: Any, delivery: Delivery) -> None:
            seen[name].append((message.session_id, delivery.deliveries))
            if name == "leaving":
                raise RuntimeError("superseded")

        return handle

    options = ConsumerOptions(max_records=4, min_idle_ms=600_000, claim_interval_s=0.1)
    leaving = make_consumer(
        bus, names, names.runs, RUNS_MESSAGE, handler("leaving"), name="a", options=options
    )
    staying = make_consumer(
        bus, names, names.runs, RUNS_MESSAGE, handler("staying"), name="b", options=options
    )
    await leaving.ensure_group()
    leaving.start_reading()
    await _publish(redis_url, names.runs, "s1", "s2")
    await wait_for(lambda: len(seen["leaving"]) == 2)
    await leaving.stop_reading(2)
    assert await reclaim_idle(staying) == 0  # ten minutes' idle time: not yet another's
    assert await hand_back(leaving) == 2
    assert await reclaim_idle(staying) == 2
    assert sorted(seen["staying"]) == [("s1", 2), ("s2", 2)]  # one delivery each before
    assert (await redis.xpending(names.runs, "g"))["pending"] == 0
