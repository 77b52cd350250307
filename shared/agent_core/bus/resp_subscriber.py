"""The lean client's Pub/Sub side: a connection in subscribe mode that delivers ``message`` frames
to a callback and subscribes again after a reconnect (the RPC reply channel uses it), and the
same through redis-py's Pub/Sub for the other topologies (sharded channels on a Cluster)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

from redis.exceptions import ConnectionError

from agent_core.bus.pubsub import is_cluster
from agent_core.bus.resp import _open, _Protocol
from agent_core.bus.resp_address import RedisAddress
from agent_core.bus.resp_wire import encode

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
    lean socket does not speak: behind Sentinel a new subscription finds the primary again, with
    TLS it speaks TLS, and on a Cluster the channels are sharded (``SSUBSCRIBE`` on the node of
    each channel's slot, which is where ``SPUBLISH`` delivers; see :mod:`agent_core.bus.pubsub`).
    """

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
        self._sharded = is_cluster(redis)
        self._unconfirmed: set[bytes] = set()  # sharded channels sent but not yet confirmed

    async def subscribe(self, *channels: str) -> None:
        """Subscribe; returns once the server confirmed (waits while the bus is away)."""
        self._channels.update(channels)
        self.subscribed.clear()
        self._changed.set()
        self._start("pubsub-subscriber")
        await self.subscribed.wait()

    async def _run(self) -> None:
        while True:
            self._unconfirmed.clear()  # a new Pub/Sub object subscribes to every channel
            try:
                pubsub = await self._pubsub()
            except Exception as exc:
                log.warning("bus subscription failed: %s: %s", type(exc).__name__, exc)
                await asyncio.sleep(self._reconnect_s)
                continue
            try:
                while True:
                    self._changed.clear()
                    if self._sharded:
                        await self._follow_sharded(pubsub)
                    else:
                        await self._follow(pubsub)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # whatever broke, replies must keep coming: reconnect
                log.warning("bus subscription failed: %s: %s", type(exc).__name__, exc)
            finally:
                self.subscribed.clear()
                with contextlib.suppress(Exception):
                    await pubsub.aclose()
            await asyncio.sleep(self._reconnect_s)

    async def _follow(self, pubsub: Any) -> None:
        """Classic Pub/Sub: subscribe to every channel, deliver until they change."""
        await pubsub.subscribe(*sorted(self._channels))
        self.subscribed.set()
        while not self._changed.is_set():
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
            if message is not None and message.get("type") == "message":
                self._deliver(message["channel"], message["data"])

    async def _follow_sharded(self, pubsub: Any) -> None:
        """Sharded Pub/Sub: subscribe to the channels not subscribed yet, each on its shard, and
        deliver until they change. ``subscribed`` is set once every shard confirmed: a reply
        published before that would be lost, and one cannot be asked for before it is set."""
        new = {c.encode() for c in self._channels} - set(pubsub.shard_channels)
        if new:
            self._unconfirmed.update(new)
            await pubsub.ssubscribe(*sorted(new))
        if not self._unconfirmed:
            self.subscribed.set()
        while not self._changed.is_set():
            if not pubsub.node_pubsub_mapping:  # no shard took a channel: reading would spin
                raise ConnectionError("no node of the Cluster serves the reply channels")
            message = await pubsub.get_sharded_message(timeout=1.0)
            if message is None:
                continue
            if message["type"] == "ssubscribe":
                self._unconfirmed.discard(message["channel"])
                if not self._unconfirmed:
                    self.subscribed.set()
            elif message["type"] == "smessage":
                self._deliver(message["channel"], message["data"])

    async def _pubsub(self) -> Any:
        if not self._sharded:
            return self._redis.pubsub()
        # The reply channels are point to point (one process reads its own), like the control
        # channels: sharded, so only the channel's shard carries a reply, where a classic
        # PUBLISH is forwarded to every node of the Cluster. The Cluster's Pub/Sub object routes
        # each channel to its slot's node, and follows a channel whose slot moved (a failover)
        # once the client has read the new slot map; the slot map is read first here: a client
        # that sent nothing yet knows no node.
        await self._redis.initialize()
        return self._redis.pubsub()
