"""A run's stream over a scripted transport: drops resume exactly after the last event delivered,
refusals raise typed errors, and leaving early cancels the run only when asked to."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from agent_core.types.enums import RunStatus
from agent_core.types.runtime import (
    RunFinished,
    RunStatusChanged,
    RunTextDelta,
    RuntimeEvent,
    RunToolResult,
    RunToolStarted,
)
from soong_agent import AsyncClient, NotFoundError, RateLimitedError, StreamLostError

SID = "sess_20260101_120000_0123456789abcdef"
RID = "run_0123456789abcdef"
CHILD = "run_fedcba9876543210"


def _events() -> list[tuple[str, RuntimeEvent]]:
    common = {"run_id": RID, "session_id": SID}
    return [
        ("1-0", RunStatusChanged(status=RunStatus.RUNNING, **common)),
        ("2-0", RunToolStarted(tool_call_id="call_1", name="lookup", arguments={"q": 1}, **common)),
        ("2-1", RunStatusChanged(status=RunStatus.RUNNING, run_id=CHILD, session_id=SID)),
        ("3-0", RunToolResult(tool_call_id="call_1", name="lookup", **common)),
        ("4-0", RunTextDelta(turn=2, text="Hel", **common)),
        ("4-1", RunTextDelta(turn=2, text="lo", **common)),
        ("5-0", RunFinished(status=RunStatus.COMPLETED, **common)),
    ]


EVENTS = _events()
IDS = [i for i, _ in EVENTS]


def frame(entry_id: str, event: RuntimeEvent) -> bytes:
    return f"id: {entry_id}\nevent: {event.type}\ndata: {event.model_dump_json()}\n\n".encode()


FRAMES = [frame(i, e) for i, e in EVENTS]


class Dropping(httpx.AsyncByteStream):
    """Sends the frames (the last one cut in half when ``cut_last``), then the connection breaks."""

    def __init__(self, frames: list[bytes], *, cut_last: bool) -> None:
        self.frames = frames
        self.cut_last = cut_last

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b"retry: 1000\n\n"
        for i, f in enumerate(self.frames):
            if self.cut_last and i == len(self.frames) - 1:
                yield f[: len(f) // 2]
                break
            yield f
        raise httpx.ReadError("connection reset")


Handler = Callable[[httpx.Request], httpx.Response]


def client(handler: Handler) -> AsyncClient:
    return AsyncClient(
        "http://gw", "sa_live_x", transport=httpx.MockTransport(handler), reconnect_timeout_s=2
    )


def sse(body: bytes | httpx.AsyncByteStream, **headers: str) -> httpx.Response:
    headers = {"content-type": "text/event-stream", **headers}
    if isinstance(body, bytes):
        return httpx.Response(200, content=body, headers=headers)
    return httpx.Response(200, stream=body, headers=headers)


def rest_after(last: str | None) -> bytes:
    start = 0 if last is None else IDS.index(last) + 1
    return b"".join(FRAMES[start:])


@pytest.mark.parametrize("partial", [False, True])
async def test_send_resumes_after_every_cut_with_nothing_lost_or_repeated(partial: bool) -> None:
    for cut in range(0, len(FRAMES)):
        resumed_from: list[str | None] = []

        def handler(
            request: httpx.Request, cut: int = cut, resumed_from: list[str | None] = resumed_from
        ) -> httpx.Response:
            if request.method == "POST":
                head = FRAMES[: cut + 1] if partial else FRAMES[:cut]
                return sse(Dropping(head, cut_last=partial), **{"x-run-id": RID})
            assert request.url.path == f"/v1/sessions/{SID}/runs/{RID}/events"
            last = request.headers.get("last-event-id")
            resumed_from.append(last)
            return sse(rest_after(last))

        async with client(handler) as c:
            stream = c.session(SID).send("hi")
            got = [e async for e in stream]
        assert got == [e for _, e in EVENTS], cut
        assert resumed_from == [IDS[cut - 1] if cut else None], cut
        assert stream.reconnects == 1 and stream.last_event_id == "5-0"
        assert stream.finished is not None and stream.finished.status is RunStatus.COMPLETED
        assert stream.text == "Hello"  # the child's events are not the run's
        assert [(t.name, t.is_error, t.result is not None) for t in stream.tool_uses] == [
            ("lookup", False, True)
        ]


async def test_a_clean_close_before_the_end_and_server_errors_are_resumed_too() -> None:
    calls: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        last = request.headers.get("last-event-id")
        calls.append(last)
        if len(calls) == 1:
            return sse(b"".join(FRAMES[:2]))  # ends without run_finished
        if len(calls) == 2:
            return httpx.Response(503, json={"error": {"code": "unavailable", "message": "x"}})
        if len(calls) == 3:
            return httpx.Response(
                429,
                headers={"Retry-After": "0"},
                json={"error": {"code": "too_many_streams", "message": "x"}},
            )
        return sse(rest_after(last))

    async with client(handler) as c:
        finished = await c.session(SID).run(RID).wait()
    assert finished.status is RunStatus.COMPLETED
    assert calls == [None, "2-0", "2-0", "2-0"]


async def test_a_refusal_raises_its_typed_error_and_a_lost_stream_gives_up() -> None:
    def missing(_: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"error": {"code": "not_found", "message": "no run"}})

    async with client(missing) as c:
        with pytest.raises(NotFoundError) as info:
            await c.session(SID).run(RID).wait()
    assert info.value.code == "not_found" and info.value.status == 404

    def down(_: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    async with client(down) as c:
        stream = c.session(SID).run(RID).events(last_event_id="2-0")
        with pytest.raises(StreamLostError) as lost:
            await stream.wait()
    assert lost.value.last_event_id == "2-0" and lost.value.run_id == RID
    assert stream.reconnects >= 2


async def test_a_send_refused_for_the_rate_limit_waits_and_sends_once_more() -> None:
    posts: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.method == "POST"
        posts.append(len(posts))
        if len(posts) == 1:  # refused before anything was accepted: nothing runs twice
            return httpx.Response(
                429,
                headers={"Retry-After": "0"},
                json={"error": {"code": "rate_limited", "message": "too many requests"}},
            )
        return sse(b"".join(FRAMES), **{"x-run-id": RID})

    async with client(handler) as c:
        stream = c.session(SID).send("hi")
        got = [e async for e in stream]
    assert got == [e for _, e in EVENTS] and posts == [0, 1] and stream.reconnects == 0

    def refusing(_: httpx.Request) -> httpx.Response:
        return httpx.Response(
            429,
            headers={"Retry-After": "0"},
            json={"error": {"code": "rate_limited", "message": "too many requests"}},
        )

    async with AsyncClient(
        "http://gw", "sa_live_x", transport=httpx.MockTransport(refusing), max_retries=0
    ) as eager:
        with pytest.raises(RateLimitedError):
            await eager.session(SID).send("hi").wait()


class Forever(httpx.AsyncByteStream):
    """The run's first event, then nothing until the client goes away."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield FRAMES[0]
        await asyncio.Event().wait()


@pytest.mark.parametrize("cancel_on_exit", [False, True])
async def test_leaving_early_cancels_the_run_only_when_asked(cancel_on_exit: bool) -> None:
    cancels: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/cancel"):
            cancels.append(request.url.params["wait"])
            state = {"status": "cancelled"}
            return httpx.Response(200, json=_run_state(state))
        return sse(Forever(), **{"x-run-id": RID})

    async with client(handler) as c:
        # Leaving an ``async with`` block early (break) …
        async with c.session(SID).send("hi", cancel_on_exit=cancel_on_exit) as stream:
            assert stream.run_id == RID
            async for _ in stream:
                break
        # … and the iterating task being cancelled.
        stream = c.session(SID).send("hi", cancel_on_exit=cancel_on_exit)
        seen = asyncio.Event()

        async def consume() -> None:
            async for _ in stream:
                seen.set()

        task = asyncio.create_task(consume())
        async with asyncio.timeout(5):
            await seen.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert cancels == (["false", "false"] if cancel_on_exit else [])


def _run_state(update: dict[str, object]) -> dict[str, object]:
    return {
        "run_id": RID,
        "session_id": SID,
        "agent_id": "agent_0123456789abcdef",
        "status": "running",
        "created_at": "2026-01-01T12:00:00Z",
        "updated_at": "2026-01-01T12:00:00Z",
        **update,
    }


async def test_a_turn_streamed_again_from_an_offset_replaces_what_followed_it() -> None:
    """A taken-over run's new attempt streams its turn again from an offset: the text is the
    first attempt's up to there, then the new deltas (an offset past the end appends)."""
    common = {"run_id": RID, "session_id": SID}
    deltas = [("Hel", None), ("lo wor", None), ("ld", None), ("p", 3), (" me", None),
              ("!", 99), (" Bye", None)]  # fmt: skip
    events = [(f"{i + 1}-0", RunTextDelta(turn=1, text=t, offset=o, **common))
              for i, (t, o) in enumerate(deltas)]  # fmt: skip
    events.append(("9-0", RunFinished(status=RunStatus.COMPLETED, **common)))
    body = b"".join(frame(i, e) for i, e in events)

    async with client(lambda _: sse(body)) as c:
        stream = c.session(SID).run(RID).events()
        seen = [e async for e in stream]
    assert len(seen) == len(events)
    assert stream.text == "Help me! Bye"
