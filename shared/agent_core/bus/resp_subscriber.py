"""The lean client's Pub/Sub side: a connection in subscribe mode that delivers ``message`` frames
to a callback and subscribes again after a reconnect (the RPC reply channel uses it)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Sequence
from typing import Any

from redis.exceptions import ConnectionError

from agent_core.bus.resp import RedisAddress, _open, _Protocol, encode

__all__ = ["LeanSubscriber", "PubSubSubscriber"]

log = logging.getLogger(__name__)


class _Subscriber:
    """What both subscribers share: the channels, the task that keeps the subscription up, the
    ``subscribed`` event, and delivery that survives a failing callback."""

    def __init__(self, on_message: Callable[[bytes, bytes], None], reconnect_s: float) -> None:
        self._on_message = on_message
        self._channels: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self._reconnect_s = reconnect_s
        self.subscribed = asyncio.Event()  # set while the subscriptions are live on a connection

    def _start(self, name: str) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=name)

    async def _run(self) -> None:
        raise NotImplementedError

    async def aclose(self) -> None:
        """Stop; no more messages are delivered."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _deliver(self, channel: bytes, data: bytes) -> None:
        try:
            self._on_message(channel, data)
        except Exception:  # one bad message must not end the subscription
            log.exception("handling a message of %r failed", channel)


class LeanSubscriber(_Subscriber):
    """A Pub/Sub connection: ``message`` frames of the subscribed channels go to ``on_message``
    (channel, data); after a lost connection it reconnects and subscribes again by itself."""

    def __init__(
        self,
        address: RedisAddress,
        on_message: Callable[[bytes, bytes], None],
        *,
        reconnect_s: float = 0.5,
    ) -> None:
        super().__init__(on_message, reconnect_s)
        self.address = address
        self._proto: _Protocol | None = None

    async def subscribe(self, *channels: str) -> None:
        """Subscribe (connecting first if needed); returns once the server confirmed.

        While the bus is unreachable this waits (the subscriber keeps reconnecting); a caller
        that must not wait long bounds it with ``asyncio.timeout``.
        """
        self._channels.update(channels)
        self._start("lean-subscriber")
        if self._proto is not None and not self._proto.closed:
            await self._subscribe(self._proto, channels)
        await self.subscribed.wait()

    async def aclose(self) -> None:
        """Stop; the connection is closed and no more messages are delivered."""
        await super().aclose()
        if self._proto is not None:
            self._proto.fail(ConnectionError("subscriber closed"))

    def _push(self, frame: Any) -> None:
        if isinstance(frame, list) and len(frame) == 3 and frame[0] == b"message":
            self._deliver(frame[1], frame[2])

    async def _subscribe(self, proto: _Protocol, channels: Sequence[str]) -> None:
        # A SUBSCRIBE confirmation per channel, in order, while other frames arrive as pushes.
        if channels:
            await proto.send(encode(["SUBSCRIBE", *channels]), len(channels))

    async def _run(self) -> None:
        while True:
            try:
                proto = self._proto = await _open(self.address, self._push)
                await self._subscribe(proto, sorted(self._channels))
                self.subscribed.set()
                await proto.lost
            except Exception as exc:  # whatever broke, replies must keep coming: reconnect
                log.warning("bus subscription failed: %s: %s", type(exc).__name__, exc)
            self.subscribed.clear()
            await asyncio.sleep(self._reconnect_s)


class PubSubSubscriber(_Subscriber):
    """:class:`LeanSubscriber`'s contract through redis-py's Pub/Sub, for the topologies the
    lean socket does not speak: behind Sentinel a new subscription finds the primary again, on a
    Cluster it picks a node of the slot map, with TLS it speaks TLS."""

    def __init__(
        self,
        redis: Any,
        on_message: Callable[[bytes, bytes], None],
        *,
        reconnect_s: float = 0.5,
    ) -> None:
        super().__init__(on_message, reconnect_s)
        self._redis = redis
        self._changed = asyncio.Event()

    async def subscribe(self, *channels: str) -> None:
        """Subscribe; returns once the server confirmed (waits while the bus is away)."""
        self._channels.update(channels)
        self.subscribed.clear()
        self._changed.set()
        self._start("pubsub-subscriber")
        await self.subscribed.wait()

    async def _run(self) -> None:
        while True:
            try:
                pubsub = await self._pubsub()
            except Exception as exc:
                log.warning("bus subscription failed: %s: %s", type(exc).__name__, exc)
                await asyncio.sleep(self._reconnect_s)
                continue
            try:
                while True:
                    self._changed.clear()
                    await pubsub.subscribe(*sorted(self._channels))
                    self.subscribed.set()
                    while not self._changed.is_set():
                        message = await pubsub.get_message(
                            ignore_subscribe_messages=True, timeout=1.0
                        )
                        if message is not None and message.get("type") == "message":
                            self._deliver(message["channel"], message["data"])
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # whatever broke, replies must keep coming: reconnect
                log.warning("bus subscription failed: %s: %s", type(exc).__name__, exc)
            finally:
                self.subscribed.clear()
                with contextlib.suppress(Exception):
                    await pubsub.aclose()
            await asyncio.sleep(self._reconnect_s)

    async def _pubsub(self) -> Any:
        if not hasattr(self._redis, "get_nodes"):
            return self._redis.pubsub()
        # A Cluster forwards every PUBLISH to every node: any node will do, a random one each
        # time (a node that died is left for another on the next try). The slot map is read
        # first: a client that sent nothing yet knows no node.
        await self._redis.initialize()
        return self._redis.pubsub(node=random.choice(self._redis.get_nodes()))
