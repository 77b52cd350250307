"""One run's events as an async iterator that resumes by itself.

``async for event in session.send("…")`` posts the message with ``stream=true`` and yields the
run's typed events until its own ``run_finished``. When the connection drops (a gateway restart,
a proxy timeout, a network blip) the stream reopens ``GET …/runs/{run_id}/events`` with the last
event id it delivered as ``Last-Event-ID``: the server sends exactly the events after it, so
nothing is lost or delivered twice. It keeps trying with back-off until ``reconnect_timeout_s``
passed without progress, then raises :class:`~soong_agent.StreamLostError`.

Leaving the iteration early (a plain ``break``, inside ``async with`` or not, an exception, a
cancelled task) closes the connection and leaves the run running — unless the stream was made
with ``cancel_on_exit=True``, which then cancels the run too. ``async with`` closes at once; after
a plain ``break`` the loop's iterator (an async generator) is closed by the event loop as soon as
it is dropped, and at the latest when the client is closed (it closes its open streams first).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncGenerator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

import httpx

from agent_core.types.enums import Role
from agent_core.types.protocol import TextBlock
from agent_core.types.runtime import (
    RunFinished,
    RunNodeCreated,
    RunState,
    RunTextDelta,
    RunToolResult,
    RunToolStarted,
)
from soong_agent import _operations as ops
from soong_agent._errors import (
    ProtocolError,
    RateLimitedError,
    ServerError,
    SoongError,
    StreamLostError,
    TransportError,
)
from soong_agent._http import IDEMPOTENCY_KEY, HttpCore, backoff_s
from soong_agent._sse import Frame, SseDecoder, StreamEvent, decode_event

__all__ = ["RunStream", "ToolUse"]

_RUN_FINISHED = RunFinished.model_fields["type"].default


@dataclass(slots=True)
class ToolUse:
    """One tool call of a run: when it started and, once finished, its result."""

    started: RunToolStarted
    result: RunToolResult | None = None

    @property
    def name(self) -> str:
        """The tool's name."""
        return self.started.name

    @property
    def arguments(self) -> dict[str, Any]:
        """The arguments the model gave."""
        return self.started.arguments

    @property
    def is_error(self) -> bool:
        """Whether the call failed (``False`` while it has no result yet)."""
        return self.result is not None and self.result.is_error


class RunStream:
    """The events of one run, from its start or after ``last_event_id``, until it finished.

    Iterate it once. ``run_id`` is known after :meth:`start` (``async with`` calls it);
    ``finished`` holds the run's ``run_finished`` once seen; ``reconnects`` counts resumptions.
    """

    def __init__(
        self,
        http: HttpCore,
        session_id: str,
        *,
        run_id: str | None = None,
        message: dict[str, Any] | None = None,
        last_event_id: str | None = None,
        idempotency_key: str | None = None,
        cancel_on_exit: bool = False,
        reconnect_timeout_s: float = 60.0,
    ) -> None:
        if (run_id is None) == (message is None):
            raise ValueError("give a run id to follow or a message to send, not both")
        self.session_id = session_id
        self.run_id = run_id
        self.node_id: str | None = None
        self.last_event_id = last_event_id
        self.finished: RunFinished | None = None
        self.reconnects = 0
        self.cancel_on_exit = cancel_on_exit
        self._http = http
        self._message = message
        self._idempotency_key = idempotency_key
        self._reconnect_timeout_s = reconnect_timeout_s
        self._exits = AsyncExitStack()
        self._first: httpx.Response | None = None
        self._started = False
        self._batches: AsyncGenerator[list[Frame]] | None = None
        self._pending: deque[Frame] = deque()
        self._received = last_event_id
        self._received_end = False
        self._answer: str | None = None
        # Each turn's streamed text, as its pieces (joined when asked: appending to one string
        # would copy the whole answer at every delta) and their length.
        self._deltas: dict[int, tuple[list[str], int]] = {}
        self._tools: dict[str, ToolUse] = {}
        self._closing: asyncio.Future[None] | None = None
        self._abandoned = False
        http.track(self)

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Send the message (for a stream from ``send``) and wait until the gateway took it.

        After this ``run_id`` is set. A connection that breaks before the gateway answered is
        retried (up to the client's ``max_retries``) when the post carries an
        ``Idempotency-Key``: a repeat answers with the run the first post made, streamed from its
        start. Without a key, or once the retries are spent, it raises :class:`TransportError`:
        the message may or may not have been accepted (look at the session's runs); without a
        key it is never sent twice.
        """
        if self._started:
            return
        self._started = True
        if self._message is None:
            return
        params = {"session_id": self.session_id}
        key = self._idempotency_key
        headers = {IDEMPOTENCY_KEY: key} if key else None
        attempt = 0
        while True:
            try:
                response = await self._exits.enter_async_context(
                    self._http.stream(ops.POST_MESSAGE, params, json=self._message, headers=headers)
                )
                break
            except httpx.TransportError as exc:
                if key and attempt < self._http.max_retries:
                    await asyncio.sleep(backoff_s(attempt))
                    attempt += 1
                    continue
                raise TransportError(
                    f"the connection broke while sending the message ({type(exc).__name__}); "
                    "it may or may not have been accepted: see the session's runs"
                ) from exc
        self.run_id = response.headers.get("x-run-id")
        self.node_id = response.headers.get("x-node-id")
        if not self.run_id:
            await self._exits.aclose()
            raise ProtocolError("the gateway answered a streamed message without X-Run-Id")
        self._first = response

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop reading; with ``cancel_on_exit`` cancel the run if it has not finished.

        Idempotent: every caller (the loop's iterator being finalised, ``async with``, the
        client closing) waits for the one close, which runs shielded from their cancellation.
        """
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close())
        await asyncio.shield(self._closing)

    async def _close(self) -> None:
        await self._close_reader()
        await self._exits.aclose()
        await self._abandon()

    async def _close_reader(self) -> None:
        """Close the reading generators (and so the connection) deterministically, in this task:
        left to the garbage collector, nested async generators are finalised out of order."""
        batches, self._batches = self._batches, None
        if batches is not None:
            await batches.aclose()

    async def _abandon(self) -> None:
        if not self.cancel_on_exit or self._received_end or self.run_id is None:
            return
        if self._abandoned:  # once: a cancelled loop abandons, then its generator closes
            return
        self._abandoned = True
        # Shielded: the cancel must reach the gateway even when we got here by being cancelled.
        with contextlib.suppress(SoongError):
            await asyncio.shield(self.cancel(wait=False))

    # ---------------------------------------------------------------- iteration
    #
    # Frames are read a network chunk at a time (a batch) and handed out one by one, each decoded
    # into its typed event as it is handed out: a chunk holds a hundred events, and decoding them
    # all at once would keep a hundred models alive for the collector to scan again and again
    # (bench/sdk.py: ~3 µs per event). Two positions are kept apart: ``_received`` (the last id
    # read from the connection, where a reconnect resumes) and ``last_event_id`` (the last id
    # handed to the caller). Frames received but not yet handed out stay queued across a
    # reconnect.

    def __aiter__(self) -> AsyncGenerator[StreamEvent]:
        """The events as an async generator: unlike this object, a generator is closed when a
        loop over it ends early (``break``) and is dropped, so a ``cancel_on_exit`` stream
        closes and cancels its run without an ``async with`` around it. Any other stream left
        early stays open, so that a later loop goes on where this one stopped; the client
        closes it when it closes."""
        return self._events()

    async def _events(self) -> AsyncGenerator[StreamEvent]:
        if self._closing is not None and self._closing.done():
            self._closing = None  # iterated again after a close: this loop's close is its own
        left_early = True
        try:
            # The events of a batch straight from here: no coroutine of __anext__ per event.
            while True:
                while self._pending:
                    yield self._take()
                if not await self._fill():
                    left_early = False
                    return
        finally:
            if self.cancel_on_exit or not left_early:
                await self.aclose()

    async def __anext__(self) -> StreamEvent:
        while not self._pending:
            if not await self._fill():
                raise StopAsyncIteration
        return self._take()

    async def _fill(self) -> bool:
        """Read the next batch of frames into ``_pending``; ``False`` once the run ended."""
        if self._received_end:
            await self._close_reader()  # suspended after the last batch: close it now
            return False
        if self._batches is None:
            self._batches = self._read_all()
        try:
            self._pending.extend(await anext(self._batches))
        except asyncio.CancelledError:
            await self._abandon()
            raise
        return True

    def _take(self) -> StreamEvent:
        """The next pending frame as its event, with what the helpers keep of it."""
        frame = self._pending.popleft()
        event = decode_event(frame)
        if frame.id is not None:
            self.last_event_id = frame.id
        if event.run_id == self.run_id:
            self._observe(event)
        return event

    async def _read_all(self) -> AsyncGenerator[list[Frame]]:
        await self.start()
        first, self._first = self._first, None
        if first is not None:
            try:
                async for batch in self._read(first):
                    yield batch
            except httpx.TransportError:
                pass  # resumed below from the last event received
            finally:
                await self._exits.aclose()
        attempt = 0
        deadline: float | None = None
        opened = first is not None
        while not self._received_end:
            seen = self._received
            wait: float | None = None
            self.reconnects += opened
            opened = True
            try:
                async for batch in self._follow():
                    yield batch
            except httpx.TransportError:
                pass
            except (RateLimitedError, ServerError) as exc:
                wait = exc.retry_after_s
            if self._received_end:
                return
            if self._received != seen:  # progress: the deadline counts from now
                attempt, deadline = 0, None
            now = time.monotonic()
            deadline = deadline or now + self._reconnect_timeout_s
            if now >= deadline:
                raise StreamLostError(
                    f"the event stream of run {self.run_id} could not be resumed within "
                    f"{self._reconnect_timeout_s:.0f} s",
                    run_id=self.run_id,
                    last_event_id=self._received,
                )
            pause = backoff_s(attempt, base_s=0.1, cap_s=2.0) if wait is None else wait
            await asyncio.sleep(min(pause, max(0.0, deadline - now)))
            attempt += 1

    async def _follow(self) -> AsyncGenerator[list[Frame]]:
        assert self.run_id is not None
        headers = {"Last-Event-ID": self._received} if self._received else None
        params = {"session_id": self.session_id, "run_id": self.run_id}
        async with self._http.stream(ops.RUN_EVENTS, params, headers=headers) as response:
            async for batch in self._read(response):
                yield batch

    async def _read(self, response: httpx.Response) -> AsyncGenerator[list[Frame]]:
        """The frames of one connection, one list per chunk read, up to the run's end."""
        decoder = SseDecoder()
        async for chunk in response.aiter_bytes():
            batch: list[Frame] = []
            for frame in decoder.feed(chunk):
                batch.append(frame)
                if frame.id is not None:
                    self._received = frame.id
                # Only a run_finished frame is decoded here (it is decoded again when handed
                # out): a child run's also comes on its parent's stream.
                if frame.event == _RUN_FINISHED and decode_event(frame).run_id == self.run_id:
                    self._received_end = True
                    break
            if batch:
                yield batch
            if self._received_end:
                return

    # ---------------------------------------------------------------- what the run said

    def _observe(self, event: StreamEvent) -> None:
        """Keep what the helpers answer from one of this run's own events."""
        if type(event) is RunTextDelta:
            # At its offset: a taken-over run's new attempt streams the turn again from there.
            pieces, length = self._deltas.get(event.turn) or ([], 0)
            if event.offset is not None and event.offset < length:
                held = "".join(pieces)[: event.offset]
                pieces, length = [held], len(held)
            pieces.append(event.text)
            self._deltas[event.turn] = (pieces, length + len(event.text))
        elif type(event) is RunFinished:
            self.finished = event
        elif type(event) is RunNodeCreated:
            if event.node.role is Role.ASSISTANT:
                text = "".join(b.text for b in event.node.content if isinstance(b, TextBlock))
                if text:
                    self._answer = text
        elif type(event) is RunToolStarted:
            self._tools[event.tool_call_id] = ToolUse(started=event)
        elif type(event) is RunToolResult and event.tool_call_id in self._tools:
            self._tools[event.tool_call_id].result = event

    @property
    def text(self) -> str:
        """The run's answer so far: its last assistant node's text, else its last turn's deltas."""
        if self._answer is not None:
            return self._answer
        if not self._deltas:
            return ""
        return "".join(self._deltas[max(self._deltas)][0])

    @property
    def tool_uses(self) -> list[ToolUse]:
        """The run's tool calls seen so far, in the order they started."""
        return list(self._tools.values())

    # ---------------------------------------------------------------- helpers

    async def wait(self) -> RunFinished:
        """Read the stream to its end and return the run's ``run_finished``."""
        async for _ in self:
            pass
        if self.finished is None:  # iterated by someone else before, and closed early
            raise SoongError("this stream was closed before the run finished")
        return self.finished

    async def final_text(self) -> str:
        """Read to the end and return the run's final answer text."""
        await self.wait()
        return self.text

    async def tool_calls(self) -> list[ToolUse]:
        """Read to the end and return the run's tool calls with their results."""
        await self.wait()
        return self.tool_uses

    async def cancel(self, *, wait: bool = True, timeout_s: float = 30.0) -> RunState:
        """Cancel the run; with ``wait`` answer once it is terminal (or ``timeout_s`` passed)."""
        await self.start()
        assert self.run_id is not None
        query = {"wait": "true" if wait else "false", "timeout_s": timeout_s}
        params = {"session_id": self.session_id, "run_id": self.run_id}
        return await self._http.model(ops.CANCEL_RUN, RunState, params, query=query)
