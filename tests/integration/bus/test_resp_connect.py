"""The lean RESP client's connection against a real Valkey, over TCP and over its unix socket:
the bytes it sends, the URL forms it takes, AUTH and SELECT on connect, a missing socket, a server
restart mid-use, retries and the stale-request watchdog."""

from __future__ import annotations

import asyncio

import pytest
from redis.exceptions import AuthenticationError, ConnectionError, TimeoutError

from agent_core.bus.connection import CancelSafeUnixConnection, make_redis
from agent_core.bus.resp import LeanRedis
from agent_core.bus.resp_address import RedisAddress
from agent_core.bus.resp_wire import encode, xadd
from agent_core.service.valkey import EmbeddedValkey


async def test_the_wire_format_is_what_redis_py_sends() -> None:
    redis = make_redis("redis://127.0.0.1:1")
    try:
        conn = redis.connection_pool.make_connection()  # type: ignore[no-untyped-call]
        fields = {"__data__": '{"a":"é"}', "traceparent": "00-1"}
        packed = b"".join(
            conn.pack_command("XADD", "s", b"MAXLEN", b"~", "100", "*", *sum(fields.items(), ()))
        )
        assert encode(xadd("s", fields, maxlen=100)) == packed
        assert encode(["EXPIRE", "s", 3600, 1.5, b"\x00"]) == b"".join(
            conn.pack_command("EXPIRE", "s", 3600, 1.5, b"\x00")
        )
        odd = ("SET", 1e100, 1e-7, -(2**63) - 1, 10**30, float("nan"), -0.0, "", b"", "ü")
        assert encode(odd) == b"".join(conn.pack_command(*odd))
        for bad in (True, False, bytearray(b"x"), None, ["a"]):  # redis-py refuses them too
            with pytest.raises(TypeError):
                encode(["SET", "k", bad])  # type: ignore[list-item]
    finally:
        await redis.aclose()


async def test_url_forms(own_valkey: EmbeddedValkey) -> None:
    address = RedisAddress.from_url(own_valkey.url + "/3")
    assert (address.host, address.port, address.db) == ("127.0.0.1", own_valkey.port, 3)
    assert address.password == "s3cr:et/pw" and address.username is None
    assert RedisAddress.from_url("redis://u:p@h:1") == RedisAddress("h", 1, 0, "u", "p")
    redis = make_redis(own_valkey.url + "/2")
    try:
        assert RedisAddress.of(redis) == RedisAddress(
            "127.0.0.1", own_valkey.port, 2, None, "s3cr:et/pw"
        )
    finally:
        await redis.aclose()
    with pytest.raises(ValueError):
        RedisAddress.from_url("http://127.0.0.1:1")


async def test_unix_socket_url_forms(own_valkey: EmbeddedValkey) -> None:
    socket = str(own_valkey.unix_socket)
    address = RedisAddress.from_url(own_valkey.local_url + "?db=3")
    assert (address.path, address.db, address.password) == (socket, 3, "s3cr:et/pw")
    assert address.where == socket
    assert RedisAddress.from_url(f"unix://{socket}?db=1&password=pw") == RedisAddress(
        db=1, password="pw", path=socket
    )
    redis = make_redis(own_valkey.local_url + "?db=2")
    try:
        assert RedisAddress.of(redis) == RedisAddress(db=2, password="s3cr:et/pw", path=socket)
        assert redis.connection_pool.connection_class is CancelSafeUnixConnection
        assert await redis.ping() is True
    finally:
        await redis.aclose()
    with pytest.raises(ValueError):
        RedisAddress.from_url("unix://")


@pytest.mark.parametrize("unix", [False, True])
async def test_auth_and_db_are_sent_on_connect(own_valkey: EmbeddedValkey, unix: bool) -> None:
    lean = LeanRedis.from_url(own_valkey.local_url + "?db=2" if unix else own_valkey.url + "/2")
    redis = make_redis(own_valkey.url + "/2")
    try:
        await lean.execute("SET", "k", "in-db-2")
        assert await redis.get("k") == b"in-db-2"
        info = (await lean.execute("CLIENT", "INFO")).decode()
        # The server names a unix client by its socket's path (cut short), a TCP one host:port.
        addr = dict(field.split("=", 1) for field in info.split())["addr"].removesuffix(":0")
        if unix:
            assert addr.startswith("/") and str(own_valkey.unix_socket).startswith(addr), addr
        else:
            assert addr.startswith("127.0.0.1:"), addr
    finally:
        await lean.aclose()
        await redis.aclose()
    where = str(own_valkey.unix_socket) if unix else f"127.0.0.1:{own_valkey.port}"
    wrong = LeanRedis.from_url(f"{'unix' if unix else 'redis'}://:wrong@{where}", retries=0)
    with pytest.raises(AuthenticationError):
        await wrong.execute("PING")
    await wrong.aclose()


async def test_a_missing_socket_is_named_in_the_error(own_valkey: EmbeddedValkey) -> None:
    gone = LeanRedis(RedisAddress(path=str(own_valkey.unix_socket) + ".gone"), retries=0)
    with pytest.raises(ConnectionError, match=r"v\.sock\.gone"):
        await gone.execute("PING")
    await gone.aclose()


async def test_a_restart_fails_pending_calls_and_the_next_call_reconnects(
    own_valkey: EmbeddedValkey,
) -> None:
    lean = LeanRedis.from_url(own_valkey.url, retries=0)
    try:
        assert await lean.execute("PING") == b"PONG"
        # A call the server holds (a blocking pop) is pending when the server goes away.
        pending = asyncio.ensure_future(lean.execute("BLPOP", "never", 20))
        await asyncio.sleep(0.2)
        await asyncio.to_thread(own_valkey.stop)
        with pytest.raises(ConnectionError):
            await pending
        with pytest.raises(ConnectionError):  # down: no retries asked for, so it fails at once
            await lean.execute("PING")
        await asyncio.to_thread(own_valkey.start)
        assert await lean.execute("PING") == b"PONG"
        assert lean.connects == 2
    finally:
        await lean.aclose()


async def test_calls_retry_while_the_server_restarts(own_valkey: EmbeddedValkey) -> None:
    # Eight retries back off ~4.5 s in all: a start on a loaded machine can outlast the default
    # three (~0.75 s), which made this test fail at random. What is tested is the retry itself.
    lean = LeanRedis.from_url(own_valkey.url, retries=8)
    try:
        assert await lean.execute("PING") == b"PONG"
        await asyncio.to_thread(own_valkey.stop)
        call = asyncio.ensure_future(lean.execute("PING"))
        await asyncio.to_thread(own_valkey.start)
        assert await call == b"PONG"
        assert lean.connects == 2  # the call went out again on a new connection
    finally:
        await lean.aclose()


async def test_the_watchdog_closes_a_connection_with_a_stale_request(
    own_valkey: EmbeddedValkey,
) -> None:
    lean = LeanRedis.from_url(own_valkey.url, socket_timeout=0.5, retries=0)
    try:
        assert await lean.execute("PING") == b"PONG"
        assert own_valkey.process is not None
        own_valkey.process.send_signal(19)  # SIGSTOP: the server accepts bytes, answers none
        try:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(10):
                    await lean.execute("PING")
        finally:
            own_valkey.process.send_signal(18)  # SIGCONT
        assert await lean.execute("PING") == b"PONG"  # a new connection
        assert lean.connects == 2
    finally:
        await lean.aclose()
