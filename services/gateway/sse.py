"""A run's events as Server-Sent Events: live from Redis, or from the durable timeline.

SSE ids come in two forms that cannot be confused:

- ``<ms>-<n>`` — a Redis stream entry id (the live stream, kept an hour after the run ends);
- ``db-<seq>`` — a row of the durable timeline in SQLite, and ``db-end`` for the synthesized
  ``run_finished`` that closes a durable replay.

A client resumes by sending the last id it saw (``Last-Event-ID``) and receives exactly the
events after it. A client that comes back after the Redis stream expired is served the durable
timeline: ``node_created`` rows become ``node_created`` events carrying the node, other rows
``timeline`` events, and the stream ends with a ``run_finished`` built from the run record. While
idle, a comment line keeps proxies from closing the connection. Every stream ends after the
terminal ``run_finished``.

The bus may drop while a stream is open (a Valkey restart takes a couple of seconds): the stream
then waits and reads on from the last event it sent, with a comment line each second so the
client sees it alive; only after ``_OUTAGE_S`` without the bus does it end — cleanly, so that the
client resumes with ``Last-Event-ID`` — never cut mid-response.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from agent_core.bus.contracts.storage import GetNode, GetRun, ListEvents
from agent_core.types.enums import TERMINAL_RUN_EVENTS, EventType
from agent_core.types.mappers import to_node, to_run_finished, to_run_state, to_timeline_event
from agent_core.types.runtime import (
    RunNodeCreated,
    RunState,
    RuntimeEvent,
    TimelineEvent,
)
from services.gateway.errors import ApiError, is_unavailable, log
from services.gateway.state import Gateway, fetch_optional

__all__ = ["Cursor", "SseResponse", "parse_cursor", "run_event_stream"]

_REDIS_ID = re.compile(r"(\d{1,20})-(\d{1,20})")
_DB_ID = re.compile(r"db-(\d{1,18})")
_ID_PART_MAX = 2**64 - 1  # each half of a Redis stream id is an unsigned 64-bit integer
_PAGE = 500
_RETRY_MS = 1000
_MAX_BLOCK_MS = 4000
_RECENT_END_S = 60
_APPEAR_POLLS = 20
_APPEAR_POLL_S = 0.05
# How long an open stream waits out a bus outage before it ends (the client then resumes), and
# how often it tries the bus again meanwhile.
_OUTAGE_S = 30.0
_OUTAGE_RETRY_S = 1.0


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where a client resumes: after a Redis entry, after a timeline seq, or past the end."""

    redis_id: str | None = None
    seq: int | None = None
    ended: bool = False


def parse_cursor(value: str | None) -> Cursor:
    """The cursor of a ``Last-Event-ID`` value (``None``/empty: from the start); 400 if malformed."""
    if not value:
        return Cursor(redis_id="0-0")
    value = value.strip()
    if value == "db-end":
        return Cursor(ended=True)
    if (m := _DB_ID.fullmatch(value)) is not None:
        return Cursor(seq=int(m.group(1)))
    if (m := _REDIS_ID.fullmatch(value)) is not None and max(map(int, m.groups())) <= _ID_PART_MAX:
        # In Redis's range: an id it would refuse must never reach the shared read (the hub).
        return Cursor(redis_id=value)
    raise ApiError(400, "invalid_last_event_id", "Last-Event-ID is not an id of this stream")


# JSON escapes CR, LF and every other control character, but leaves these as they are; many
# clients (anything built on str.splitlines) split lines on them, so they are escaped too.
_LINE_BREAKS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


def _data(json_text: str) -> str:
    return json_text.translate(_LINE_BREAKS)


def frame(event_id: str, event: RuntimeEvent) -> bytes:
    """One SSE frame; the JSON is a single line, so no payload can break the framing."""
    return _frame_json(event_id, event.type, event.model_dump_json())


def _frame_json(event_id: str, event_type: str, json_text: str) -> bytes:
    return f"id: {event_id}\nevent: {event_type}\ndata: {_data(json_text)}\n\n".encode()


def _timeline_frame(event: TimelineEvent) -> bytes:
    data = _data(event.model_dump_json())
    return f"id: db-{event.seq}\nevent: timeline\ndata: {data}\n\n".encode()


async def _run(gw: Gateway, session_id: str, run_id: str) -> RunState | None:
    record = await fetch_optional(gw, GetRun(run_id=run_id, session_id=session_id))
    return None if record is None else to_run_state(record)


async def _durable(
    gw: Gateway, session_id: str, run_id: str, *, after_seq: int, after_ms: int
) -> AsyncIterator[bytes]:
    seq = after_seq
    while True:
        query = ListEvents(session_id=session_id, run_id=run_id, after_seq=seq, limit=_PAGE)
        records = await fetch_optional(gw, query) or []
        for record in records:
            event = to_timeline_event(record)
            seq = record.seq  # the row's: a stored event always has one
            if after_ms and event.created_at.timestamp() * 1000 <= after_ms:
                continue
            if event.event_type in TERMINAL_RUN_EVENTS:
                # The replay ends with run_finished built from the run record, which says the
                # same; the lifecycle event itself may be stamped a moment after the live
                # run_finished a resuming client already holds, so it is not replayed twice.
                continue
            if event.event_type is EventType.NODE_CREATED and event.node_id:
                node_record = await fetch_optional(
                    gw, GetNode(session_id=session_id, node_id=event.node_id)
                )
                if node_record is not None:
                    node = to_node(node_record)
                    created = RunNodeCreated(
                        run_id=run_id,
                        session_id=session_id,
                        agent_id=node.agent_id,
                        node=node,
                        created_at=event.created_at,
                    )
                    yield frame(f"db-{event.seq}", created)
                    continue
            yield _timeline_frame(event)
        if len(records) < _PAGE:
            break
    run = await _run(gw, session_id, run_id)
    if run is not None and run.is_terminal:
        yield frame("db-end", to_run_finished(run))


async def run_event_stream(
    gw: Gateway,
    session_id: str,
    run_id: str,
    *,
    cursor: Cursor,
    keepalive_s: float,
    on_idle: Callable[[], Awaitable[None]] | None = None,
    fresh: bool = False,
) -> AsyncIterator[bytes]:
    """SSE bytes of one run (already checked to be the caller's), from ``cursor`` to the end.

    ``fresh``: the run was queued by this very request, so its live stream is followed from the
    start without asking whether it exists yet or already ended (it cannot have expired).
    """
    yield f"retry: {_RETRY_MS}\n\n".encode()
    if cursor.ended:
        return
    if fresh and cursor.redis_id == "0-0":
        async for chunk in _live(
            gw, session_id, run_id, after="0-0", keepalive_s=keepalive_s, on_idle=on_idle
        ):
            yield chunk
        return
    if cursor.seq is not None:
        async for chunk in _durable(gw, session_id, run_id, after_seq=cursor.seq, after_ms=0):
            yield chunk
        return
    after = cursor.redis_id or "0-0"
    if not await _live_stream_exists(gw, session_id, run_id):
        run = await _run(gw, session_id, run_id)
        if run is not None and run.is_terminal:
            # The live stream expired: replay the durable timeline after the client's position.
            after_ms = int(after.split("-", 1)[0])
            async for chunk in _durable(gw, session_id, run_id, after_seq=0, after_ms=after_ms):
                yield chunk
            return
    if await _seen_the_end(gw, session_id, run_id, after):
        return
    async for chunk in _live(
        gw, session_id, run_id, after=after, keepalive_s=keepalive_s, on_idle=on_idle
    ):
        yield chunk


async def _live_stream_exists(gw: Gateway, session_id: str, run_id: str) -> bool:
    """Whether the run's Redis stream exists; for a run that just ended, wait for it briefly.

    A run's record can turn terminal a moment before its event writer's first write lands,
    and the live stream is the better answer then (the durable timeline has no text deltas).
    """
    if await gw.events.exists(session_id, run_id):
        return True
    run = await _run(gw, session_id, run_id)
    if run is None or not run.is_terminal:
        return False  # queued: the stream appears when the run starts; follow waits for it
    if (datetime.now(UTC) - run.updated_at).total_seconds() > _RECENT_END_S:
        return False
    for _ in range(_APPEAR_POLLS):
        await asyncio.sleep(_APPEAR_POLL_S)
        if await gw.events.exists(session_id, run_id):
            return True
    return False


async def _seen_the_end(gw: Gateway, session_id: str, run_id: str, after: str) -> bool:
    """Whether ``after`` is the stream's terminal entry (the client already has the end)."""
    if after == "0-0":
        return False
    last: Any = await gw.ctx.redis.xrevrange(gw.ctx.names.run_events(session_id, run_id), count=1)
    if not last:
        return False
    entry_id, fields = last[0]
    entry = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
    return entry == after and b'"type":"run_finished"' in fields[b"data"]


async def _live(
    gw: Gateway,
    session_id: str,
    run_id: str,
    *,
    after: str,
    keepalive_s: float,
    on_idle: Callable[[], Awaitable[None]] | None,
) -> AsyncIterator[bytes]:
    """The live stream after ``after``, reading on from the last event sent across a bus outage
    (see the module docstring)."""
    last = after
    down_since: float | None = None
    loop = asyncio.get_running_loop()
    while True:
        try:
            async for chunk, sent in _follow(
                gw, session_id, run_id, after=last, keepalive_s=keepalive_s, on_idle=on_idle
            ):
                down_since = None
                last = sent or last
                yield chunk
            return
        except Exception as exc:
            if not is_unavailable(exc):
                raise
            now = loop.time()
            down_since = down_since if down_since is not None else now
            if now - down_since >= _OUTAGE_S:
                log.warning("SSE stream of %s ends: the bus is still down", run_id)
                return  # a clean end: the client resumes with Last-Event-ID
            yield b": the bus is unavailable; waiting for it\n\n"
            await asyncio.sleep(_OUTAGE_RETRY_S)


async def _follow(
    gw: Gateway,
    session_id: str,
    run_id: str,
    *,
    after: str,
    keepalive_s: float,
    on_idle: Callable[[], Awaitable[None]] | None,
) -> AsyncIterator[tuple[bytes, str | None]]:
    """SSE bytes of the live stream after ``after``, each with the id of the last event in it
    (``None`` for a keep-alive or the durable end)."""
    # Blocking reads stay below the Redis client's socket timeout (5 s by default); idle time
    # adds up to one keep-alive per ``keepalive_s``.
    block_ms = max(1, min(int(keepalive_s * 1000), _MAX_BLOCK_MS))
    idle_ms = 0
    idle_terminal = 0
    async for batch in gw.events.follow_raw(session_id, run_id, after=after, block_ms=block_ms):
        if batch is not None:
            idle_ms = 0
            # What one read returned goes out as one write; each event's JSON is forwarded as
            # stored (checked on read, see agent_core.runqueue.events.forwardable).
            data = b"".join(
                [
                    b"id: %s\nevent: %s\ndata: %s\n\n" % (i.encode(), t.encode(), raw)
                    for i, t, raw in batch
                ]
            )
            yield data, batch[-1][0]
            continue
        idle_ms += block_ms
        if idle_ms < keepalive_s * 1000:
            continue
        idle_ms = 0
        yield b": keep-alive\n\n", None
        if on_idle is not None:
            await on_idle()
        # A run ended by a sweeper may never write run_finished to its stream: after two
        # idle periods with a terminal record, close the stream with the record's verdict.
        run = await _run(gw, session_id, run_id)
        idle_terminal = idle_terminal + 1 if run is not None and run.is_terminal else 0
        if run is not None and idle_terminal >= 2:
            yield frame("db-end", to_run_finished(run)), None
            return


class SseResponse(StreamingResponse):
    """A streaming ``text/event-stream`` response that always runs ``on_close`` when it ends.

    ``on_close`` runs whether the stream finished, failed or the client went away (then the
    body generator is closed first), shielded from cancellation so a slot is never leaked.
    """

    def __init__(
        self, content: AsyncIterator[bytes], *, on_close: Callable[[], Awaitable[None]]
    ) -> None:
        super().__init__(
            content,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self._content = content
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                aclose = getattr(self._content, "aclose", None)
                if aclose is not None:
                    await aclose()
                await self._on_close()
