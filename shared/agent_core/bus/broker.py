"""Broker and Redis client factories: the only place connections to the bus are configured."""

from __future__ import annotations

import logging

from faststream.redis import RedisBroker
from redis.asyncio import Redis

__all__ = ["MAX_BLOCK_MS", "SOCKET_TIMEOUT_S", "make_broker", "make_redis"]


# FastStream logs an INFO line per message; a WARNING-level logger keeps its warnings and the
# CRITICAL "subscriber stopped" lines without drowning the service's own logs.
_FASTSTREAM_LOG = logging.getLogger("soong.faststream")
_FASTSTREAM_LOG.setLevel(logging.WARNING)


def make_broker(url: str, *, graceful_timeout: float = 15.0) -> RedisBroker:
    """A FastStream Redis broker. No I/O happens here: ``await broker.start()`` connects."""
    return RedisBroker(url, logger=_FASTSTREAM_LOG, graceful_timeout=graceful_timeout)


# redis-py 8 defaults to a 5 s socket timeout, which would cut blocking reads (XREAD BLOCK) of
# run event streams; blocking calls here block for at most MAX_BLOCK_MS, well inside this limit.
SOCKET_TIMEOUT_S = 30.0
MAX_BLOCK_MS = 10_000


def make_redis(url: str) -> Redis:
    """A redis-py asyncio client (hiredis parser when installed) for commands FastStream lacks."""
    return Redis.from_url(
        url, health_check_interval=30, socket_timeout=SOCKET_TIMEOUT_S, socket_connect_timeout=5
    )
