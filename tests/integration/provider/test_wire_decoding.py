"""The adapters' own stream decoding against the fakes: odd writes, line endings, error frames."""

from __future__ import annotations

import json

import pytest

from agent_core.types.enums import StopReason
from agent_core.types.protocol import ErrorEvent, MessageEndEvent, ToolCallEndEvent
from tests.fakes import script as s
from tests.integration.provider.harness import PROVIDERS, collect, request, running, text_of


def _turn(write_size: int | None) -> s.ScriptedTurn:
    return s.ScriptedTurn(
        steps=[
            s.Text(text="Grüße, "),
            s.Text(text="日本 ✓"),
            *s.tool_call(0, "call_a", "get_weather", ['{"city": ', '"Zürich"}']),
            s.Usage(input_tokens=4, output_tokens=6),
            s.Finish(reason="tool_use"),
        ],
        write_size=write_size,
        split_pause=0.0,  # every piece is still its own HTTP chunk
    )


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("write_size", [1, 3, 7])
async def test_tiny_writes_decode_like_whole_frames(provider: str, write_size: int) -> None:
    async with running(provider, [_turn(None), _turn(write_size)]) as (server, adapter):
        whole = await collect(adapter, request(tools=True))
        sliced = await collect(adapter, request(tools=True))
    streamed = [r for r in server.requests if r.status == 200 and r.path != "/api/show"]
    assert streamed[-1].split_frames > 0, "the fake really wrote frames in pieces"
    assert sliced == whole
    assert text_of(sliced) == "Grüße, 日本 ✓"
    ends = [e for e in sliced if isinstance(e, ToolCallEndEvent)]
    assert [e.arguments for e in ends] == [{"city": "Zürich"}]


def _openai_frame(delta: dict[str, object], finish: str | None = None) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return "data: " + json.dumps({"id": "c1", "model": "m", "choices": [choice]})


async def test_openai_crlf_line_endings_and_comments() -> None:
    # Some proxies in front of OpenAI-compatible servers re-frame SSE with CRLF and keepalives.
    frames = [
        ": keepalive",
        _openai_frame({"role": "assistant", "content": ""}),
        _openai_frame({"content": "a\r\nb"}),
        _openai_frame({}, "stop"),
        "data: [DONE]",
    ]
    raw = "".join(f + "\r\n\r\n" for f in frames).encode()
    turn = s.ScriptedTurn(steps=[s.Raw(data=raw)], write_size=5)
    async with running("openai", [turn]) as (_server, adapter):
        events = await collect(adapter, request())
    assert text_of(events) == "a\r\nb"
    end = events[-1]
    assert isinstance(end, MessageEndEvent) and end.stop_reason == StopReason.END_TURN


async def test_openai_error_chunk_keeps_its_type() -> None:
    turn = s.ScriptedTurn(
        steps=[s.Text(text="x"), s.ErrorEvent(error_type="rate_limit_exceeded", message="slow")]
    )
    async with running("openai", [turn]) as (_server, adapter):
        events = await collect(adapter, request())
    last = events[-1]
    assert isinstance(last, ErrorEvent)
    assert (last.error.code, last.error.retryable) == ("rate_limited", True)
    assert "slow" in last.error.message


@pytest.mark.parametrize(
    ("data", "code", "fragment"),
    [
        (b"not json at all", "provider_error", "not json at all"),
        (
            b'{"type": "error", "error": {"type": "odd_error", "message": "m1"}}',
            "provider_error",
            "m1",
        ),
        (
            b'{"type": "error", "error": {"type": "api_error", "message": "m2"}}',
            "server_error",
            "m2",
        ),
    ],
)
async def test_anthropic_error_event_bodies(data: bytes, code: str, fragment: str) -> None:
    turn = s.ScriptedTurn(
        steps=[s.Text(text="x"), s.Raw(data=b"event: error\ndata: " + data + b"\n\n")]
    )
    async with running("anthropic", [turn]) as (_server, adapter):
        events = await collect(adapter, request())
    last = events[-1]
    assert isinstance(last, ErrorEvent)
    assert last.error.code == code
    assert fragment in last.error.message


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_consecutive_responses_reuse_one_connection(provider: str) -> None:
    # The body is read to its end (after OpenAI's [DONE] too), so HTTP/1.1 keeps the connection.
    turns = [s.text_turn("a"), s.text_turn("b"), s.text_turn("c")]
    async with running(provider, turns) as (server, adapter):
        texts = [text_of(await collect(adapter, request())) for _ in turns]
    assert texts == ["a", "b", "c"]
    assert server.connections == 1
