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
import json
import re
import weakref
from collections import deque
from collections.abc import AsyncIterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, TypeAdapter
from redis.asyncio import Redis

from agent_core.bus import BusNames
from agent_core.bus.calls import Bus
from agent_core.bus.connection import MAX_BLOCK_MS
from agent_core.bus.names import BusTtl
from agent_core.bus.resp import Arg, xadd
from agent_core.types._fields import RunId, SessionId
from agent_core.types.runtime import (
    RUNTIME_EVENT,
    RunFinished,
    RunPhase,
    RunTextDelta,
    RuntimeEvent,
)

__all__ = ["RawEvent", "RunEventReader", "RunEventWriter", "forwardable"]

# An event as a relay forwards it: (stream entry id, event type, JSON on one line).
RawEvent = tuple[str, str, bytes]


class _EventHead(BaseModel):
    """What a relay reads of an event: its kind and whose it is (the rest is forwarded)."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    type: Literal[
        "text_delta",
        "tool_started",
        "tool_result",
        "node_created",
        "run_status_changed",
        "usage",
        "phase",
        "permission_requested",
        "task_changed",
        "error",
        "run_finished",
    ]
    run_id: RunId
    session_id: SessionId


_HEAD = TypeAdapter(_EventHead)
# Bytes that would end an SSE data line: raw CR/LF (JSON whitespace) and the line breaks many
# clients split on (U+2028, U+2029, NEL), which JSON leaves unescaped inside strings.
_BREAK = re.compile(rb"[\r\n]|\xe2\x80[\xa8\xa9]|\xc2\x85")  # CR, LF, U+2028/9, NEL in UTF-8
_ESCAPES = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


def forwardable(raw: bytes) -> tuple[str, bytes]:
    """The type of a stored event and its JSON, safe to send as one SSE ``data:`` line.

    Checks what a relay relies on (a JSON object of a known event type naming its run and
    session; ``ValueError`` if not) without building the event: a relay forwards the bytes
    as stored, which the run's writer serialized from a validated event. JSON that holds a
    line break is rebuilt from the full event (validated then), with those breaks escaped.
    """
    head = _HEAD.validate_json(raw)
    if _BREAK.search(raw) is not None:
        text = RUNTIME_EVENT.validate_json(raw).model_dump_json()
        raw = text.translate(_ESCAPES).encode()
    return head.type, raw


_MAXLEN = 50_000


class _Batcher:
    """Writes the queued events of every run of the process in one batch per round.

    One per bus client and event loop. Idle, a queued event is written at once (the round
    starts when it is queued); busy, whatever queued up during a round — from any number of runs —
    goes out in the next one, so 50 streaming runs cost a few round trips per tick, not 50.
    Events of one run keep their order (one FIFO); consecutive text deltas of a run are merged.
    """

    def __init__(self, bus: Bus) -> None:
        self._bus = bus
        self._queue: deque[tuple[RunEventWriter, RuntimeEvent | None]] = deque()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.loop = asyncio.get_running_loop()

    def put(self, writer: RunEventWriter, event: RuntimeEvent | None) -> None:
        self._queue.append((writer, event))
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="run-events")

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._queue:
                items = list(self._queue)
                self._queue.clear()
                await self._write_round(items)

    async def _write_round(self, items: list[tuple[RunEventWriter, RuntimeEvent | None]]) -> None:
        per_writer: dict[RunEventWriter, list[RuntimeEvent | None]] = {}
        for writer, event in items:
            per_writer.setdefault(writer, []).append(event)
        writing: list[RunEventWriter] = []
        commands: list[list[Arg]] = []
        try:
            for writer, queued in per_writer.items():
                if writer.aborted:
                    continue
                writing.append(writer)
                events = _coalesce([e for e in queued if e is not None])
                for event in events:
                    fields = {"data": event.model_dump_json()}
                    commands.append(xadd(writer.stream, fields, maxlen=_MAXLEN))
                if events and isinstance(events[-1], RunFinished):
                    commands.append(["EXPIRE", writer.stream, BusTtl.RUN_EVENTS_AFTER_FINISH_S])
            # One write on the lean client's socket (agent_core.bus.resp), not a pooled pipeline.
            await self._bus.calls.execute_many(commands)
        except Exception as exc:  # every run of the round hears of it at close()
            for writer in writing:
                writer.failure = exc
        finally:  # a close() must never wait for a round that is over, however it ended
            for writer, queued in per_writer.items():
                if None in queued:
                    writer.closed.set()


_BATCHERS: weakref.WeakKeyDictionary[Bus, _Batcher] = weakref.WeakKeyDictionary()


def _batcher(bus: Bus) -> _Batcher:
    batcher = _BATCHERS.get(bus)
    if batcher is None or batcher.loop is not asyncio.get_running_loop():
        batcher = _BATCHERS[bus] = _Batcher(bus)
    return batcher


class RunEventWriter:
    """Appends one run's events to its stream in order; start it, emit, then ``close()``.

    Writes go through the process's :class:`_Batcher` for the bus client.
    """

    def __init__(self, bus: Bus, names: BusNames, session_id: str, run_id: str) -> None:
        self._bus = bus
        self._redis = bus.redis
        self.stream = names.run_events(session_id, run_id)
        self._batcher: _Batcher | None = None
        self.closed = asyncio.Event()
        self.failure: BaseException | None = None
        self.aborted = False

    async def last_type(self) -> str | None:
        """The ``type`` of the last event in the stream, if any."""
        entries: Any = await self._redis.xrevrange(self.stream, count=1)
        if not entries or not entries[0][1]:
            return None
        return str(json.loads(entries[0][1][b"data"]).get("type"))

    def start(self) -> None:
        """Attach to the process's batcher (needs a running loop)."""
        self._batcher = _batcher(self._bus)

    def emit(self, event: RuntimeEvent) -> None:
        """Queue ``event``; it is written after every event queued before it.

        Before ``start()`` and after ``close()`` or ``abort()`` an event is dropped: a run's
        stream ends with its terminal event, and a superseded attempt must not write at all.
        """
        if self._batcher is not None:
            self._batcher.put(self, event)

    async def close(self) -> None:
        """Write everything queued, then stop; re-raises a write failure."""
        if self._batcher is None:
            return
        self._batcher.put(self, None)
        self._batcher = None
        await self.closed.wait()
        if self.failure is not None:
            raise self.failure

    async def abort(self) -> None:
        """Stop without waiting for queued events (the run was taken over): they are dropped."""
        self.aborted = True
        self._batcher = None


def _coalesce(events: list[RuntimeEvent]) -> list[RuntimeEvent]:
    """Consecutive text deltas of a turn become one; a phase replaced by the next one before
    either was sent is left out (only what the run does now matters to an activity area)."""
    out: list[RuntimeEvent] = []
    for event in events:
        prev = out[-1] if out else None
        if (
            isinstance(event, RunTextDelta)
            and isinstance(prev, RunTextDelta)
            and prev.turn == event.turn
            and prev.attempt == event.attempt
            and prev.run_id == event.run_id
        ):
            out[-1] = prev.model_copy(update={"text": prev.text + event.text})
        elif (
            isinstance(event, RunPhase)
            and isinstance(prev, RunPhase)
            and prev.run_id == event.run_id
        ):
            out[-1] = event
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
        async for batch in self.follow_raw(session_id, run_id, after=after, block_ms=block_ms):
            if batch is None:
                yield None
                continue
            for entry_id, _, raw in batch:
                yield entry_id, RUNTIME_EVENT.validate_json(raw)

    async def follow_raw(
        self,
        session_id: str,
        run_id: str,
        *,
        after: str = "0-0",
        block_ms: int = 15_000,
    ) -> AsyncIterator[list[RawEvent] | None]:
        """Like :meth:`follow`, one list per read (what arrived together), each event as
        :func:`forwardable` gives it: a relay sends it on without building it again."""
        stream = self._names.run_events(session_id, run_id)
        last = after
        block = min(block_ms, MAX_BLOCK_MS)
        while True:
            reply: Any = await self._redis.xread({stream: last}, count=500, block=block)
            if not reply:
                yield None
                continue
            batch: list[RawEvent] = []
            for entry_id, fields in reply[0][1]:
                last = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
                kind, raw = forwardable(fields[b"data"])
                batch.append((last, kind, raw))
                if kind == "run_finished":
                    break
            yield batch
            if batch[-1][1] == "run_finished":
                return
