"""The lean client's Pub/Sub side: a connection in subscribe mode that delivers ``message`` frames
to a callback and subscribes again after a reconnect (the RPC reply channel uses it)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

from redis.exceptions import ConnectionError

from agent_core.bus.resp import RedisAddress, _open, _Protocol, encode

__all__ = ["LeanSubscriber"]

log = logging.getLogger(__name__)


class LeanSubscriber:
    """A Pub/Sub connection: ``message`` frames of the subscribed channels go to ``on_message``
    (channel, data); after a lost connection it reconnects and subscribes again by itself."""

    def __init__(
        self,
        address: RedisAddress,
        on_message: Callable[[bytes, bytes], None],
        *,
        reconnect_s: float = 0.5,
    ) -> None:
        self.address = address
        self._on_message = on_message
        self._channels: set[str] = set()
        self._proto: _Protocol | None = None
        self._task: asyncio.Task[None] | None = None
        self._reconnect_s = reconnect_s
        self.subscribed = asyncio.Event()  # set while the subscriptions are live on a connection

    async def subscribe(self, *channels: str) -> None:
        """Subscribe (connecting first if needed); returns once the server confirmed.

        While the bus is unreachable this waits (the subscriber keeps reconnecting); a caller
        that must not wait long bounds it with ``asyncio.timeout``.
        """
        self._channels.update(channels)
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="lean-subscriber")
        if self._proto is not None and not self._proto.closed:
            await self._subscribe(self._proto, channels)
        await self.subscribed.wait()

    async def aclose(self) -> None:
        """Stop; the connection is closed and no more messages are delivered."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._proto is not None:
            self._proto.fail(ConnectionError("subscriber closed"))

    def _push(self, frame: Any) -> None:
        if isinstance(frame, list) and len(frame) == 3 and frame[0] == b"message":
            try:
                self._on_message(frame[1], frame[2])
            except Exception:  # one bad message must not end the subscription
                log.exception("handling a message of %r failed", frame[1])

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
