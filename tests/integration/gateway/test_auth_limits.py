"""Auth, the token bucket, the auth-failure limit, SSE slots and the body cap on real Valkey."""

from __future__ import annotations

import asyncio
from typing import Annotated

import httpx
import pytest
from fastapi import Depends, FastAPI, Request
from redis.asyncio import Redis

from agent_core.bus import Bus, BusNames
from agent_core.bus.names import BusTtl
from services.gateway.auth import Authenticator, Caller
from services.gateway.errors import ApiError, install_error_handlers
from services.gateway.keys import ApiKeyStore
from services.gateway.limits import HEARTBEAT_S, BodyLimitMiddleware, SseSlots


async def _caller(request: Request) -> Caller:
    auth: Authenticator = request.app.state.auth
    return await auth(request)


CallerDep = Annotated[Caller, Depends(_caller)]


def _app(auth: Authenticator, *, limit: int = 1024) -> FastAPI:
    app = FastAPI()
    app.state.auth = auth
    install_error_handlers(app)

    @app.get("/who")
    async def who(c: CallerDep) -> dict[str, str]:
        return {"account": c.account_id}

    @app.post("/echo")
    async def echo(body: dict[str, str]) -> dict[str, int]:
        return {"keys": len(body)}

    app.add_middleware(BodyLimitMiddleware, limit_for=lambda path: limit)
    return app


def _client(app: FastAPI, key: str | None = None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t", headers=headers
    )


async def test_token_bucket_answers_429_with_retry_after(
    bus: Bus, redis: Redis, names: BusNames
) -> None:
    key, record = await ApiKeyStore(redis, names).create("alice")
    auth = Authenticator(bus, names, rate_per_s=1.0, burst=3)
    async with _client(_app(auth), key) as c:
        statuses = [(await c.get("/who")).status_code for _ in range(4)]
        assert statuses == [200, 200, 200, 429]
        limited = await c.get("/who")
        assert limited.headers["retry-after"] == "1"
        assert limited.json()["error"]["code"] == "rate_limited"
    # Another key has its own bucket.
    other, _ = await ApiKeyStore(redis, names).create("bob")
    async with _client(_app(auth), other) as c:
        assert (await c.get("/who")).json() == {"account": "bob"}


async def test_revoked_and_unknown_keys_are_401(bus: Bus, redis: Redis, names: BusNames) -> None:
    store = ApiKeyStore(redis, names)
    key, record = await store.create("alice")
    auth = Authenticator(bus, names, rate_per_s=100.0, burst=100)
    async with _client(_app(auth), key) as c:
        assert (await c.get("/who")).json() == {"account": "alice"}
        assert await store.revoke(record.key_id)
        denied = await c.get("/who")
        assert denied.status_code == 401 and denied.headers["www-authenticate"].startswith("Bearer")
    async with _client(_app(auth), key[:-1] + ("A" if key[-1] != "A" else "B")) as c:
        assert (await c.get("/who")).status_code == 401


async def test_repeated_failures_turn_into_429(bus: Bus, names: BusNames) -> None:
    auth = Authenticator(bus, names, rate_per_s=100.0, burst=100)
    async with _client(_app(auth), "sa_live_" + "x" * 32) as c:
        statuses = [(await c.get("/who")).status_code for _ in range(105)]
    assert statuses[:100] == [401] * 100 and set(statuses[100:]) == {429}


async def test_sse_slots_cap_and_release(bus: Bus, redis: Redis, names: BusNames) -> None:
    slots = SseSlots(bus, names, limit=2, gateway_id="gw-a")
    await slots.acquire("k1")
    await slots.acquire("k1")
    with pytest.raises(ApiError) as refused:
        await slots.acquire("k1")
    assert refused.value.status == 429 and refused.value.headers == {"Retry-After": "1"}
    await slots.acquire("k2")  # per key
    await slots.release("k1")
    await slots.acquire("k1")
    for _ in range(5):
        await slots.release("k2")
    assert await redis.hget(names.key("sse", "k2"), "gw-a") is None  # never below zero


async def test_sse_slots_belong_to_a_live_gateway(bus: Bus, redis: Redis, names: BusNames) -> None:
    a = SseSlots(bus, names, limit=2, gateway_id="gw-a")
    b = SseSlots(bus, names, limit=2, gateway_id="gw-b")
    stop = asyncio.Event()
    beat = asyncio.create_task(b.heartbeat(stop))
    try:
        await b.acquire("k")
        await b.acquire("k")
        with pytest.raises(ApiError):  # b is alive: its slots count for every gateway
            await a.acquire("k")
    finally:
        stop.set()
        await beat
    # b is gone (its fields deleted on stop, or lapsed after a SIGKILL): its slots with it.
    await a.acquire("k")
    await a.acquire("k")
    assert sorted(await redis.hkeys(names.sse_slots("k"))) == [b"gw-a", b"gw-a:alive"]


async def test_the_heartbeat_renews_a_live_gateways_stamp(
    bus: Bus, redis: Redis, names: BusNames
) -> None:
    """A live gateway's beat stamps it alive again, by the server's clock, for
    BusTtl.SSE_GATEWAY_ALIVE_S: several beats fit in that period, so a late one is not a lapse."""
    assert HEARTBEAT_S * 3 < BusTtl.SSE_GATEWAY_ALIVE_S
    a = SseSlots(bus, names, limit=1, gateway_id="gw-a")
    live = SseSlots(bus, names, limit=1, gateway_id="gw-live")
    await live.acquire("k")
    await redis.hset(names.sse_slots("k"), "gw-live:alive", 0)  # as if its stamp had lapsed
    stop = asyncio.Event()
    beat = asyncio.create_task(live.heartbeat(stop))
    try:
        async with asyncio.timeout(10):  # a generous bound on a beat's wait, not a goal
            while int(await redis.hget(names.sse_slots("k"), "gw-live:alive") or 0) == 0:
                await asyncio.sleep(0.01)
        stamp = int(await redis.hget(names.sse_slots("k"), "gw-live:alive") or 0)
        seconds, micros = await redis.time()
        now_ms = seconds * 1000 + micros // 1000
        assert now_ms < stamp <= now_ms + BusTtl.SSE_GATEWAY_ALIVE_S * 1000
        with pytest.raises(ApiError):  # renewed: its slot counts again
            await a.acquire("k")
    finally:
        stop.set()
        await beat


async def test_sse_slots_of_a_gateway_that_stopped_beating_lapse(
    bus: Bus, redis: Redis, names: BusNames
) -> None:
    """A gateway killed without a word (no heartbeat since) loses its slots once its liveness
    in the slot hash lapses; the liveness sits in that one hash (one key per script)."""
    a = SseSlots(bus, names, limit=1, gateway_id="gw-a")
    dead = SseSlots(bus, names, limit=1, gateway_id="gw-dead")
    await dead.acquire("k")
    with pytest.raises(ApiError):
        await a.acquire("k")
    # Its last beat was long ago (as the server's clock tells after BusTtl.SSE_GATEWAY_ALIVE_S).
    await redis.hset(names.sse_slots("k"), "gw-dead:alive", 0)
    await a.acquire("k")
    assert sorted(await redis.hkeys(names.sse_slots("k"))) == [b"gw-a", b"gw-a:alive"]


async def test_body_cap_counts_bytes_not_headers(bus: Bus, names: BusNames) -> None:
    auth = Authenticator(bus, names, rate_per_s=100.0, burst=100)
    app = _app(auth, limit=1024)
    async with _client(app) as c:
        small = await c.post("/echo", json={"a": "b"})
        assert small.status_code == 200
        big = await c.post("/echo", json={"a": "x" * 2000})
        assert big.status_code == 413 and big.json()["error"]["code"] == "payload_too_large"

        async def chunked():
            for _ in range(10):
                yield b" " * 200

        streamed = await c.post(
            "/echo", content=chunked(), headers={"content-type": "application/json"}
        )
        assert streamed.status_code == 413
        # A Content-Length that lies low does not get more bytes through.
        lying = await c.post(
            "/echo",
            content=b'{"a":"' + b"x" * 3000 + b'"}',
            headers={"content-type": "application/json", "content-length": "10"},
        )
        assert lying.status_code == 413


async def test_expired_keys_are_401_and_listing_shows_last_use(
    bus: Bus, redis: Redis, names: BusNames
) -> None:
    store = ApiKeyStore(redis, names)
    live, live_record = await store.create("alice", expires_in_s=3600)
    expired, expired_record = await store.create("alice", expires_in_s=0.001)
    auth = Authenticator(bus, names, rate_per_s=100.0, burst=100)
    async with _client(_app(auth), live) as c:
        assert (await c.get("/who")).status_code == 200
    async with _client(_app(auth), expired) as c:
        response = await c.get("/who")
        assert response.status_code == 401
    assert await store.resolve(expired) is None
    assert await store.resolve(live) is not None
    listed = {item.key.key_id: item for item in await store.list("alice")}
    assert set(listed) == {live_record.key_id, expired_record.key_id}
    assert listed[live_record.key_id].last_used_ms is not None  # used once, just now
    assert listed[expired_record.key_id].last_used_ms is None  # refused: never used
    assert live not in repr(listed)  # a listing never holds the key itself


async def test_keys_made_before_the_auth_tag_keep_working(redis: Redis, names: BusNames) -> None:
    """An upgrade locks nobody out: keys under the hash before the ``{auth}`` tag are adopted."""
    old = ApiKeyStore(redis, names)
    key, record = await old.create("acme")
    legacy_keys, legacy_used = names.legacy_api_keys
    await redis.rename(names.api_keys, legacy_keys)  # where the version before kept it
    await redis.hset(legacy_used, record.key_id, 1234)
    store = ApiKeyStore(redis, names)
    assert await store.resolve(key) is None
    assert await store.adopt_legacy() == 1
    resolved = await store.resolve(key)
    assert resolved is not None and resolved.account_id == "acme"
    assert [item.last_used_ms for item in await store.list("acme")] == [1234]
    assert await redis.exists(legacy_keys, legacy_used) == 0
    assert await store.adopt_legacy() == 0
