"""Each adapter, through its official SDK (or httpx for Ollama), against its wire-faithful fake."""

from __future__ import annotations

import asyncio
import time

import pytest

from agent_core.errors import ProviderError
from agent_core.types.enums import StopReason
from agent_core.types.protocol import (
    ErrorEvent,
    MessageEndEvent,
    MessageStartEvent,
    TextDeltaEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    Usage,
    UsageEvent,
)
from tests.fakes import script as s
from tests.integration.provider.harness import (
    API_KEY,
    PROVIDERS,
    collect,
    request,
    running,
    text_of,
    types_of,
)

pytestmark = pytest.mark.parametrize("provider", PROVIDERS)


async def test_plain_text(provider: str) -> None:
    async with running(provider, [s.text_turn("Hello", ", ", "world")]) as (server, adapter):
        events = await collect(adapter, request())
    assert isinstance(events[0], MessageStartEvent)
    assert text_of(events) == "Hello, world"
    assert types_of(events)[-2:] == ["usage", "message_end"]
    end = events[-1]
    assert isinstance(end, MessageEndEvent) and end.stop_reason == StopReason.END_TURN
    assert len(server.requests) == 1
    server.assert_script_consumed()


async def test_two_parallel_tool_calls_with_split_arguments(provider: str) -> None:
    turn = s.ScriptedTurn(
        steps=[
            s.Text(text="Checking."),
            *s.tool_call(0, "call_a", "get_weather", ['{"ci', 'ty": "Par', 'is"}']),
            *s.tool_call(1, "call_b", "get_time", ["{", '"city":', ' "Tokyo"', "}"]),
            s.Usage(input_tokens=20, output_tokens=9),
            s.Finish(reason="tool_use"),
        ],
        # Ollama sends each call whole in one line: split the lines across TCP writes instead.
        write_size=7 if provider == "ollama" else None,
    )
    async with running(provider, [turn]) as (_server, adapter):
        events = await collect(adapter, request(tools=True))
    starts = [e for e in events if isinstance(e, ToolCallStartEvent)]
    ends = [e for e in events if isinstance(e, ToolCallEndEvent)]
    assert [(e.index, e.id, e.name) for e in starts] == [
        (0, "call_a", "get_weather"),
        (1, "call_b", "get_time"),
    ]
    assert [(e.index, e.id, e.arguments) for e in ends] == [
        (0, "call_a", {"city": "Paris"}),
        (1, "call_b", {"city": "Tokyo"}),
    ]
    for end in ends:
        fragments = [
            e.arguments_delta
            for e in events
            if isinstance(e, ToolCallDeltaEvent) and e.index == end.index
        ]
        assert fragments, "argument deltas are streamed"
    assert text_of(events) == "Checking."
    last = events[-1]
    assert isinstance(last, MessageEndEvent) and last.stop_reason == StopReason.TOOL_USE


async def test_multibyte_character_split_across_chunks(provider: str) -> None:
    pieces = ["héllo ", "wörld ", "日本語 ", "🎉"]
    turn = s.ScriptedTurn(
        steps=[
            *[s.Text(text=p) for p in pieces],
            *s.tool_call(0, "call_u", "get_weather", ['{"city": "Zür', 'ich 🏔"}']),
            s.Finish(reason="tool_use"),
        ],
        split_multibyte=True,  # every frame is written in two parts cut inside a character
    )
    async with running(provider, [turn]) as (server, adapter):
        events = await collect(adapter, request(tools=True))
    assert text_of(events) == "".join(pieces)
    ends = [e for e in events if isinstance(e, ToolCallEndEvent)]
    assert [e.arguments for e in ends] == [{"city": "Zürich 🏔"}]
    chat = server.requests[-1]  # Ollama asked /api/show first
    assert chat.completed
    # Every text frame (and the tool-call frame) really was cut inside a character.
    assert chat.split_frames >= len(pieces) + 1


async def test_usage(provider: str) -> None:
    turn = s.text_turn("ok", usage=(1234, 56))
    async with running(provider, [turn]) as (_server, adapter):
        events = await collect(adapter, request())
    total = sum((e.usage for e in events if isinstance(e, UsageEvent)), Usage())
    assert (total.input_tokens, total.output_tokens) == (1234, 56), "usage events add up"


async def test_max_tokens_stop(provider: str) -> None:
    turn = s.text_turn("cut o", reason="max_tokens")
    async with running(provider, [turn]) as (server, adapter):
        events = await collect(adapter, request(max_tokens=3))
    end = events[-1]
    assert isinstance(end, MessageEndEvent) and end.stop_reason == StopReason.MAX_TOKENS
    body = server.requests[0].json
    limit = {
        "openai": body.get("max_tokens"),
        "anthropic": body.get("max_tokens"),
        "ollama": (body.get("options") or {}).get("num_predict"),
    }[provider]
    assert limit == 3


async def test_error_event_mid_stream(provider: str) -> None:
    turn = s.ScriptedTurn(
        steps=[s.Text(text="partial "), s.ErrorEvent(error_type="overloaded_error")]
    )
    async with running(provider, [turn, s.text_turn("never")]) as (server, adapter):
        events = await collect(adapter, request())
    assert text_of(events) == "partial "
    last = events[-1]
    assert isinstance(last, ErrorEvent)
    assert last.error.provider == provider
    # Ollama's error line carries only a message, so it cannot say the error is transient.
    expected = ("provider_error", False) if provider == "ollama" else ("overloaded", True)
    assert (last.error.code, last.error.retryable) == expected
    assert len(server.requests) == 1, "no retry after the first event"


async def test_429_with_retry_after_then_success(provider: str) -> None:
    script = [*s.fail_first(2, 429, retry_after="0.05"), s.text_turn("finally")]
    async with running(provider, script) as (server, adapter):
        started = time.monotonic()
        events = await collect(adapter, request())
        elapsed = time.monotonic() - started
    assert text_of(events) == "finally"
    assert [r.status for r in server.requests] == [429, 429, 200]
    assert elapsed >= 0.09, "both Retry-After waits were honoured"
    server.assert_script_consumed()


async def test_429_exhausts_retries(provider: str) -> None:
    async with running(provider, s.fail_first(3, 429, retry_after="0"), max_retries=2) as (
        server,
        adapter,
    ):
        with pytest.raises(ProviderError) as info:
            await collect(adapter, request())
    assert info.value.code == "rate_limited" and info.value.retryable
    assert info.value.status_code == 429 and info.value.retry_after_s == 0
    assert len(server.requests) == 3


@pytest.mark.parametrize("status", [400, 401, 403, 404])
async def test_client_errors_are_not_retried_and_redacted(provider: str, status: int) -> None:
    leak = {"error": f"Incorrect API key provided: {API_KEY}"}
    body = {"error": {"message": leak["error"], "type": "invalid_request_error"}}
    if provider == "ollama":
        body = leak  # type: ignore[assignment]
    answer = s.ScriptedStatus(status=status, body=body)
    async with running(provider, [answer, s.text_turn("no")]) as (server, adapter):
        with pytest.raises(ProviderError) as info:
            await collect(adapter, request())
    err = info.value
    assert not err.retryable and err.status_code == status
    assert len(server.requests) == 1
    assert API_KEY not in str(err) and API_KEY not in err.to_payload().model_dump_json()


async def test_5xx_is_retried(provider: str) -> None:
    script = [s.ScriptedStatus(status=503), s.text_turn("back")]
    async with running(provider, script) as (server, adapter):
        events = await collect(adapter, request())
    assert text_of(events) == "back"
    assert [r.status for r in server.requests] == [503, 200]


async def test_connection_dropped_after_text_is_an_error_without_retry(provider: str) -> None:
    turn = s.ScriptedTurn(steps=[s.Text(text="Once upon"), s.Delay(seconds=0.05), s.Drop()])
    async with running(provider, [turn, s.text_turn("duplicate")]) as (server, adapter):
        events = await collect(adapter, request())
    assert text_of(events) == "Once upon"
    last = events[-1]
    assert isinstance(last, ErrorEvent)
    assert last.error.code == "connection_error" and last.error.retryable
    assert len(server.requests) == 1, "a dropped stream is never retried silently"
    assert server.requests[0].dropped


async def test_malformed_chunk_is_a_provider_error(provider: str) -> None:
    turn = s.ScriptedTurn(steps=[s.Text(text="fine "), s.Malformed(), s.Finish()])
    async with running(provider, [turn]) as (server, adapter):
        events = await collect(adapter, request())
    assert text_of(events) == "fine "
    last = events[-1]
    assert isinstance(last, ErrorEvent)
    assert (last.error.type, last.error.code) == ("provider_error", "malformed_response")
    assert len(server.requests) == 1


async def test_cancellation_closes_the_connection(provider: str) -> None:
    turn = s.ScriptedTurn(steps=[s.Text(text="thinking"), s.Delay(seconds=30), s.Finish()])
    async with running(provider, [turn]) as (server, adapter):
        first = asyncio.Event()

        async def consume() -> None:
            async for event in adapter.stream(request()):
                if isinstance(event, TextDeltaEvent):
                    first.set()

        task = asyncio.create_task(consume())
        async with asyncio.timeout(5):
            await first.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        req = await server.wait_done(0, timeout=2)
    assert req.client_closed, "the server saw the client hang up mid-stream"
    assert not req.completed
