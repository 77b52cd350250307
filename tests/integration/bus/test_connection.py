"""The bus's redis-py connection hands every cancel on, even one that lands as a write completes.

A task sends a command and then waits for ever; it is cancelled after 0, 1, 2, … turns of the
event loop, which sweeps the cancel across the whole command (the write, the reply) and past it
(until three tasks in a row had finished their command when the cancel came).
Whatever the moment, the task must end cancelled. redis-py's own connection, whose write goes
through ``asyncio.wait_for``, drops the cancel at some of those moments on Python 3.11.
"""

from __future__ import annotations

import asyncio
import sys

import pytest
from redis.asyncio import BlockingConnectionPool, Connection, Redis

from agent_core.bus import make_redis
from agent_core.bus.connection import (
    SOCKET_TIMEOUT_S,
    CancelSafeConnection,
    CancelSafeUnixConnection,
)

MAX_TURNS = 300


async def _dropped_cancels(redis: Redis, *, first_only: bool = False) -> list[int]:
    """The numbers of loop turns after which a cancel did not end the task (only the first with
    ``first_only``).

    Fails unless the sweep spans the command: the first cancel lands before it starts and the
    last ones after it completed.
    """
    dropped: list[int] = []
    completed: list[int] = []
    for turns in range(MAX_TURNS):
        if completed[-3:] == [turns - 3, turns - 2, turns - 1]:
            break
        await redis.ping()  # connected before the sweep: a cancel mid-command drops the socket

        async def command_then_wait(n: int = turns) -> None:
            await redis.set("cancel-probe", n)
            completed.append(n)
            await asyncio.sleep(3600)

        task = asyncio.create_task(command_then_wait())
        for _ in range(turns):
            await asyncio.sleep(0)
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=2)
        if not (done and task.cancelled()):
            dropped.append(turns)
            task.cancel()  # the cancel that was dropped, again: it waits in the sleep now
            await asyncio.gather(task, return_exceptions=True)
            if first_only:
                return dropped
    assert 0 not in completed and completed[-3:] == [turns - 3, turns - 2, turns - 1], completed
    return dropped


async def test_a_cancel_is_never_dropped_by_the_bus_connection(any_redis_url: str) -> None:
    redis = make_redis(any_redis_url)
    unix = any_redis_url.startswith("unix://")
    try:
        safe = CancelSafeUnixConnection if unix else CancelSafeConnection
        assert redis.connection_pool.connection_class is safe
        assert await _dropped_cancels(redis) == []
    finally:
        await redis.aclose()


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="wait_for hands the cancel on from 3.12")
async def test_the_probe_catches_what_redis_py_own_connection_drops(redis_url: str) -> None:
    """The sweep reaches the moment that matters: the stock connection fails it."""
    pool = BlockingConnectionPool.from_url(
        redis_url, connection_class=Connection, socket_timeout=SOCKET_TIMEOUT_S
    )
    redis = Redis.from_pool(pool)
    try:
        assert await _dropped_cancels(redis, first_only=True) != []
    finally:
        await redis.aclose()
