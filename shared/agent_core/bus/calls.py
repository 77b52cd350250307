"""The bus calls a redis-py client's users make, through the lean client where it speaks the
topology and through redis-py where it does not.

:func:`lean_for` gives, for a redis-py client, the object that makes its request/reply calls:
the :class:`~agent_core.bus.resp.LeanRedis` connecting where it does (one plain node, where the
lean client's saving was measured), or :class:`RedisPyCalls`, the same calls made through the
redis-py client itself (Sentinel, Cluster, TLS: redis-py finds the primary again, follows
``MOVED``/``ASK`` and speaks TLS). :class:`LeanScript` calls a Lua script through it.
"""

from __future__ import annotations

import asyncio
import hashlib
import weakref
from collections.abc import Sequence
from typing import Any, Protocol

import hiredis
from redis.asyncio import Redis
from redis.exceptions import NoScriptError

from agent_core.bus.resp import Arg, Command, LeanRedis, RedisAddress

__all__ = [
    "BusCalls",
    "LeanScript",
    "RedisPyCalls",
    "close_lean",
    "lean_for",
    "speaks_plain_resp",
]


# One lean client per redis-py client (and event loop): the callers that hold a redis-py client
# reach the lean one through it, so wiring it in changes no signature.
_LEAN: weakref.WeakKeyDictionary[Redis, LeanRedis] = weakref.WeakKeyDictionary()
_LOOPS: weakref.WeakKeyDictionary[LeanRedis, asyncio.AbstractEventLoop] = (
    weakref.WeakKeyDictionary()
)


class BusCalls(Protocol):
    """The calls :func:`lean_for` gives: :class:`LeanRedis` or :class:`RedisPyCalls`."""

    async def execute(self, *args: Arg) -> Any: ...
    async def execute_packed(self, payload: bytes) -> Any: ...
    async def execute_many(
        self, commands: Sequence[Command], *, raise_on_error: bool = True
    ) -> list[Any]: ...
    async def transaction(
        self, commands: Sequence[Command], *, then: Sequence[Command] = ()
    ) -> list[Any]: ...
    async def aclose(self) -> None: ...


class RedisPyCalls:
    """The calls of :class:`LeanRedis`, made through a redis-py client: the topologies the lean
    socket does not speak (Sentinel, Cluster, TLS) hand them to redis-py, which finds the primary
    again after a failover, follows ``MOVED``/``ASK`` and speaks TLS (docs/architecture.md,
    "Bus"). Replies are redis-py's for the same command (raw, without ``decode_responses``)."""

    def __init__(self, redis: Any) -> None:
        self._redis = redis

    async def execute(self, *args: Arg) -> Any:
        """Run one command; return its reply."""
        return await self._redis.execute_command(*args)

    async def execute_packed(self, payload: bytes) -> Any:
        """Run one command packed by the caller (a RESP array of :func:`bulk` strings)."""
        return await self.execute(*_unpack(payload))

    async def execute_many(
        self, commands: Sequence[Command], *, raise_on_error: bool = True
    ) -> list[Any]:
        """Run ``commands`` (each on its own, in one pipeline); replies in order."""
        if not commands:
            return []
        async with self._redis.pipeline(transaction=False) as pipe:
            for command in commands:
                pipe.execute_command(*command)
            replies: list[Any] = await pipe.execute(raise_on_error=raise_on_error)
        return replies

    async def transaction(
        self, commands: Sequence[Command], *, then: Sequence[Command] = ()
    ) -> list[Any]:
        """``commands`` as one transaction (their keys share a slot), then ``then``."""
        async with self._redis.pipeline(transaction=True) as pipe:
            for command in commands:
                pipe.execute_command(*command)
            results: list[Any] = await pipe.execute()
        if then:
            await self.execute_many(then)
        return results

    async def aclose(self) -> None:
        """Nothing of its own to close: the redis-py client owns the connections."""


def _unpack(payload: bytes) -> list[bytes]:
    """The arguments of one RESP array of bulk strings (what :func:`encode` packs)."""
    reader = hiredis.Reader()
    reader.feed(payload)
    parts = reader.gets()
    if not isinstance(parts, list):
        raise ValueError("not a RESP array")
    return [bytes(p) for p in parts]


def speaks_plain_resp(redis: Any) -> bool:
    """Whether ``redis`` is one plain TCP connection target (what :class:`LeanRedis` speaks)."""
    if not isinstance(redis, Redis):
        return False  # a RedisCluster
    pool = redis.connection_pool
    if type(pool).__name__ == "SentinelConnectionPool":
        return False
    return (
        not pool.connection_kwargs.get("ssl", False)
        and "Unix" not in getattr(pool.connection_class, "__name__", "")
        and "SSL" not in getattr(pool.connection_class, "__name__", "")
    )


_CALLS: weakref.WeakKeyDictionary[Any, RedisPyCalls] = weakref.WeakKeyDictionary()


def lean_for(redis: Redis) -> BusCalls:
    """The lean client connecting where ``redis`` does, for the running event loop; for a
    topology it does not speak, the same calls made through ``redis`` (:class:`RedisPyCalls`)."""
    if not speaks_plain_resp(redis):
        calls = _CALLS.get(redis)
        if calls is None:
            calls = _CALLS[redis] = RedisPyCalls(redis)
        return calls
    loop = asyncio.get_running_loop()
    lean = _LEAN.get(redis)
    if lean is None or _LOOPS.get(lean) is not loop:
        lean = _LEAN[redis] = LeanRedis(RedisAddress.of(redis))
        _LOOPS[lean] = loop
    return lean


class LeanScript:
    """A Lua script called through the lean client of a redis-py client, as redis-py's
    ``register_script`` calls it: ``EVALSHA`` with the script's SHA-1, and ``EVAL`` with its text
    when the server does not hold it (after a restart or ``SCRIPT FLUSH``; ``EVAL`` caches it
    again). Replies are raw, as redis-py's are without ``decode_responses``."""

    def __init__(self, redis: Redis, text: str) -> None:
        self._redis = redis
        self.text = text
        self.sha = hashlib.sha1(text.encode()).hexdigest()

    async def __call__(self, keys: Sequence[Arg] = (), args: Sequence[Arg] = ()) -> Any:
        """Run the script on ``keys`` with ``args``; error replies raise as in :meth:`LeanRedis.execute`."""
        lean = lean_for(self._redis)
        try:
            return await lean.execute("EVALSHA", self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return await lean.execute("EVAL", self.text, len(keys), *keys, *args)


async def close_lean(redis: Redis) -> None:
    """Close the lean client of ``redis``, if one was made (before ``redis.aclose()``)."""
    lean = _LEAN.pop(redis, None)
    _CALLS.pop(redis, None)
    if lean is not None:
        await lean.aclose()
