"""redis-py's connections (TCP and unix socket) with a write that never drops a cancel.

redis-py bounds a command's write with ``asyncio.wait_for`` when a socket timeout is set. On
Python 3.11 ``wait_for`` returns the result and drops a cancel that lands as the awaited work
completes, so a task cancelled at that moment goes on as if nothing happened: a lease heartbeat
stopped that way renewed its lease forever (docs/architecture.md, "Faults and recovery"), and a
run cancelled as one of its writes completed would not stop. :class:`CancelSafeConnection` (and
:class:`CancelSafeUnixConnection`, the same for a unix socket) bounds the same write with
``asyncio.timeout``, which hands the cancel on; everything else, reads included (they already use
``asyncio.timeout``), is redis-py's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast
from urllib.parse import unquote, urlsplit

from redis._parsers.commands import AsyncCommandsParser
from redis.asyncio import BlockingConnectionPool, Connection, Redis, RedisCluster, Sentinel
from redis.asyncio.connection import AbstractConnection, UnixDomainSocketConnection, parse_url
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

__all__ = [
    "MAX_BLOCK_MS",
    "SOCKET_TIMEOUT_S",
    "BusTls",
    "CancelSafeConnection",
    "CancelSafeUnixConnection",
    "StreamReadKeys",
    "connect_bus",
    "make_redis",
]


class _CancelSafeWrites(AbstractConnection):
    """The write of :class:`CancelSafeConnection`, for either transport.

    The contract is redis-py's: a write that outlasts ``socket_timeout`` closes the connection and
    raises redis-py's ``TimeoutError``; an ``OSError`` closes it and raises its
    ``ConnectionError``; any other interruption (a cancel) closes it (the command may be half
    sent) and propagates.
    """

    async def send_packed_command(
        self, command: bytes | str | Iterable[bytes], check_health: bool = True
    ) -> None:
        if not self.is_connected:
            await self.connect_check_health(check_health=False)
        if check_health:
            await self.check_health()  # type: ignore[no-untyped-call]
        if isinstance(command, str):
            command = command.encode()
        if isinstance(command, bytes):
            command = [command]
        writer = self._writer
        assert writer is not None  # connected above
        try:
            async with asyncio.timeout(self.socket_timeout):
                writer.writelines(command)
                await writer.drain()
        except TimeoutError:  # before OSError: on 3.11 TimeoutError is one
            await self.disconnect(nowait=True)
            raise RedisTimeoutError("Timeout writing to socket") from None
        except OSError as exc:
            await self.disconnect(nowait=True)
            raise RedisConnectionError(f"Error while writing to socket: {exc}") from exc
        except BaseException:
            await self.disconnect(nowait=True)
            raise


class CancelSafeConnection(_CancelSafeWrites, Connection):
    """A :class:`redis.asyncio.Connection` (TCP) whose writes are cancelled like any other
    await (see the module docstring)."""


class CancelSafeUnixConnection(_CancelSafeWrites, UnixDomainSocketConnection):
    """The same for a unix socket (``unix://`` URLs)."""


# The connection class a URL's own gets replaced with; others (TLS) keep redis-py's.
_CANCEL_SAFE: dict[type[AbstractConnection], type[AbstractConnection]] = {
    Connection: CancelSafeConnection,
    UnixDomainSocketConnection: CancelSafeUnixConnection,
}


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
    # What BlockingConnectionPool.from_url does (the URL's options win over these), except that a
    # TCP or unix socket URL gets the connection whose writes never drop a cancel (see the
    # module); TLS keeps redis-py's class.
    options: dict[str, Any] = {
        "max_connections": MAX_CONNECTIONS,
        "timeout": POOL_WAIT_S,
        "health_check_interval": 30,
        "socket_timeout": SOCKET_TIMEOUT_S,
        "socket_connect_timeout": 5,
    }
    options.update(parse_url(url))
    given = options.get("connection_class", Connection)
    options["connection_class"] = _CANCEL_SAFE.get(given, given)
    pool = BlockingConnectionPool(**options)
    return Redis.from_pool(pool)  # the client owns the pool: aclose() closes its connections


@dataclass(frozen=True, slots=True)
class BusTls:
    """TLS for a ``rediss://`` bus: the CA that signs the servers' certificates and, when the
    servers ask for one, this client's certificate and key (PEM files)."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None

    def redis_kwargs(self) -> dict[str, Any]:
        """redis-py's keyword arguments for these files (a server certificate is required)."""
        return {
            "ssl_ca_certs": self.ca_file,
            "ssl_certfile": self.cert_file,
            "ssl_keyfile": self.key_file,
            "ssl_cert_reqs": "required",
        }


def connect_bus(
    url: str,
    *,
    topology: Literal["standalone", "sentinel", "cluster"] = "standalone",
    sentinels: Sequence[tuple[str, int]] = (),
    sentinel_master: str | None = None,
    tls: BusTls | None = None,
) -> Redis:
    """The process's redis-py client of the bus, for its topology.

    * ``standalone``: :func:`make_redis` (one node; ``rediss://`` for TLS);
    * ``sentinel``: the primary named ``sentinel_master``, found through ``sentinels`` and found
      again after a failover (the URL gives the password, the database and the scheme only);
    * ``cluster``: a Cluster client that reads the slot map from the URL's node and follows
      ``MOVED``/``ASK``; it offers the same commands (typed as :class:`Redis` for its callers).
    """
    secure = url.startswith("rediss://")
    tls_kw = (tls or BusTls()).redis_kwargs() if secure else {}
    common: dict[str, Any] = {
        "socket_timeout": SOCKET_TIMEOUT_S,
        "socket_connect_timeout": 5,
        "health_check_interval": 30,
    }
    if topology == "standalone":
        if not secure:
            return make_redis(url)
        pool = BlockingConnectionPool.from_url(
            url, max_connections=MAX_CONNECTIONS, timeout=POOL_WAIT_S, **common, **tls_kw
        )
        return Redis.from_pool(pool)
    parts = urlsplit(url)
    password = unquote(parts.password) if parts.password else None
    username = unquote(parts.username) if parts.username else None
    if topology == "sentinel":
        if not sentinels or not sentinel_master:
            raise ValueError("a sentinel bus needs its sentinels and the primary's name")
        db = int(parts.path.strip("/") or 0)
        watcher = Sentinel(  # type: ignore[no-untyped-call]
            list(sentinels),
            # The sentinels speak what the data nodes speak: redis-py's Sentinel takes the
            # scheme of neither from the URL, so TLS is asked for here as for the primary.
            sentinel_kwargs={
                "socket_timeout": 5,
                "socket_connect_timeout": 5,
                "ssl": secure,
                **tls_kw,
            },
            password=password,
            username=username,
            db=db,
            ssl=secure,
            **common,
            **tls_kw,
        )
        primary: Redis = watcher.master_for(sentinel_master, max_connections=MAX_CONNECTIONS)
        return primary
    cluster = RedisCluster.from_url(
        url, max_connections=MAX_CONNECTIONS, **common, **tls_kw, require_full_coverage=True
    )
    cluster.commands_parser = StreamReadKeys()
    return cast("Redis", cluster)


class StreamReadKeys(AsyncCommandsParser):
    """redis-py's Cluster command parser, with the keys of ``XREAD`` and ``XREADGROUP`` read
    from the command itself.

    Their keys "move" (they follow ``STREAMS``), and for such a command redis-py's Cluster client
    asks a node ``COMMAND GETKEYS`` before sending it, twice (once to choose the command's
    policy, once its node): every blocking read of every consumer and SSE follower cost three
    round trips, and the Cluster's background commands doubled (docs/performance.md, "On a
    Valkey Cluster"). The keys are the first half of the arguments after ``STREAMS``; a
    command this cannot read (no ``STREAMS``, an odd count) goes to redis-py's parser as before.
    """

    async def get_keys(self, *args: Any) -> tuple[Any, ...] | None:
        keys = stream_read_keys(args)
        if keys is not None:
            return keys
        return await super().get_keys(*args)


def stream_read_keys(args: Sequence[Any]) -> tuple[Any, ...] | None:
    """The stream keys of an ``XREAD``/``XREADGROUP`` command (its arguments, name first), or
    ``None`` when ``args`` is not one of those or names no keys in a readable form."""
    if not args or _upper(args[0]) not in (b"XREAD", b"XREADGROUP"):
        return None
    i = 1
    while i < len(args):  # the options before STREAMS, skipped with their values: a group
        word = _upper(args[i])  # or a consumer may be named "streams"
        if word == b"STREAMS":
            rest = args[i + 1 :]
            if not rest or len(rest) % 2:
                return None
            return tuple(rest[: len(rest) // 2])
        width = _OPTION_WIDTH.get(word)
        if width is None:
            return None
        i += width
    return None


# XREAD [COUNT n] [BLOCK ms] STREAMS …; XREADGROUP GROUP g c [COUNT n] [BLOCK ms] [NOACK] STREAMS …
_OPTION_WIDTH = {b"GROUP": 3, b"COUNT": 2, b"BLOCK": 2, b"NOACK": 1}


def _upper(arg: Any) -> bytes:
    if isinstance(arg, str):
        return arg.upper().encode()
    if isinstance(arg, bytes):
        return arg.upper()
    return b""
