"""Per-run runtime event streams in Redis: written by the run's executor, read as SSE.

Each event is one stream entry with a single ``data`` field (the event's JSON); the entry id is
the SSE event id, so a client resumes with ``Last-Event-ID`` by reading after it. Writes go
through one writer task per run: whatever queued up while the previous write was in flight is
sent in one pipeline, and consecutive text deltas of a turn are merged — coalescing costs no
latency when the stream is idle and saves round trips when it is busy. After the terminal event
the stream is trimmed and expires; late readers fall back to the durable timeline in SQLite.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from redis.asyncio import Redis

from agent_core.bus import BusNames
from agent_core.bus.broker import MAX_BLOCK_MS
from agent_core.types.runtime import RUNTIME_EVENT, RunFinished, RunTextDelta, RuntimeEvent

__all__ = ["RunEventReader", "RunEventWriter"]

_MAXLEN = 50_000
_EXPIRE_AFTER_FINISH_S = 3600


class RunEventWriter:
    """Appends one run's events to its stream in order; start it, emit, then ``close()``."""

    def __init__(self, redis: Redis, names: BusNames, session_id: str, run_id: str) -> None:
        self._redis = redis
        self.stream = names.run_events(session_id, run_id)
        self._queue: asyncio.Queue[RuntimeEvent | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None

    async def last_type(self) -> str | None:
        """The ``type`` of the last event in the stream, if any."""
        entries: Any = await self._redis.xrevrange(self.stream, count=1)
        if not entries or not entries[0][1]:
            return None
        return str(json.loads(entries[0][1][b"data"]).get("type"))

    def start(self) -> None:
        """Start the writer task (needs a running loop)."""
        self._task = asyncio.create_task(self._run(), name=f"events:{self.stream}")

    def emit(self, event: RuntimeEvent) -> None:
        """Queue ``event``; it is written after every event queued before it."""
        self._queue.put_nowait(event)

    async def close(self) -> None:
        """Write everything queued, then stop; re-raises a write failure."""
        if self._task is None:
            return
        self._queue.put_nowait(None)
        await self._task
        self._task = None
        if self._failure is not None:
            raise self._failure

    async def abort(self) -> None:
        """Stop without waiting for queued events (the run was taken over)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            first = await self._queue.get()
            batch = [first]
            while not self._queue.empty():
                batch.append(self._queue.get_nowait())
            done = batch[-1] is None
            events = _coalesce([e for e in batch if e is not None])
            if events:
                try:
                    await self._write(events)
                except Exception as exc:  # keep draining so close() returns; report there
                    self._failure = exc
            if done:
                return

    async def _write(self, events: list[RuntimeEvent]) -> None:
        async with self._redis.pipeline(transaction=False) as pipe:
            for event in events:
                pipe.xadd(
                    self.stream,
                    {"data": event.model_dump_json()},
                    maxlen=_MAXLEN,
                    approximate=True,
                )
            if isinstance(events[-1], RunFinished):
                pipe.expire(self.stream, _EXPIRE_AFTER_FINISH_S)
            await pipe.execute()


def _coalesce(events: list[RuntimeEvent]) -> list[RuntimeEvent]:
    out: list[RuntimeEvent] = []
    for event in events:
        prev = out[-1] if out else None
        if (
            isinstance(event, RunTextDelta)
            and isinstance(prev, RunTextDelta)
            and prev.turn == event.turn
            and prev.run_id == event.run_id
        ):
            out[-1] = prev.model_copy(update={"text": prev.text + event.text})
        else:
            out.append(event)
    return out


class RunEventReader:
    """Reads a run's event stream from an SSE id onwards, until the terminal event."""

    def __init__(self, redis: Redis, names: BusNames) -> None:
        self._redis = redis
        self._names = names

    async def exists(self, session_id: str, run_id: str) -> bool:
        """Whether the run's Redis stream still exists (it expires after the run ends)."""
        return bool(await self._redis.exists(self._names.run_events(session_id, run_id)))

    async def follow(
        self,
        session_id: str,
        run_id: str,
        *,
        after: str = "0-0",
        block_ms: int = 15_000,
    ) -> AsyncIterator[tuple[str, RuntimeEvent] | None]:
        """Yield ``(entry_id, event)`` after ``after``; ``None`` when ``block_ms`` passed idle
        (at most ``MAX_BLOCK_MS``, so the caller can send keep-alives).

        Stops after yielding the terminal :class:`RunFinished`.
        """
        async for item in self.follow_raw(session_id, run_id, after=after, block_ms=block_ms):
            yield None if item is None else (item[0], item[1])

    async def follow_raw(
        self,
        session_id: str,
        run_id: str,
        *,
        after: str = "0-0",
        block_ms: int = 15_000,
    ) -> AsyncIterator[tuple[str, RuntimeEvent, bytes] | None]:
        """Like :meth:`follow`, with each event's JSON as stored (validated, so safe to forward:
        a relay need not serialize the event again)."""
        stream = self._names.run_events(session_id, run_id)
        last = after
        block = min(block_ms, MAX_BLOCK_MS)
        while True:
            reply: Any = await self._redis.xread({stream: last}, count=500, block=block)
            if not reply:
                yield None
                continue
            for entry_id, fields in reply[0][1]:
                last = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
                raw = fields[b"data"]
                event = RUNTIME_EVENT.validate_json(raw)
                yield last, event, raw
                if isinstance(event, RunFinished):
                    return
