"""A lean RESP2 client for the request/reply path: one multiplexed socket, no pool.

redis-py spends most of a busy process's bus CPU on its own machinery (a pool checkout with an
async timeout, a retry wrapper, a timer per call). This client keeps only what the hot path
needs (docs/architecture.md, "Bus"):

* one connection per client; a call writes its command and appends a future to a FIFO, and
  replies (parsed by ``hiredis.Reader``) resolve the futures in order — concurrent callers
  pipeline on the one socket, and a batch of commands goes out in a single write;
* commands are encoded as redis-py encodes them (bulk strings; ``str`` as UTF-8, numbers by
  ``repr``), so the bytes on the wire are the same;
* error replies raise the exception redis-py raises (:class:`redis.exceptions.ResponseError` and
  its subclasses); a lost connection fails every pending call with
  :class:`redis.exceptions.ConnectionError`, and the next call connects again (AUTH/SELECT
  first). A call retries a connection failure up to ``retries`` times, as redis-py's default
  retry policy does (at-least-once: a command may have run before the connection broke);
* a server on this host may be reached over its unix socket (``unix://`` URLs): the same
  protocol, without TCP's loopback path — 15 to 40 % less CPU a call on both sides;
* one watchdog timer per client instead of a timer per call: a request unanswered for
  ``socket_timeout`` seconds closes the connection and fails the pending calls with
  :class:`redis.exceptions.TimeoutError`.

:class:`~agent_core.bus.resp_subscriber.LeanSubscriber` is the Pub/Sub side, on the same
protocol; :mod:`agent_core.bus.resp_wire` packs commands and maps error replies, and
:mod:`agent_core.bus.resp_address` parses where to connect.

Only request/reply commands belong here; Lua scripts and admin stay on redis-py. A blocking read
shares no client: the gateway's SSE hub keeps a client of its own for its one blocking XREAD, with
a watchdog that waits out the block (a blocked read would hold up every call queued behind it).
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, cast

import hiredis
from redis.exceptions import (
    AuthenticationError,
    ConnectionError,
    ResponseError,
    TimeoutError,
)

from agent_core.bus.connection import SOCKET_TIMEOUT_S
from agent_core.bus.resp_address import RedisAddress
from agent_core.bus.resp_wire import Arg, Command, encode, error_from

__all__ = ["LeanRedis"]

log = logging.getLogger(__name__)

_CONNECT_TIMEOUT_S = 5.0
_RETRIES = 3  # redis-py's default retry count
_MAX_BACKOFF_S = 1.0


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a failure as seen: every waiter gets it, and none may be left to do so."""
    if not future.cancelled():
        future.exception()


class _Pending:
    """One call waiting for ``count`` replies (a batch is one call)."""

    __slots__ = ("count", "future", "replies", "sent_at")

    def __init__(self, future: asyncio.Future[list[Any]], count: int, sent_at: float) -> None:
        self.future = future
        self.count = count
        self.replies: list[Any] = []
        self.sent_at = sent_at


class _Protocol(asyncio.Protocol):
    """One socket: writes commands, matches replies FIFO to the pending calls."""

    def __init__(self, on_push: Callable[[Any], None] | None = None) -> None:
        self.reader = hiredis.Reader(replyError=ResponseError)
        self.pending: deque[_Pending] = deque()
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # Subscribe mode: ``message`` frames go here, everything else answers a pending call.
        self.on_push = on_push

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without deriving from it
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while True:
            try:
                reply = self.reader.gets()
            except hiredis.ProtocolError as exc:
                self.fail(ConnectionError(f"protocol error from the bus: {exc}"))
                return
            if reply is False:
                return
            if self.on_push is not None and isinstance(reply, list) and reply[:1] == [b"message"]:
                self.on_push(reply)
                continue
            if not self.pending:  # a reply nobody asked for: the stream is out of step
                self.fail(ConnectionError("unexpected reply from the bus"))
                return
            call = self.pending[0]
            call.replies.append(reply)
            if len(call.replies) == call.count:
                self.pending.popleft()
                if not call.future.done():  # the caller may have been cancelled meanwhile
                    call.future.set_result(call.replies)

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail(ConnectionError(f"connection to the bus lost: {exc or 'closed by the server'}"))

    def send(self, payload: bytes, count: int) -> asyncio.Future[list[Any]]:
        """Write ``payload`` (``count`` commands); the future gets their ``count`` replies."""
        if self.closed or self.transport is None:
            raise ConnectionError("connection to the bus is closed")
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self.pending.append(_Pending(future, count, time.monotonic()))
        self.transport.write(payload)
        return future

    def fail(self, exc: Exception) -> None:
        """Close the socket and fail every pending call with ``exc`` (idempotent)."""
        self.closed = True
        if not self.lost.done():
            self.lost.set_result(None)
        if self.transport is not None:
            self.transport.abort()
        while self.pending:
            call = self.pending.popleft()
            if not call.future.done():
                call.future.set_exception(exc)
                call.future.exception()  # a caller gone (cancelled) must not log "never retrieved"


async def _open(address: RedisAddress, on_push: Callable[[Any], None] | None = None) -> _Protocol:
    """Connect and authenticate; raises ``ConnectionError``/``AuthenticationError``."""
    loop = asyncio.get_running_loop()
    try:
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for drops a cancel that lands as
        # the connect completes.
        async with asyncio.timeout(_CONNECT_TIMEOUT_S):
            if address.path is not None:
                _, proto = await loop.create_unix_connection(lambda: _Protocol(), address.path)
            else:
                _, proto = await loop.create_connection(
                    lambda: _Protocol(), address.host, address.port
                )
    except (OSError, builtins.TimeoutError) as exc:  # the builtin: a connect that hung
        raise ConnectionError(f"cannot connect to the bus at {address.where}: {exc}") from exc
    handshake = address.handshake()
    if handshake:
        replies = await proto.send(b"".join(encode(c) for c in handshake), len(handshake))
        for reply in replies:
            if isinstance(reply, ResponseError):
                proto.fail(ConnectionError("handshake failed"))
                err = error_from(reply)
                if isinstance(err, AuthenticationError):
                    raise err
                raise AuthenticationError(str(err))
    proto.on_push = on_push  # after the handshake: its replies are ordinary ones
    return proto


class LeanRedis:
    """Commands over one lazily (re)connected socket; safe for any number of concurrent callers
    on one event loop. ``aclose()`` closes the socket; a later call connects again."""

    def __init__(
        self,
        address: RedisAddress,
        *,
        socket_timeout: float = SOCKET_TIMEOUT_S,
        retries: int = _RETRIES,
    ) -> None:
        self.address = address
        self.socket_timeout = socket_timeout
        self.retries = retries
        self._proto: _Protocol | None = None
        self._connecting: asyncio.Future[_Protocol] | None = None
        self._watchdog: asyncio.TimerHandle | None = None
        self.connects = 0  # how many connections were opened (observability and tests)

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> LeanRedis:
        """A client for a ``redis://`` URL; keyword arguments as for the constructor."""
        return cls(RedisAddress.from_url(url), **kwargs)

    async def execute(self, *args: Arg) -> Any:
        """Run one command; return its reply (bytes, int, list, …, as redis-py's raw reply).

        Raises ``ResponseError`` (or the subclass redis-py would raise) for an error reply,
        ``ConnectionError`` when the bus cannot be reached after the retries, ``TimeoutError``
        when the watchdog gave up on the connection.
        """
        replies = await self._call(encode(args), 1)
        reply = replies[0]
        if isinstance(reply, ResponseError):
            raise error_from(reply)
        return reply

    async def execute_packed(self, payload: bytes) -> Any:
        """Like :meth:`execute`, for one command the caller packed itself (a RESP array of
        :func:`~agent_core.bus.resp_wire.bulk` strings): a command sent again and again with
        mostly the same arguments keeps their encoding instead of encoding every argument each
        time."""
        reply = (await self._call(payload, 1))[0]
        if isinstance(reply, ResponseError):
            raise error_from(reply)
        return reply

    async def execute_many(
        self, commands: Sequence[Command], *, raise_on_error: bool = True
    ) -> list[Any]:
        """Send ``commands`` in one write and return their replies in order.

        Not a transaction: each command runs on its own. With ``raise_on_error`` the first error
        reply is raised (after all replies arrived); otherwise errors are returned in place.
        """
        if not commands:
            return []
        replies = await self._call(b"".join(encode(c) for c in commands), len(commands))
        for i, reply in enumerate(replies):
            if isinstance(reply, ResponseError):
                replies[i] = err = error_from(reply)
                if raise_on_error:
                    raise err
        return replies

    async def transaction(
        self, commands: Sequence[Command], *, then: Sequence[Command] = ()
    ) -> list[Any]:
        """Run ``commands`` as one ``MULTI``/``EXEC`` transaction, sent in one write with the
        commands ``then`` that follow it (each on its own: on a Cluster they may live in
        another slot); return the transaction's replies. The first error raises, as redis-py's
        transactional pipeline does: a command refused while queued aborts the transaction
        (nothing runs); one that fails while running leaves the others applied, as Redis does."""
        replies = await self.execute_many([["MULTI"], *commands, ["EXEC"], *then])
        results: list[Any] = replies[len(commands) + 1]
        for reply in results:
            if isinstance(reply, ResponseError):
                raise error_from(reply)
        return results

    async def aclose(self) -> None:
        """Close the socket; pending calls fail with ``ConnectionError``."""
        proto, self._proto = self._proto, None
        if proto is not None:
            proto.fail(ConnectionError("client closed"))
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None

    async def _call(self, payload: bytes, count: int) -> list[Any]:
        failures = 0
        while True:
            try:
                proto = self._proto
                if proto is None or proto.closed:
                    proto = await self._connect()
                future = proto.send(payload, count)
                self._arm_watchdog()
                return await future
            except TimeoutError:
                raise
            except ConnectionError:
                failures += 1
                if failures > self.retries:
                    raise
                await asyncio.sleep(min(_MAX_BACKOFF_S, 0.05 * 2**failures))

    async def _connect(self) -> _Protocol:
        connecting = self._connecting
        if connecting is None:  # one connect for all the callers that need it at once
            connecting = self._connecting = asyncio.ensure_future(self._open())
            connecting.add_done_callback(_retrieve)
        try:
            return await asyncio.shield(connecting)  # a cancelled caller leaves it to the others
        finally:
            if connecting.done() and self._connecting is connecting:
                self._connecting = None

    async def _open(self) -> _Protocol:
        proto = await _open(self.address)
        self._proto = proto
        self.connects += 1
        return proto

    # -- the watchdog: one timer per client, armed only while calls are pending ---------------

    def _arm_watchdog(self) -> None:
        if self._watchdog is None:
            interval = min(1.0, self.socket_timeout / 4)
            self._watchdog = asyncio.get_running_loop().call_later(interval, self._check)

    def _check(self) -> None:
        self._watchdog = None
        proto = self._proto
        if proto is None or proto.closed or not proto.pending:
            return
        age = time.monotonic() - proto.pending[0].sent_at
        if age > self.socket_timeout:
            log.warning("bus request unanswered for %.1fs: closing the connection", age)
            proto.fail(TimeoutError(f"no reply from the bus within {self.socket_timeout:.1f}s"))
            return
        self._arm_watchdog()
