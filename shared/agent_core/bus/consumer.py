"""A typed, never-crashing consumer of one stream in one consumer group.

Lifecycle of an entry:

* read with ``XREADGROUP >`` (``max_records`` always set, blocking up to the polling interval) by
  this class's own loop: every stream of every service is read this one way (docs/architecture.md,
  "The bus", says why not through a framework's subscriber);
* decoded and validated against the stream's union — a malformed entry, an unknown ``type`` or an
  invalid message goes to the dead-letter stream with the reason and is acknowledged;
* handled; on success acknowledged (and the reply, if any, published to the sender's channel);
* if the handler raises, the entry stays pending. :mod:`agent_core.bus.recovery` re-delivers it
  after ``min_idle_ms`` and dead-letters it once it has been delivered ``max_deliveries`` times.

Handlers must be idempotent: recovery re-delivers whole batches, and a crash between the work and
the XACK delivers the entry again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, TypeAdapter
from redis.exceptions import ResponseError

from agent_core.bus.calls import Bus
from agent_core.bus.codec import DecodeError, decode_fields, validate_body
from agent_core.bus.connection import SOCKET_TIMEOUT_S
from agent_core.bus.dead_letters import DeadLetterSink
from agent_core.bus.delivery import Delivery, encode_reply
from agent_core.bus.pubsub import is_cluster, publish_command
from agent_core.bus.resp import LeanRedis
from agent_core.bus.resp_address import RedisAddress
from agent_core.bus.resp_wire import Arg, encode
from agent_core.observability.tracing import attach_context, context_from

__all__ = ["BatchHandler", "ConsumerOptions", "Handler", "RawEntry", "StreamConsumer"]

log = logging.getLogger(__name__)

T = TypeVar("T")
Handler = Callable[[T, Delivery], Awaitable[BaseModel | None]]
BatchHandler = Callable[[list[tuple[T, Delivery]]], Awaitable[Sequence[BaseModel | None]]]


@dataclass(frozen=True, slots=True)
class ConsumerOptions:
    """How a consumer reads and recovers.

    ``min_idle_ms`` must exceed the longest handler: an entry idle that long is assumed to belong
    to a dead consumer and is re-delivered.
    """

    max_records: int = 16
    batch: bool = False
    min_idle_ms: int = 30_000
    max_deliveries: int = 5
    claim_interval_s: float = 1.0
    # How long one read blocks when the stream is idle. An entry ends the read at once, so this
    # is no delay: it is how often an idle consumer asks again (each ask a round trip and a
    # wake-up of the process; at 100 ms an idle stack spent a tenth of a core on them).
    # Stopping does not wait for it: a read blocked with nothing in hand is cancelled.
    polling_interval_ms: int = 2_000


# After a failed read: the bus is back within a second of a restart, and a reader that waits
# longer keeps every request it serves waiting too.
_READ_RETRY_S = 0.5


@dataclass(frozen=True, slots=True)
class RawEntry:
    """A stream entry as read from Redis, with its delivery count."""

    entry_id: str
    fields: dict[Any, Any]
    deliveries: int


class StreamConsumer(Generic[T]):
    """Consumes one stream for one group; see the module docstring for the guarantees."""

    def __init__(
        self,
        *,
        stream: str,
        group: str,
        consumer: str,
        adapter: TypeAdapter[T],
        dead_letters: DeadLetterSink,
        bus: Bus,
        handler: Handler[T] | None = None,
        batch_handler: BatchHandler[T] | None = None,
        options: ConsumerOptions | None = None,
    ) -> None:
        if (handler is None) == (batch_handler is None):
            raise ValueError("give exactly one of handler and batch_handler")
        self.stream = stream
        self.group = group
        self.consumer = consumer
        self.options = options or ConsumerOptions(batch=batch_handler is not None)
        self._adapter = adapter
        self._handler = handler
        self._batch_handler = batch_handler
        self._dead = dead_letters
        self.bus = bus
        self.redis = bus.redis
        self._reader: asyncio.Task[None] | None = None
        self._stopping = False
        self._waiting = False  # blocked in a read, nothing in hand: stopping cancels it

    # -- reading ---------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the reading loop is alive (it stops for good on NOGROUP)."""
        return self._reader is not None and not self._reader.done()

    def start_reading(self) -> None:
        """Start the reading loop (after the group exists and this consumer's own pending
        entries were drained); no-op when it runs."""
        if self._reader is None:
            self._stopping = False
            self._reader = asyncio.create_task(self._read_loop(), name=f"read:{self.stream}")

    async def stop_reading(self, timeout_s: float) -> None:
        """Stop intake: what is being handled finishes (up to ``timeout_s``, then it is
        cancelled and stays pending, to be re-delivered), nothing more is read."""
        task, self._reader = self._reader, None
        if task is None:
            return
        self._stopping = True
        if self._waiting:
            # Entries the server hands over as the read is cancelled stay pending for this
            # consumer, which drains them when it starts again (or recovery re-delivers them).
            task.cancel()
        await asyncio.wait({task}, timeout=timeout_s)
        if not task.done():
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _read_loop(self) -> None:
        """``XREADGROUP >`` in a loop, each read blocking up to ``polling_interval_ms``; entries
        are processed one by one, or as one batch."""
        opts = self.options
        lean = _LeanGroupRead(self) if self.bus.plain else None
        try:
            while not self._stopping:
                entries = await self._read_once(lean or self._read_redis_py)
                if entries is None:
                    return
                if not entries:
                    continue
                groups = [entries] if opts.batch else [[e] for e in entries]
                for group in groups:
                    try:
                        await self.process(group)
                    except Exception:  # the bus failed mid-way: the entries stay pending
                        log.exception("processing %s failed; the entries stay pending", self.stream)
        finally:
            if lean is not None:
                await lean.aclose()

    async def _read_once(
        self, read: Callable[[], Awaitable[list[RawEntry]]]
    ) -> list[RawEntry] | None:
        """One read's entries; none after a failed read (logged, then waited out), ``None``
        once the group is gone."""
        self._waiting = True
        try:
            return await read()
        except ResponseError as exc:
            # The group is gone (the stream deleted): stop for good; the watchdog sees the
            # reader dead and restarts the process, which creates the group again.
            if "NOGROUP" in str(exc):
                log.critical("reading %s stopped: %s", self.stream, exc)
                return None
            log.warning("reading %s failed: %s", self.stream, exc)
        except Exception as exc:  # the bus restarting, a connection cut: read again soon
            log.warning("reading %s failed: %s: %s", self.stream, type(exc).__name__, exc)
        finally:
            self._waiting = False
        await asyncio.sleep(_READ_RETRY_S)
        return []

    async def _read_redis_py(self) -> list[RawEntry]:
        """One read through redis-py: behind Sentinel, on TLS or a Cluster (its routing)."""
        opts = self.options
        reply: Any = await self.redis.xreadgroup(
            self.group,
            self.consumer,
            {self.stream: ">"},
            count=opts.max_records,
            block=opts.polling_interval_ms,
        )
        if not reply:
            return []
        return [RawEntry(_id(i), fields, 1) for i, fields in reply[0][1]]

    async def ensure_group(self) -> None:
        """Create the group at id 0 with MKSTREAM, so nothing published earlier is missed."""
        try:
            await self.redis.xgroup_create(self.stream, self.group, id="0", mkstream=True)
        except Exception as exc:  # BUSYGROUP: the group exists, which is what we want
            if "BUSYGROUP" not in str(exc):
                raise

    # -- processing --------------------------------------------------------------------------

    async def process(self, entries: Sequence[RawEntry]) -> list[str]:
        """Decode, handle and acknowledge ``entries``; return the ids that were acknowledged.

        Entries whose handling failed stay pending, unless they reached the delivery cap, in
        which case they are dead-lettered.
        """
        decoded: list[tuple[T, Delivery, bytes]] = []
        for entry in entries:
            try:
                body, headers = decode_fields(entry.fields)
                message = validate_body(self._adapter, body)
            except DecodeError as exc:
                await self._dead.put(
                    source_stream=self.stream,
                    group=self.group,
                    entry_id=entry.entry_id,
                    reason=exc.reason,
                    error=exc.error,
                    deliveries=entry.deliveries,
                    body=_raw_preview(entry.fields),
                )
                continue
            delivery = Delivery(self.stream, entry.entry_id, entry.deliveries, headers)
            decoded.append((message, delivery, body))
        if not decoded:
            return []
        if self._batch_handler is not None:
            return await self._process_batch(decoded)
        return await self._process_each(decoded)

    async def _process_each(self, decoded: list[tuple[T, Delivery, bytes]]) -> list[str]:
        assert self._handler is not None
        acked: list[str] = []
        for message, delivery, body in decoded:
            try:
                with attach_context(context_from(delivery.headers)):  # the sender's trace goes on
                    reply = await self._handler(message, delivery)
            except Exception as exc:
                await self._on_failure(delivery, body, exc)
                continue
            await self._reply(delivery, reply)
            await self.redis.xack(self.stream, self.group, delivery.entry_id)
            acked.append(delivery.entry_id)
        return acked

    async def _process_batch(self, decoded: list[tuple[T, Delivery, bytes]]) -> list[str]:
        assert self._batch_handler is not None
        try:
            replies = await self._batch_handler([(m, d) for m, d, _ in decoded])
        except Exception as exc:
            for _, delivery, body in decoded:
                await self._on_failure(delivery, body, exc)
            return []
        ids = [d.entry_id for _, d, _ in decoded]
        # Every reply and the acknowledgement in one write on the lean client's socket
        # (agent_core.bus.resp): a batch pays one round trip, not N.
        commands: list[list[Arg]] = []
        for (_, delivery, _), reply in zip(decoded, replies, strict=True):
            frame = _reply_frame(delivery, reply)
            if frame is not None:
                commands.append([publish_command(self.redis), frame[0], frame[1]])
        commands.append(["XACK", self.stream, self.group, *ids])
        await self.bus.calls.execute_many(commands)
        return ids

    async def _on_failure(self, delivery: Delivery, body: bytes, exc: BaseException) -> None:
        if delivery.deliveries >= self.options.max_deliveries:
            await self._dead.put(
                source_stream=self.stream,
                group=self.group,
                entry_id=delivery.entry_id,
                reason="delivery_cap",
                error=f"{type(exc).__name__}: {exc}",
                deliveries=delivery.deliveries,
                body=body,
                headers=delivery.headers,
            )
        else:
            log.warning(
                "handler failed on %s %s (delivery %d/%d): %s: %s",
                self.stream,
                delivery.entry_id,
                delivery.deliveries,
                self.options.max_deliveries,
                type(exc).__name__,
                exc,
            )

    async def _reply(self, delivery: Delivery, reply: BaseModel | None) -> None:
        frame = _reply_frame(delivery, reply)
        if frame is not None:
            # Sharded on a Cluster (agent_core.bus.pubsub says why), classic elsewhere.
            await (self.redis.spublish if is_cluster(self.redis) else self.redis.publish)(*frame)


def _reply_frame(delivery: Delivery, reply: BaseModel | None) -> tuple[str, bytes] | None:
    if reply is None or delivery.reply_to is None or delivery.correlation_id is None:
        return None
    return delivery.reply_to, encode_reply(
        delivery.correlation_id, reply.model_dump_json().encode()
    )


class _LeanGroupRead:
    """A consumer's ``XREADGROUP >`` on a lean socket of its own (a single plain node).

    redis-py spends ~65 µs of CPU a read beside the lean client (a pool checkout, its retry
    wrapper, its command packer and its reply hooks: 125 against 61 µs a read of 8 entries,
    measured on this project's machine); every service reads every stream this way, the
    storage-writer once a batch. The command is packed once. The socket is the consumer's own,
    since a blocked read holds up whatever is queued behind it on a connection; its watchdog
    waits out the block. It is not retried here: the loop logs a failure and reads again. A
    cancelled read (the consumer stopping) leaves what the server hands over pending for this
    consumer, as with redis-py, and :meth:`aclose` drops the socket.
    """

    def __init__(self, consumer: StreamConsumer[Any]) -> None:
        opts = consumer.options
        self._command = encode(
            [
                b"XREADGROUP", b"GROUP", consumer.group, consumer.consumer,
                b"COUNT", opts.max_records, b"BLOCK", opts.polling_interval_ms,
                b"STREAMS", consumer.stream, b">",
            ]
        )  # fmt: skip
        self._conn = LeanRedis(
            RedisAddress.of(consumer.redis),
            socket_timeout=opts.polling_interval_ms / 1000 + SOCKET_TIMEOUT_S,
            retries=0,
        )

    async def __call__(self) -> list[RawEntry]:
        reply: Any = await self._conn.execute_packed(self._command)
        if not reply:
            return []
        # [[stream, [[id, [field, value, ...]], ...]]]; a field list is nil only for an entry
        # deleted while pending, which ``>`` never returns.
        return [RawEntry(entry_id.decode(), _pairs(flat), 1) for entry_id, flat in reply[0][1]]

    async def aclose(self) -> None:
        await self._conn.aclose()


def _pairs(flat: list[bytes] | None) -> dict[bytes, bytes]:
    if not flat:
        return {}
    it = iter(flat)
    return dict(zip(it, it, strict=True))


def _id(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _raw_preview(fields: dict[Any, Any]) -> bytes:
    data = fields.get(b"__data__", fields.get("__data__"))
    if isinstance(data, bytes):
        return data
    return repr(fields).encode()
