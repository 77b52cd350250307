"""Request/reply over the bus with one long-lived reply channel per process.

A request is appended to the target stream with two headers, the process's reply channel and a
correlation id; the consumer publishes the reply frame on that channel (Pub/Sub). This replaces
``broker.request``, which opens a subscription per call (~4 ms each). The semantics are the same:
a reply that arrives after the timeout is lost while the request may still run, so only short,
idempotent calls go through here, and a timeout becomes a retryable :class:`BusTimeoutError`.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError
from redis.exceptions import ConnectionError

from agent_core.bus.calls import Bus, speaks_plain_resp
from agent_core.bus.delivery import HEADER_CORRELATION_ID, HEADER_REPLY_TO, decode_reply
from agent_core.bus.publishing import publish
from agent_core.bus.resp_address import RedisAddress
from agent_core.bus.resp_subscriber import LeanSubscriber, PubSubSubscriber
from agent_core.errors import BusTimeoutError, SchemaError

__all__ = ["RpcClient"]

_START_TIMEOUT_S = 10.0

log = logging.getLogger(__name__)

R = TypeVar("R")


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def _adapter(reply: type[R]) -> TypeAdapter[R]:
    """One adapter per reply type: building one costs ~20 µs, more than validating a reply."""
    adapter = _ADAPTERS.get(reply)
    if adapter is None:
        adapter = _ADAPTERS[reply] = TypeAdapter(reply)
    return adapter


class RpcClient:
    """Sends requests and awaits typed replies; one instance per process, started once.

    Requests go out through :func:`publish` (``bus.calls``); replies arrive on a
    :class:`LeanSubscriber`, which subscribes again by itself after the bus restarted (on the
    other topologies a :class:`PubSubSubscriber`; a sharded channel on a Cluster).
    """

    def __init__(self, bus: Bus, reply_channel: str) -> None:
        self._bus = bus
        self._redis = bus.redis
        self._channel = reply_channel
        self._waiting: dict[str, asyncio.Future[bytes]] = {}
        self._replies: LeanSubscriber | PubSubSubscriber | None = None

    async def start(self, timeout_s: float = _START_TIMEOUT_S) -> None:
        """Subscribe to the reply channel; requests made before this would never see a reply.

        A bus that is away is waited for up to ``timeout_s`` (a restart takes a moment); after
        that :class:`redis.exceptions.ConnectionError` says where it was looked for.
        """
        replies: LeanSubscriber | PubSubSubscriber
        if speaks_plain_resp(self._redis):
            address = RedisAddress.of(self._redis)
            where = address.where
            replies = LeanSubscriber(address, self._on_reply)
        else:  # Sentinel, Cluster, TLS: redis-py finds the node (the shard), speaks TLS
            where = "the configured topology"
            replies = PubSubSubscriber(self._redis, self._on_reply)
        try:
            async with asyncio.timeout(timeout_s):
                await replies.subscribe(self._channel)
        except TimeoutError:
            await replies.aclose()
            raise ConnectionError(
                f"cannot subscribe to replies: no bus at {where} within {timeout_s:g}s"
            ) from None
        self._replies = replies

    async def stop(self) -> None:
        """Stop reading replies; pending requests fail with a timeout."""
        if self._replies is not None:
            await self._replies.aclose()
        for fut in self._waiting.values():
            fut.cancel()
        self._waiting.clear()

    async def request(
        self,
        message: BaseModel,
        *,
        stream: str,
        reply: TypeAdapter[R] | type[R],
        timeout_s: float,
        maxlen: int | None = 100_000,
    ) -> R:
        """Send ``message`` to ``stream`` and return the validated reply.

        Raises :class:`BusTimeoutError` (retryable) when no reply came within ``timeout_s`` and
        :class:`SchemaError` when the reply does not match its model.
        """
        if self._replies is None:
            raise RuntimeError("RpcClient.start() was not awaited")
        cid = secrets.token_hex(12)
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._waiting[cid] = fut
        try:
            await publish(
                self._bus,
                stream,
                message,
                headers={HEADER_REPLY_TO: self._channel, HEADER_CORRELATION_ID: cid},
                maxlen=maxlen,
            )
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for returns the reply and drops a
            # cancel that lands as it arrives, and the run being cancelled would go on.
            async with asyncio.timeout(timeout_s):
                body = await fut
        except TimeoutError as exc:
            raise BusTimeoutError(
                "bus_timeout",
                f"no reply from {stream} within {timeout_s:.1f}s",
                details={"stream": stream, "type": getattr(message, "type", None)},
            ) from exc
        finally:
            self._waiting.pop(cid, None)
        adapter: TypeAdapter[R] = reply if isinstance(reply, TypeAdapter) else _adapter(reply)
        try:
            return adapter.validate_json(body)
        except ValidationError as exc:
            raise SchemaError(
                "invalid_reply", f"reply from {stream} does not match its schema"
            ) from exc

    def _on_reply(self, _channel: bytes, frame: bytes) -> None:
        cid, body = decode_reply(frame)
        fut = self._waiting.get(cid)
        if fut is not None and not fut.done():
            fut.set_result(body)
