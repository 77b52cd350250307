"""The lean RESP client (agent_core.bus.resp) against a real Valkey, over TCP and over its unix
socket: replies, pipelining, errors, cancelled callers, scripts, transactions, the bus's use of it
and Pub/Sub resubscribe. Connecting and losing the connection: ``test_resp_connect``."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError, ResponseError

from agent_core.bus.calls import Bus, LeanScript
from agent_core.bus.connection import make_redis
from agent_core.bus.resp import LeanRedis
from agent_core.bus.resp_address import RedisAddress
from agent_core.bus.resp_subscriber import LeanSubscriber
from agent_core.bus.rpc import RpcClient
from agent_core.service.valkey import EmbeddedValkey, find_free_port


@pytest.fixture
async def lean(any_redis_url: str) -> AsyncIterator[LeanRedis]:
    client = LeanRedis.from_url(any_redis_url)
    yield client
    await client.aclose()


def _key() -> str:
    return f"resp-{secrets.token_hex(6)}"


async def test_commands_return_raw_replies(lean: LeanRedis, redis: Redis) -> None:
    key = _key()
    assert await lean.execute("SET", key, "v") == b"OK"
    assert await lean.execute("GET", key) == b"v"
    assert await lean.execute("INCRBY", f"{key}:n", 5) == 5
    assert await lean.execute("GET", f"{key}:missing") is None
    await lean.execute("RPUSH", f"{key}:l", "a", b"b", 3)
    assert await lean.execute("LRANGE", f"{key}:l", 0, -1) == [b"a", b"b", b"3"]
    assert await redis.get(key) == b"v"  # the same server redis-py sees


async def test_a_batch_goes_out_in_one_write_and_replies_in_order(lean: LeanRedis) -> None:
    key = _key()
    replies = await lean.execute_many([["SET", key, "1"], ["INCR", key], ["GET", key]])
    assert replies == [b"OK", 2, b"2"]
    assert await lean.execute_many([]) == []


async def test_concurrent_callers_each_get_their_own_reply(lean: LeanRedis) -> None:
    key = _key()
    await lean.execute_many([["SET", f"{key}:{i}", f"value-{i}"] for i in range(200)])

    async def get(i: int) -> bytes:
        reply: bytes = await lean.execute("GET", f"{key}:{i}")
        return reply

    values = await asyncio.gather(*(get(i) for i in range(200)))
    assert values == [f"value-{i}".encode() for i in range(200)]
    assert lean.connects == 1  # all of them on one socket


async def test_error_replies_raise_and_the_connection_stays_usable(lean: LeanRedis) -> None:
    key = _key()
    await lean.execute("SET", key, "text")
    with pytest.raises(ResponseError, match="not an integer"):
        await lean.execute("INCR", key)
    with pytest.raises(ResponseError, match="BUSYGROUP"):
        await lean.execute("XGROUP", "CREATE", f"{key}:s", "g", "0", "MKSTREAM")
        await lean.execute("XGROUP", "CREATE", f"{key}:s", "g", "0", "MKSTREAM")
    replies = await lean.execute_many([["INCR", key], ["GET", key]], raise_on_error=False)
    assert isinstance(replies[0], ResponseError) and replies[1] == b"text"
    with pytest.raises(ResponseError):
        await lean.execute_many([["INCR", key], ["GET", key]])
    assert await lean.execute("GET", key) == b"text"
    assert lean.connects == 1


async def test_a_cancelled_caller_does_not_shift_the_replies(lean: LeanRedis) -> None:
    key = _key()
    await lean.execute("SET", key, "mine")
    slow = asyncio.ensure_future(lean.execute("BLPOP", f"{key}:empty", 1))
    await asyncio.sleep(0.05)
    slow.cancel()
    assert await lean.execute("GET", key) == b"mine"  # after the BLPOP's reply, not as it


@pytest.mark.parametrize("unix", [False, True])
async def test_subscriber_gets_messages_and_resubscribes_after_a_restart(
    own_valkey: EmbeddedValkey, unix: bool
) -> None:
    got: asyncio.Queue[tuple[bytes, bytes]] = asyncio.Queue()
    url = own_valkey.local_url if unix else own_valkey.url
    sub = LeanSubscriber(RedisAddress.from_url(url), lambda ch, data: got.put_nowait((ch, data)))
    lean = LeanRedis.from_url(url)
    try:
        await sub.subscribe("a", "b")
        assert await lean.execute("PUBLISH", "a", "one") == 1
        assert await lean.execute("PUBLISH", "b", b"two") == 1
        async with asyncio.timeout(5):
            assert await got.get() == (b"a", b"one")
        async with asyncio.timeout(5):
            assert await got.get() == (b"b", b"two")

        await asyncio.to_thread(own_valkey.stop)
        await asyncio.to_thread(own_valkey.start)
        async with asyncio.timeout(10):
            await _until_subscribed(lean, "a")
        await lean.execute("PUBLISH", "a", "after")
        async with asyncio.timeout(5):
            assert await got.get() == (b"a", b"after")
        await sub.subscribe("c")  # on the live connection
        assert await lean.execute("PUBLISH", "c", "three") == 1
        async with asyncio.timeout(5):
            assert await got.get() == (b"c", b"three")
    finally:
        await sub.aclose()
        await lean.aclose()


async def _until_subscribed(lean: LeanRedis, channel: str) -> None:
    while (await lean.execute("PUBSUB", "NUMSUB", channel))[1] == 0:
        await asyncio.sleep(0.05)


async def test_the_bus_makes_one_lean_client_where_redis_py_connects(any_redis_url: str) -> None:
    bus = Bus(make_redis(any_redis_url))
    try:
        lean = bus.calls
        assert isinstance(lean, LeanRedis)
        assert lean is bus.calls  # one per bus, not one per call
        assert lean.address == RedisAddress.from_url(any_redis_url)
        assert await lean.execute("PING") == b"PONG"
        assert lean.connects == 1
    finally:
        await bus.aclose()
    # Its socket was closed with the bus: a later call has to connect again.
    assert await lean.execute("PING") == b"PONG"
    assert lean.connects == 2
    await lean.aclose()


def test_the_bus_makes_its_lean_client_again_on_another_loop(redis_url: str) -> None:
    """A lean socket belongs to the loop it ran on; a bus used from a second loop (a command
    that calls ``asyncio.run`` twice) gets a client of that loop, not the dead loop's socket."""
    bus = Bus(make_redis(redis_url))

    async def ping() -> object:
        calls = bus.calls
        assert await calls.execute("PING") == b"PONG"
        return calls

    first = asyncio.run(ping())
    second = asyncio.run(ping())
    asyncio.run(bus.aclose())  # from a third loop: the second one's socket is not touched
    assert first is not second


def test_it_runs_on_uvloop_as_the_services_do(any_redis_url: str) -> None:
    """uvloop's transports are not asyncio.Transport subclasses; the services run on uvloop."""
    import uvloop

    async def main() -> list[object]:
        got: asyncio.Queue[bytes] = asyncio.Queue()
        address = RedisAddress.from_url(any_redis_url)
        sub = LeanSubscriber(address, lambda _, d: got.put_nowait(d))
        lean = LeanRedis.from_url(any_redis_url)
        try:
            await sub.subscribe("uv")
            pong = await lean.execute("PING")
            await lean.execute("PUBLISH", "uv", "hi")
            async with asyncio.timeout(5):
                return [pong, await got.get()]
        finally:
            await sub.aclose()
            await lean.aclose()

    assert uvloop.run(main()) == [b"PONG", b"hi"]


async def test_rpc_start_without_a_bus_fails_clearly_after_its_wait() -> None:
    nowhere = make_redis(f"redis://127.0.0.1:{find_free_port()}")
    rpc = RpcClient(Bus(nowhere), "replies:nowhere")
    try:
        with pytest.raises(ConnectionError, match="no bus at 127.0.0.1"):
            await rpc.start(timeout_s=0.5)
    finally:
        await nowhere.aclose()


async def test_rpc_start_waits_for_a_bus_that_comes_back(own_valkey: EmbeddedValkey) -> None:
    own_valkey.stop()
    client = make_redis(own_valkey.url)
    rpc = RpcClient(Bus(client), "replies:later")
    starting = asyncio.create_task(rpc.start(timeout_s=20))
    await asyncio.sleep(0.3)
    assert not starting.done()  # waiting for the bus, not failed
    own_valkey.start()
    try:
        async with asyncio.timeout(15):
            await starting
        assert await client.publish("replies:later", b"x") == 1  # subscribed now
    finally:
        await rpc.stop()
        await client.aclose()


_SCRIPT = "redis.call('INCRBY', KEYS[1], ARGV[1]); return {redis.call('GET', KEYS[1]), ARGV[2]}"


async def test_a_script_runs_by_its_sha_and_by_its_text_once_the_server_forgot_it(
    own_valkey: EmbeddedValkey,
) -> None:
    bus = Bus(make_redis(own_valkey.url))
    script = LeanScript(bus, _SCRIPT)
    lean = bus.calls
    try:
        assert await script(keys=["n"], args=[2, "x"]) == [b"2", b"x"]  # not loaded yet: EVAL
        assert await lean.execute("SCRIPT", "EXISTS", script.sha) == [1]
        assert await script(keys=["n"], args=[3, 1.5]) == [b"5", b"1.5"]  # EVALSHA
        await lean.execute("SCRIPT", "FLUSH")
        assert await script(keys=["n"], args=[1, "y"]) == [b"6", b"y"]
        with pytest.raises(ResponseError, match="WRONGTYPE|not an integer"):
            await LeanScript(bus, _SCRIPT)(keys=["n"], args=["not-a-number", "z"])
    finally:
        await bus.aclose()


async def test_a_transaction_applies_together_and_raises_what_failed(lean: LeanRedis) -> None:
    key = _key()
    assert await lean.transaction([["SET", key, "1"], ["INCR", key], ["GET", key]]) == [
        b"OK",
        2,
        b"2",
    ]
    # Refused while queued (an unknown command): nothing of the transaction runs.
    with pytest.raises(ResponseError):
        await lean.transaction([["SET", key, "10"], ["NO-SUCH-COMMAND"]])
    assert await lean.execute("GET", key) == b"2"
    # Failing while running: the error raises, the other commands stay applied (as in Redis).
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await lean.transaction([["SET", key, "20"], ["LPUSH", key, "x"]])
    assert await lean.execute("GET", key) == b"20"
    assert await lean.execute("PING") == b"PONG"  # the connection stays in step
