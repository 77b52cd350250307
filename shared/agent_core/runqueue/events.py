"""Per-run runtime event streams in Redis: written by the run's executor, read as SSE.

Each event is one stream entry with a single ``data`` field (the event's JSON); the entry id is
the SSE event id, so a client resumes with ``Last-Event-ID`` by reading after it. Writes go
through the bus's write rounds (:attr:`Bus.rounds`, one task per bus client and event loop):
whatever queued up while the previous write was in flight is sent in one pipeline, and
consecutive text deltas of a turn are merged — coalescing costs no latency when the stream is
idle and saves round trips when it is busy. After the terminal event
the stream is trimmed and expires; late readers fall back to the durable timeline in SQLite.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, TypeAdapter
from redis.asyncio import Redis

from agent_core.bus import BusNames
from agent_core.bus.calls import Bus, WriteRounds
from agent_core.bus.connection import MAX_BLOCK_MS
from agent_core.bus.names import BusTtl
from agent_core.bus.resp_wire import Command, xadd
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
# clients split on (U+2028, U+2029, NEL), which JSON leaves unescaped inside strings. Looked for
# one by one (a C substring search each, ~3x faster than one pattern over the event).
_LS, _PS, _NEL = "\u2028".encode(), "\u2029".encode(), "\x85".encode()


def _has_break(raw: bytes) -> bool:
    return b"\n" in raw or b"\r" in raw or _LS in raw or _PS in raw or _NEL in raw


_ESCAPES = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


def forwardable(raw: bytes) -> tuple[str, bytes]:
    """The type of a stored event and its JSON, safe to send as one SSE ``data:`` line.

    Checks what a relay relies on (a JSON object of a known event type naming its run and
    session; ``ValueError`` if not) without building the event: a relay forwards the bytes
    as stored, which the run's writer serialized from a validated event. JSON that holds a
    line break is rebuilt from the full event (validated then), with those breaks escaped.
    """
    head = _HEAD.validate_json(raw)
    if _has_break(raw):
        text = RUNTIME_EVENT.validate_json(raw).model_dump_json()
        raw = text.translate(_ESCAPES).encode()
    return head.type, raw


_MAXLEN = 50_000


class RunEventWriter:
    """Appends one run's events to its stream in order; start it, emit, then ``close()``.

    Writes go through the write rounds of the bus it is given (:attr:`Bus.rounds`, whose
    :class:`~agent_core.bus.calls.RoundSource` it is): the events every run of the process
    queued meanwhile share one write. Consecutive text deltas of a turn queued for the same
    round are merged.
    """

    def __init__(self, bus: Bus, names: BusNames, session_id: str, run_id: str) -> None:
        self._bus = bus
        self._redis = bus.redis
        self.stream = names.run_events(session_id, run_id)
        self._rounds: WriteRounds | None = None
        self._queued: list[RuntimeEvent] = []
        self._closing = False  # close() was called: the next round taken is the last
        self._last_taken = False  # the round under way holds the last of the events
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
        """Join the bus's write rounds (needs a running loop)."""
        self._rounds = self._bus.rounds

    def emit(self, event: RuntimeEvent) -> None:
        """Queue ``event``; it is written after every event queued before it.

        Before ``start()`` and after ``close()`` or ``abort()`` an event is dropped: a run's
        stream ends with its terminal event, and a superseded attempt must not write at all.
        """
        if self._rounds is not None:
            self._queued.append(event)
            self._rounds.wake(self)

    async def close(self) -> None:
        """Write everything queued, then stop; re-raises a write failure."""
        rounds, self._rounds = self._rounds, None
        if rounds is None:
            return
        self._closing = True
        rounds.wake(self)
        await self.closed.wait()
        if self.failure is not None:
            raise self.failure

    async def abort(self) -> None:
        """Stop without waiting for queued events (the run was taken over): they are dropped."""
        self.aborted = True
        self._rounds = None
        self._queued.clear()

    def take(self) -> list[Command]:
        """The commands of the events queued since the last round (for :attr:`Bus.rounds`)."""
        self._last_taken = self._closing
        queued, self._queued = self._queued, []
        events = _coalesce(queued)
        if self.aborted:
            return []
        commands: list[Command] = [
            xadd(self.stream, {"data": event.model_dump_json()}, maxlen=_MAXLEN) for event in events
        ]
        if events and isinstance(events[-1], RunFinished):
            commands.append(["EXPIRE", self.stream, BusTtl.RUN_EVENTS_AFTER_FINISH_S])
        return commands

    def written(self, error: BaseException | None) -> None:
        """The round is over (for :attr:`Bus.rounds`): a failure is kept for ``close()``, which
        the round that took the last events releases."""
        if error is not None and not self.aborted:
            self.failure = error
        if self._last_taken:
            self.closed.set()


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
