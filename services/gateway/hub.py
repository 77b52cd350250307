"""One blocking XREAD for the live run streams of every SSE client of a gateway process.

Following each run with its own blocking XREAD costs a Redis round trip (and a pooled
connection) per event batch per client. With many streams open, events of different runs arrive
together — a run-worker writes the events of all its runs in one pipeline per round — and one
read over every followed stream picks them up at once. The hub keeps that one read going on a
connection of its own: a client registers its stream and position and receives each batch read
for it through a queue; registering wakes the read (an entry added to the hub's own wake stream,
which the read always includes) so that the new stream joins at once.

A second client of the same run is served by the plain per-stream reader instead, and so is
every client of a read that failed or that the server refused (an id out of range, a cluster
whose streams live on different nodes answers CROSSSLOT): each carries on from its position on
its own, and the hub serves the clients that come later. The hub is a shortcut, never the only
way. Batches are queued
without bound; a run's stream is itself bounded (see :mod:`agent_core.runqueue.events`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from agent_core.bus import BusNames
from agent_core.bus.broker import MAX_BLOCK_MS
from agent_core.bus.names import BusTtl
from agent_core.runqueue import RunEventReader
from agent_core.types.runtime import RUNTIME_EVENT, RunFinished, RuntimeEvent

__all__ = ["EventHub"]

log = logging.getLogger("soong.gateway")

Batch = list[tuple[str, RuntimeEvent, bytes]]
_RETRY_S = 0.2


@dataclass(eq=False)
class _Follower:
    last: str
    # A batch, or None: the hub's read failed, go on alone from ``last``.
    queue: asyncio.Queue[Batch | None] = field(default_factory=asyncio.Queue)


class EventHub:
    """Live run events for SSE; :meth:`follow_raw` is :meth:`RunEventReader.follow_raw`'s."""

    def __init__(self, redis: Redis, names: BusNames, *, read_block_ms: int = MAX_BLOCK_MS) -> None:
        self._redis = redis
        # Below the client's socket timeout; a new follower wakes the read anyway.
        self._block_ms = read_block_ms
        self._reader = RunEventReader(redis, names)
        self._names = names
        # This process's own wake stream: a random suffix, never a stored id.
        self._wake_key = names.gateway_wake(secrets.token_hex(8))
        self._wake_last = "0-0"
        self._followers: dict[bytes, _Follower] = {}
        self._task: asyncio.Task[None] | None = None
        self._conn: Redis | None = None
        self._closed = False

    async def exists(self, session_id: str, run_id: str) -> bool:
        """Whether the run's Redis stream still exists (it expires after the run ends)."""
        return await self._reader.exists(session_id, run_id)

    async def follow_raw(
        self, session_id: str, run_id: str, *, after: str = "0-0", block_ms: int = 15_000
    ) -> AsyncIterator[Batch | None]:
        """Batches of ``(entry_id, event, json)`` after ``after``; ``None`` after ``block_ms``
        idle (at most ``MAX_BLOCK_MS``); ends after the terminal ``RunFinished``."""
        key = self._names.run_events(session_id, run_id).encode()
        if key in self._followers or (self._task is not None and self._task.done()):
            async for batch in self._reader.follow_raw(
                session_id, run_id, after=after, block_ms=block_ms
            ):
                yield batch
            return
        follower = self._followers[key] = _Follower(after)
        try:
            self._start()
            await self._wake()
            idle_s = min(block_ms, MAX_BLOCK_MS) / 1000
            while True:
                try:
                    async with asyncio.timeout(idle_s):
                        item = await follower.queue.get()
                except TimeoutError:
                    yield None
                    continue
                if item is None:
                    break
                yield item
                if isinstance(item[-1][1], RunFinished):
                    return
        finally:
            if self._followers.get(key) is follower:
                del self._followers[key]
        async for batch in self._reader.follow_raw(
            session_id, run_id, after=follower.last, block_ms=block_ms
        ):
            yield batch

    async def close(self) -> None:
        """Stop the read (followers still waiting see the stream end with an error)."""
        self._closed = True
        if self._conn is not None:  # breaks a blocked read at once (cancelling may wait it out)
            await self._conn.connection_pool.disconnect()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._conn is not None:
            await self._conn.aclose()
        with contextlib.suppress(Exception):
            await self._redis.delete(self._wake_key)

    # -- the read ---------------------------------------------------------------------------------

    def _start(self) -> None:
        if self._task is None:
            # A connection of its own: the read blocks it for up to MAX_BLOCK_MS at a time.
            pool = self._redis.connection_pool
            own = type(pool)(connection_class=pool.connection_class, **pool.connection_kwargs)
            self._conn = Redis(connection_pool=own)
            self._task = asyncio.create_task(self._run(), name="sse-hub")

    async def _wake(self) -> None:
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.xadd(self._wake_key, {"w": "1"}, maxlen=8, approximate=False)
            pipe.pexpire(self._wake_key, BusTtl.GATEWAY_WAKE_MS)
            await pipe.execute()

    async def _run(self) -> None:
        try:
            await self._read()
        finally:  # however the read ended, nobody is left waiting on it
            self._release_all()

    def _release_all(self) -> None:
        for follower in self._followers.values():
            follower.queue.put_nowait(None)
        self._followers.clear()

    async def _read(self) -> None:
        assert self._conn is not None
        wake = self._wake_key.encode()
        while not self._closed:
            streams: dict[bytes | str | memoryview, int | bytes | str | memoryview] = {
                wake: self._wake_last
            }
            # The followers this read serves, as they are now: one that leaves while the read
            # blocks may be replaced by a follower of the same run from an earlier position (a
            # client resuming after the last event it processed, not the last one sent to it);
            # what this read returns is from the old position and must not reach the new one,
            # which the next read serves from its own.
            reading = dict(self._followers)
            streams.update({key: f.last for key, f in reading.items()})
            try:
                reply: Any = await self._conn.xread(streams, count=500, block=self._block_ms)
            except (RedisConnectionError, RedisTimeoutError) as exc:
                task = asyncio.current_task()
                if self._closed or (task is not None and task.cancelling()):
                    # redis-py can turn the cancellation of a blocked read into this.
                    raise asyncio.CancelledError from exc
                # The followers go on alone; later ones try the hub again.
                log.warning("SSE hub read failed: %s", type(exc).__name__)
                self._release_all()
                await asyncio.sleep(_RETRY_S)
                continue
            except ResponseError as exc:
                # Refused (an id out of range, a cluster's CROSSSLOT): the followers go on alone,
                # and the hub stays on for later ones — one bad read never turns it off.
                log.warning("SSE hub read refused: %s", exc)
                self._release_all()
                await asyncio.sleep(_RETRY_S)
                continue
            for key, entries in reply or ():
                if key == wake:
                    self._wake_last = _text(entries[-1][0])
                    continue
                follower = self._followers.get(key)
                if follower is not None and follower is reading.get(key):
                    self._deliver(key, follower, entries)

    def _deliver(self, key: bytes, follower: _Follower, entries: list[Any]) -> None:
        batch: Batch = []
        for entry_id, fields in entries:
            raw = fields[b"data"]
            try:
                event = RUNTIME_EVENT.validate_json(raw)
            except ValueError:  # the follower's own reader meets it again and reports it
                del self._followers[key]
                if batch:
                    follower.queue.put_nowait(batch)
                follower.queue.put_nowait(None)
                return
            follower.last = _text(entry_id)
            batch.append((follower.last, event, raw))
            if isinstance(event, RunFinished):
                del self._followers[key]  # nothing follows the end
                break
        follower.queue.put_nowait(batch)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
