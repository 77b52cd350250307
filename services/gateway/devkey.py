"""The development key of ``soong-agent up``: made once per home, reused, reissued on request.

The home keeps only the key's id (``<home>/dev_key.json``); the store keeps its hash. The plain
key is printed once, when it is made. ``up --new-dev-key`` revokes the old one and makes another.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Final

from redis.asyncio import Redis
from redis.exceptions import RedisError

from agent_core.bus import BusNames, make_redis
from agent_core.bus.topology import bus_client
from agent_core.config.schema import BusSettings
from agent_core.errors import ConfigError, redact
from services.gateway.keys import ApiKeyStore

__all__ = ["DEV_ACCOUNT", "DEV_KEY_FILE", "dev_key", "reachable_redis"]

DEV_ACCOUNT: Final = "dev"
DEV_KEY_FILE: Final = Path("dev_key.json")
_PING_TIMEOUT_S = 5.0


async def dev_key(
    url: str, namespace: str, home: Path, *, reissue: bool, bus: BusSettings | None = None
) -> str:
    """The line ``up`` prints about the development key (the key itself only when just made).

    Raises :class:`ConfigError` (``bus_unreachable``) when Redis does not answer.
    """
    redis = await reachable_redis(url, bus)
    try:
        store = ApiKeyStore(redis, BusNames(namespace))
        await store.adopt_legacy()  # keys made before the {auth} hash tag, once
        path = home / DEV_KEY_FILE
        known = _stored_id(path)
        record = await store.get(known) if known else None
        if record is not None and record.live(int(time.time() * 1000)) and not reissue:
            return (
                f"development key {record.key_id} for account '{DEV_ACCOUNT}' (its secret was shown "
                "when it was made; `soong-agent up --new-dev-key` makes a new one)"
            )
        if record is not None:
            await store.revoke(record.key_id)
        key, made = await store.create(DEV_ACCOUNT)
        path.write_text(json.dumps({"key_id": made.key_id, "account_id": DEV_ACCOUNT}) + "\n")
        return (
            f"development API key for account '{DEV_ACCOUNT}': {key}\n"
            "it is shown this once and reused by later runs; store it now"
        )
    finally:
        await redis.aclose()


async def reachable_redis(url: str, bus: BusSettings | None = None) -> Redis:
    """A client of ``url`` that has answered a ping; ``ConfigError("bus_unreachable")`` if not.

    With ``bus`` (the ``[bus]`` settings whose URL ``url`` is), the client of its topology:
    Sentinel, Cluster or TLS (``bus_client``)."""
    redis = bus_client(bus) if bus is not None and bus.redis_url == url else make_redis(url)
    try:
        async with asyncio.timeout(_PING_TIMEOUT_S):
            await redis.ping()
    except (RedisError, OSError, TimeoutError) as exc:
        await redis.aclose()
        raise ConfigError(
            "bus_unreachable",
            f"Redis at {redact(url)} does not answer ({type(exc).__name__}: {redact(str(exc))})",
            details={"key": "bus.redis_url"},
        ) from None
    return redis


def _stored_id(path: Path) -> str | None:
    try:
        return str(json.loads(path.read_text())["key_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
