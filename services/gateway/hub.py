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

On a Cluster one read cannot name streams of two slots, and run streams are tagged by session,
so the hub is off: each client reads its own stream, on a lean socket to the primary of its slot
(taken from a few kept per node, and kept again once its run ended cleanly) rather than through
redis-py's Cluster client, whose cost per read was the gateway's extra CPU on a Cluster. A read
that fails or is redirected there (``MOVED`` after a failover) goes on through redis-py's client
from the same position.

What a streamed event costs the gateway is what this module spends per event, so the path is
kept short: the read goes through a lean client of its own (one command naming every followed
stream, built and parsed without redis-py's pool and retry machinery); an event is checked, not
built (:func:`~agent_core.runqueue.events.forwardable`); a follower waits on its queue without a
timer per event (one idle timer per follower, re-armed only when it fires); and while several
runs stream, a read starts at most every ``_GATHER_S``, so events that arrive close together
are taken by one read rather than one read each.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from agent_core.bus import BusNames
from agent_core.bus.calls import Bus
from agent_core.bus.cluster_calls import ClusterCalls
from agent_core.bus.connection import MAX_BLOCK_MS, SOCKET_TIMEOUT_S
from agent_core.bus.names import BusTtl
from agent_core.bus.resp import LeanRedis
from agent_core.bus.resp_address import RedisAddress
from agent_core.bus.resp_wire import bulk
from agent_core.runqueue import RunEventReader
from agent_core.runqueue.events import RawEvent, forwardable

__all__ = ["EventHub"]

log = logging.getLogger("soong.gateway")

Batch = list[RawEvent]
_RETRY_S = 0.2
# While more than one run streams, reads start at least this far apart (see the docstring).
_GATHER_S = 0.001
# Put in a follower's queue when it has been idle for its idle period (a batch is never empty).
_IDLE: Batch = []


class _Mailbox:
    """What the read hands one follower, in order: an unbounded FIFO with one waiter (what
    ``asyncio.Queue`` does for many getters, at a fraction of its cost per item)."""

    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: deque[Batch | None] = deque()
        self._waiter: asyncio.Future[None] | None = None

    def put_nowait(self, item: Batch | None) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self) -> Batch | None:
        while not self._items:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._items.popleft()


@dataclass(eq=False)
class _Follower:
    key: bytes  # the run's stream, encoded once as a RESP argument (the read names it each time)
    last: str
    # A batch; _IDLE; or None: the hub's read failed, go on alone from ``last``.
    queue: _Mailbox = field(default_factory=_Mailbox)
    fed_at: float = 0.0  # loop time of the last batch put in the queue


class EventHub:
    """Live run events for SSE; :meth:`follow_raw` is :meth:`RunEventReader.follow_raw`'s."""

    def __init__(self, bus: Bus, names: BusNames, *, read_block_ms: int = MAX_BLOCK_MS) -> None:
        self._bus = bus
        self._redis = redis = bus.redis
        # Below the client's socket timeout; a new follower wakes the read anyway.
        self._block_ms = read_block_ms
        self._reader = RunEventReader(redis, names)
        self._names = names
        # This process's own wake stream: a random suffix, never a stored id.
        self._wake_key = names.gateway_wake(secrets.token_hex(8))
        self._wake_last = "0-0"
        self._followers: dict[bytes, _Follower] = {}
        self._task: asyncio.Task[None] | None = None
        self._conn: LeanRedis | None = None
        self._closed = False
        # The one read names streams of any slot and runs on the lean socket: on a Cluster each
        # follower reads its own stream on a lean socket of the cluster's calls (see the module
        # docstring), behind Sentinel or TLS through redis-py.
        self._shared_read = bus.plain
        self._spare: dict[tuple[str, int], list[LeanRedis]] = {}

    async def exists(self, session_id: str, run_id: str) -> bool:
        """Whether the run's Redis stream still exists (it expires after the run ends)."""
        return await self._reader.exists(session_id, run_id)

    async def follow_raw(
        self, session_id: str, run_id: str, *, after: str = "0-0", block_ms: int = 15_000
    ) -> AsyncIterator[Batch | None]:
        """Batches of ``(entry_id, event, json)`` after ``after``; ``None`` after ``block_ms``
        idle (at most ``MAX_BLOCK_MS``); ends after the terminal ``RunFinished``."""
        key = self._names.run_events(session_id, run_id).encode()
        calls = self._bus.calls
        if isinstance(calls, ClusterCalls):
            async for batch in self._follow_on_node(
                calls, session_id, run_id, key, after, block_ms
            ):
                yield batch
            return
        if (
            not self._shared_read
            or key in self._followers
            or (self._task is not None and self._task.done())
        ):
            async for batch in self._reader.follow_raw(
                session_id, run_id, after=after, block_ms=block_ms
            ):
                yield batch
            return
        loop = asyncio.get_running_loop()
        follower = self._followers[key] = _Follower(bulk(key), after, fed_at=loop.time())
        idle_s = min(block_ms, MAX_BLOCK_MS) / 1000
        timer = loop.call_later(idle_s, self._idle_check, follower, idle_s)
        try:
            self._start()
            await self._wake()
            while True:
                item = await follower.queue.get()
                if item is None:
                    break
                if item is _IDLE:
                    yield None
                    continue
                yield item
                if item[-1][1] == "run_finished":
                    return
        finally:
            timer.cancel()
            follower.fed_at = -1.0  # the timer, if it is running now, stops re-arming
            if self._followers.get(key) is follower:
                del self._followers[key]
        async for batch in self._reader.follow_raw(
            session_id, run_id, after=follower.last, block_ms=block_ms
        ):
            yield batch

    async def _follow_on_node(
        self,
        cluster: ClusterCalls,
        session_id: str,
        run_id: str,
        key: bytes,
        after: str,
        block_ms: int,
    ) -> AsyncIterator[Batch | None]:
        """One run's stream on a lean socket to its slot's primary (a Cluster); from where that
        fails, through redis-py's client."""
        last = after
        try:
            address = await cluster.address_of(key)
        except RedisConnectionError:
            address = None
        if address is not None:
            node = (address.host, address.port)
            conn = self._node_socket(node, address)
            fixed = (b"XREAD", b"COUNT", b"500", b"BLOCK", b"%d" % min(block_ms, MAX_BLOCK_MS))
            head = b"*8\r\n" + b"".join(bulk(arg) for arg in (*fixed, b"STREAMS", key))
            ended = False
            try:
                while True:
                    reply: Any = await conn.execute_packed(head + bulk(last.encode()))
                    if not reply:
                        yield None
                        continue
                    batch, ended, unreadable = _batch(reply[0][1])
                    if batch:
                        last = batch[-1][0]
                        yield batch
                    if unreadable:  # redis-py's reader below meets it again and reports it
                        break
                    if ended:
                        return
            except (RedisConnectionError, RedisTimeoutError, ResponseError) as exc:
                log.info(
                    "SSE read on the stream's node failed (%s): going on through redis-py", exc
                )
                if isinstance(exc, ResponseError):  # MOVED: the map changed
                    with contextlib.suppress(RedisConnectionError):
                        await cluster.refresh()
            finally:
                await self._release(node, conn, clean=ended)
        async for item in self._reader.follow_raw(
            session_id, run_id, after=last, block_ms=block_ms
        ):
            yield item

    def _node_socket(self, node: tuple[str, int], address: RedisAddress) -> LeanRedis:
        """A kept socket to ``node``, or a new one to it (``address``: the node, with the bus's
        credentials). Every socket's timeout covers the longest block, so a kept one serves any
        follower."""
        spare = self._spare.get(node)
        if spare:
            return spare.pop()
        return LeanRedis(address, socket_timeout=MAX_BLOCK_MS / 1000 + SOCKET_TIMEOUT_S, retries=0)

    async def _release(self, node: tuple[str, int], conn: LeanRedis, *, clean: bool) -> None:
        """Keep ``conn`` for the next follower on ``node`` (at most 32), or close it. Kept only
        after a clean end: a read abandoned mid-way has its reply still to come."""
        if clean and not self._closed and len(self._spare.setdefault(node, [])) < 32:
            self._spare[node].append(conn)
        else:
            await conn.aclose()

    async def close(self) -> None:
        """Stop the read (followers still waiting see the stream end with an error)."""
        self._closed = True
        for spare in self._spare.values():
            for conn in spare:
                await conn.aclose()
        self._spare.clear()
        if self._conn is not None:  # fails a blocked read at once
            await self._conn.aclose()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(Exception):
            await self._redis.delete(self._wake_key)

    # -- the read ---------------------------------------------------------------------------------

    def _start(self) -> None:
        if self._task is None:
            # A connection of its own: the read blocks it for up to the block time, so its
            # watchdog waits that long plus the usual socket timeout; a failed read is not
            # retried here (the followers go on alone, see _read).
            self._conn = LeanRedis(
                RedisAddress.of(self._redis),
                socket_timeout=self._block_ms / 1000 + SOCKET_TIMEOUT_S,
                retries=0,
            )
            self._task = asyncio.create_task(self._run(), name="sse-hub")

    async def _wake(self) -> None:
        await self._bus.calls.execute_many(
            [
                ["XADD", self._wake_key, "MAXLEN", 8, "*", "w", "1"],
                ["PEXPIRE", self._wake_key, BusTtl.GATEWAY_WAKE_MS],
            ]
        )

    def _idle_check(self, follower: _Follower, idle_s: float) -> None:
        """Tell an idle follower so (its stream sends a keep-alive); re-armed while it follows."""
        if follower.fed_at < 0:
            return
        loop = asyncio.get_running_loop()
        due = follower.fed_at + idle_s
        if loop.time() >= due:
            follower.queue.put_nowait(_IDLE)
            follower.fed_at = due = loop.time()
            due += idle_s
        loop.call_at(due, self._idle_check, follower, idle_s)

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
        fixed = (b"XREAD", b"COUNT", b"500", b"BLOCK", b"%d" % self._block_ms, b"STREAMS")
        head = b"".join(bulk(arg) for arg in fixed)
        wake_arg = bulk(wake)
        loop = asyncio.get_running_loop()
        began = 0.0
        while not self._closed:
            if len(self._followers) > 1:
                pause = began + _GATHER_S - loop.time()
                if pause > 0:
                    await asyncio.sleep(pause)
            began = loop.time()
            # The followers this read serves, as they are now: one that leaves while the read
            # blocks may be replaced by a follower of the same run from an earlier position (a
            # client resuming after the last event it processed, not the last one sent to it);
            # what this read returns is from the old position and must not reach the new one,
            # which the next read serves from its own.
            reading = dict(self._followers)
            # XREAD COUNT 500 BLOCK <ms> STREAMS <wake> <key>… <wake id> <id>…, packed from
            # parts: every followed key is encoded once, when its follower joins.
            parts = [b"*%d\r\n" % (6 + 2 * (len(reading) + 1)), head, wake_arg]
            parts += [f.key for f in reading.values()]
            parts.append(bulk(self._wake_last.encode()))
            parts += [bulk(f.last.encode()) for f in reading.values()]
            try:
                reply: Any = await self._conn.execute_packed(b"".join(parts))
            except (RedisConnectionError, RedisTimeoutError) as exc:
                task = asyncio.current_task()
                if self._closed or (task is not None and task.cancelling()):
                    # close() fails the blocked read this way.
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
        batch, ended, unreadable = _batch(entries)
        if batch:
            follower.last = batch[-1][0]
        if unreadable:  # the follower's own reader meets it again and reports it
            del self._followers[key]
            if batch:
                follower.queue.put_nowait(batch)
            follower.queue.put_nowait(None)
            return
        if ended:
            del self._followers[key]  # nothing follows the end
        follower.fed_at = asyncio.get_running_loop().time()
        follower.queue.put_nowait(batch)


def _batch(entries: list[Any]) -> tuple[Batch, bool, bool]:
    """The events of a read's ``entries`` (each ``[id, [field, value, ...]]`` with the one
    field "data"), in order, up to an entry that cannot be forwarded or through the terminal
    ``RunFinished``: ``(batch, ended, unreadable)``."""
    batch: Batch = []
    for entry_id, fields in entries:
        try:
            kind, raw = forwardable(fields[fields.index(b"data") + 1])
        except ValueError:
            return batch, False, True
        batch.append((_text(entry_id), kind, raw))
        if kind == "run_finished":
            return batch, True, False
    return batch, False, False


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
