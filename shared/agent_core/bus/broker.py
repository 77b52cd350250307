"""Broker and Redis client factories: the only place connections to the bus are configured."""

from __future__ import annotations

import logging

from faststream.redis import RedisBroker
from faststream.redis.subscriber.usecases import basic as _basic
from faststream.redis.subscriber.usecases import stream_subscriber as _streams
from redis.asyncio import BlockingConnectionPool, Redis

from agent_core.bus.connection import CancelSafeConnection

__all__ = ["MAX_BLOCK_MS", "SOCKET_TIMEOUT_S", "make_broker", "make_redis"]


# FastStream logs an INFO line per message; a WARNING-level logger keeps its warnings and the
# CRITICAL "subscriber stopped" lines without drowning the service's own logs.
_FASTSTREAM_LOG = logging.getLogger("soong.faststream")
_FASTSTREAM_LOG.setLevel(logging.WARNING)


# FastStream waits 5 s after a failed read of a subscriber before it reads again. The bus is
# back within a second of a restart (and a frozen process within a moment of waking), and a
# subscriber that waits 5 s more keeps every request it serves waiting too: read again sooner.
_READ_RETRY_S = 0.5
for _module in (_basic, _streams):  # the stream subscriber holds its own copy of the name
    _module.__dict__["CONSUME_ERROR_BACKOFF_SECONDS"] = _READ_RETRY_S


def make_broker(url: str, *, graceful_timeout: float = 15.0) -> RedisBroker:
    """A FastStream Redis broker. No I/O happens here: ``await broker.start()`` connects."""
    return RedisBroker(url, logger=_FASTSTREAM_LOG, graceful_timeout=graceful_timeout)


# redis-py 8 defaults to a 5 s socket timeout, which would cut blocking reads (XREAD BLOCK) of
# run event streams; blocking calls here block for at most MAX_BLOCK_MS, well inside this limit.
SOCKET_TIMEOUT_S = 30.0
MAX_BLOCK_MS = 10_000


# A busy worker runs dozens of runs at once, each with concurrent reads, writes, an event writer
# and a lease heartbeat. redis-py's default pool *fails* past 100 connections; this pool waits
# for a free connection instead (up to POOL_WAIT_S), so load slows a call down, never fails it.
MAX_CONNECTIONS = 512
POOL_WAIT_S = 10.0


def make_redis(url: str) -> Redis:
    """A redis-py asyncio client (hiredis parser when installed) for commands FastStream lacks."""
    # A plain TCP URL gets the connection whose writes never drop a cancel (see its module);
    # others keep redis-py's class for their scheme.
    tcp = {"connection_class": CancelSafeConnection} if url.startswith("redis://") else {}
    pool = BlockingConnectionPool.from_url(
        url,
        **tcp,
        max_connections=MAX_CONNECTIONS,
        timeout=POOL_WAIT_S,
        health_check_interval=30,
        socket_timeout=SOCKET_TIMEOUT_S,
        socket_connect_timeout=5,
    )
    return Redis.from_pool(pool)  # the client owns the pool: aclose() closes its connections
