"""Recovery of pending entries, which ``XREADGROUP >`` never re-delivers by itself.

* :func:`drain_own` — at start-up, before reading new entries, re-process what this consumer
  name still holds from a previous life (stable consumer names make this work).
* :func:`reclaim_idle` — periodically, take over entries that another consumer has held longer
  than ``min_idle_ms`` (it died, or it is stuck) with ``XAUTOCLAIM`` and process them.
* :func:`hand_back` — a consumer that stops serving a stream for good leaves what it still holds
  to the others' next :func:`reclaim_idle`, without their waiting ``min_idle_ms``.

Both count deliveries from Redis (``XCLAIM``/``XAUTOCLAIM`` increment the counter) and let the
consumer dead-letter an entry once it reached the cap. Entries trimmed out of the stream while
pending are acknowledged and reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from agent_core.bus.consumer import RawEntry, StreamConsumer

__all__ = ["drain_own", "hand_back", "reclaim_idle", "reclaim_loop"]

log = logging.getLogger(__name__)

_COUNT = 100
# The idle time :func:`hand_back` gives an entry: past any consumer's ``min_idle_ms``.
_HANDED_BACK_IDLE_MS = 86_400_000


async def _delivery_counts(consumer: StreamConsumer[Any], ids: list[str]) -> dict[str, int]:
    if not ids:
        return {}
    rows = await consumer.redis.xpending_range(
        consumer.stream,
        consumer.group,
        min=ids[0],
        max=ids[-1],
        count=len(ids) + _COUNT,
        consumername=consumer.consumer,
    )
    return {_s(r["message_id"]): int(r["times_delivered"]) for r in rows}


async def _own_pending(consumer: StreamConsumer[Any]) -> AsyncIterator[list[str]]:
    """The ids this consumer name holds pending, oldest first, a page at a time (a page is read
    after the caller is done with the one before, so what it acknowledged meanwhile is gone)."""
    start = "-"
    while True:
        pending = await consumer.redis.xpending_range(
            consumer.stream,
            consumer.group,
            min=start,
            max="+",
            count=_COUNT,
            consumername=consumer.consumer,
        )
        if not pending:
            return
        ids = [_s(p["message_id"]) for p in pending]
        yield ids
        start = "(" + ids[-1]


async def drain_own(consumer: StreamConsumer[Any]) -> int:
    """Re-process every entry pending for this consumer name, oldest first; return how many."""
    total = 0
    async for ids in _own_pending(consumer):
        claimed = await consumer.redis.xclaim(
            consumer.stream, consumer.group, consumer.consumer, 0, list[Any](ids)
        )
        await _process_claimed(consumer, claimed, ids)
        total += len(ids)
    return total


async def hand_back(consumer: StreamConsumer[Any]) -> int:
    """Make every entry this consumer name holds pending claimable by the group's other
    consumers at their next idle sweep; return how many.

    For a consumer that stops serving its stream for good while another serves it already (a
    storage partition taken over by another writer): what it read and could not apply would
    otherwise wait ``min_idle_ms`` before the new owner's sweep took it. Each entry is claimed by
    this same name once more with its idle time set to a day (``XCLAIM … IDLE … JUSTID``, which
    does not count a delivery), so nothing is processed here and nothing is lost: the entries
    stay in the group's pending list until the other consumer acknowledges them.
    """
    total = 0
    async for ids in _own_pending(consumer):
        await consumer.redis.xclaim(
            consumer.stream,
            consumer.group,
            consumer.consumer,
            0,
            list[Any](ids),
            idle=_HANDED_BACK_IDLE_MS,
            justid=True,
        )
        total += len(ids)
    return total


async def reclaim_idle(consumer: StreamConsumer[Any], min_idle_ms: int | None = None) -> int:
    """One full XAUTOCLAIM sweep over entries idle longer than ``min_idle_ms`` (default: the
    consumer's option; 0 takes every pending entry of the group, e.g. those of the dead owner
    of a storage partition just taken over); return how many."""
    redis = consumer.redis
    cursor = "0-0"
    total = 0
    while True:
        reply = await redis.xautoclaim(
            consumer.stream,
            consumer.group,
            consumer.consumer,
            consumer.options.min_idle_ms if min_idle_ms is None else min_idle_ms,
            start_id=cursor,
            count=_COUNT,
        )
        cursor = _s(reply[0])
        claimed = reply[1]
        deleted = [_s(i) for i in (reply[2] if len(reply) > 2 else [])]
        if deleted:
            # Trimmed while pending: nothing left to process; acknowledge so they stop haunting the PEL.
            await redis.xack(consumer.stream, consumer.group, *deleted)
            log.warning(
                "%d pending entries of %s were trimmed before processing",
                len(deleted),
                consumer.stream,
            )
        if claimed:
            await _process_claimed(consumer, claimed, [_s(e[0]) for e in claimed])
            total += len(claimed)
        if cursor in ("0-0", "0"):
            return total


async def _process_claimed(
    consumer: StreamConsumer[Any], claimed: list[Any], ids: list[str]
) -> None:
    present = {_s(e[0]): e[1] for e in claimed if e is not None}
    missing = [i for i in ids if i not in present]
    if missing:
        await consumer.redis.xack(consumer.stream, consumer.group, *missing)
    counts = await _delivery_counts(consumer, sorted(present, key=_order))
    entries = [RawEntry(i, present[i], counts.get(i, 1)) for i in sorted(present, key=_order)]
    if consumer.options.batch:
        await consumer.process(entries)
    else:
        for entry in entries:  # one at a time: a failure must not hold back the others
            await consumer.process([entry])


async def reclaim_loop(consumer: StreamConsumer[Any], stop: asyncio.Event) -> None:
    """Sweep every ``claim_interval_s`` until ``stop`` is set; errors are logged, never fatal."""
    while not stop.is_set():
        try:
            await reclaim_idle(consumer)
        except Exception:
            log.exception("reclaim sweep of %s failed; retrying", consumer.stream)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(consumer.options.claim_interval_s):
                await stop.wait()


def _order(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
