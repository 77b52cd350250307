"""Broker and Redis client factories: the only place connections to the bus are configured."""

from __future__ import annotations

import logging

from faststream.redis import RedisBroker
from faststream.redis.subscriber.usecases import basic as _basic
from faststream.redis.subscriber.usecases import stream_subscriber as _streams

# make_redis and its limits live beside the connection class, so that a command needing only
# Redis does not import FastStream; re-exported here where they were first defined.
from agent_core.bus.connection import MAX_BLOCK_MS, SOCKET_TIMEOUT_S, make_redis

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
