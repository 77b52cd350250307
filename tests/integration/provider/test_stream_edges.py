"""Stream edges found with real recorded streams, each against its provider's real shape."""

from __future__ import annotations

import pytest

from agent_core.errors import ProviderError
from agent_core.types.enums import RunStatus, StopReason
from agent_core.types.protocol import (
    ErrorEvent,
    MessageEndEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    Usage,
    UsageEvent,
)
from tests.fakes import script as s
from tests.integration.provider.harness import (
    PROVIDERS,
    collect,
    request,
    run_loop,
    running,
    text_of,
)


def _cut_mid_frame(keep: int) -> s.ScriptedTurn:
    """Text, then a frame cut after ``keep`` bytes and a cleanly ended body (a proxy whose
    upstream died mid-line)."""
    return s.ScriptedTurn(
        steps=[s.Text(text="Hel"), s.Cut(keep=keep), s.Text(text="lo"), s.Finish()]
    )


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stream_cut_mid_frame_is_a_retryable_stream_error(provider: str) -> None:
    async with running(provider, [_cut_mid_frame(12)]) as (server, adapter):
        events = await collect(adapter, request())
    assert text_of(events) == "Hel"
    last = events[-1]
    assert isinstance(last, ErrorEvent)
    assert (last.error.code, last.error.retryable) == ("incomplete_response", True)
    assert server.requests[-1].completed, "the body ended cleanly, mid-line"


async def test_an_ollama_stream_cut_in_its_first_line_is_retried() -> None:
    # (The SSE formats open with their own frames — OpenAI's role chunk, Anthropic's
    # message_start — so there the first event always precedes a cut in the script's frames.)
    cut_first = s.ScriptedTurn(steps=[s.Cut(keep=15), s.Text(text="lost"), s.Finish()])
    async with running("ollama", [cut_first, s.text_turn("again")]) as (server, adapter):
        events = await collect(adapter, request())
    assert text_of(events) == "again"
    server.assert_script_consumed()


async def test_anthropic_input_tokens_count_when_the_stream_fails_before_message_delta() -> None:
    turn = s.ScriptedTurn(
        steps=[s.Usage(input_tokens=1200, output_tokens=0), s.Text(text="partial"), s.Drop()]
    )
    async with running("anthropic", [turn]) as (_server, adapter):
        events = await collect(adapter, request())
    assert isinstance(events[-1], ErrorEvent)
    total = sum((e.usage for e in events if isinstance(e, UsageEvent)), Usage())
    assert total.input_tokens == 1200


async def test_a_failed_anthropic_run_keeps_the_input_tokens_it_was_billed() -> None:
    turn = s.ScriptedTurn(
        steps=[s.Usage(input_tokens=1200, output_tokens=0), s.Text(text="partial"), s.Drop()]
    )
    async with running("anthropic", [turn]) as (_server, adapter):
        outcome = await run_loop(adapter)
    assert outcome.status is RunStatus.FAILED
    assert outcome.usage.input_tokens == 1200


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_tool_call_ids_are_unique_when_the_provider_sends_none(provider: str) -> None:
    def turn() -> s.ScriptedTurn:  # Ollama before 0.12 sends calls without ids
        return s.ScriptedTurn(
            steps=[
                *s.tool_call(0, "", "get_weather", ['{"city": "Paris"}']),
                *s.tool_call(1, "", "get_time", ['{"city": "Oslo"}']),
                s.Finish(reason="tool_use"),
            ]
        )

    async with running(provider, [turn(), turn()]) as (_server, adapter):
        turns = [await collect(adapter, request(tools=True)) for _ in range(2)]
    starts = [e.id for events in turns for e in events if isinstance(e, ToolCallStartEvent)]
    ends = [e.id for events in turns for e in events if isinstance(e, ToolCallEndEvent)]
    assert len(starts) == 4 and len(set(starts)) == 4, "unique across calls and turns"
    assert ends == starts


async def test_openai_refusal_is_delivered_and_ends_as_a_refusal() -> None:
    turn = s.ScriptedTurn(
        steps=[
            s.Refusal(text="I can't help "),
            s.Refusal(text="with that."),
            s.Usage(input_tokens=5, output_tokens=6),
            s.Finish(reason="refusal"),
        ]
    )
    async with running("openai", [turn]) as (_server, adapter):
        events = await collect(adapter, request())
    assert text_of(events) == "I can't help with that."
    end = events[-1]
    assert isinstance(end, MessageEndEvent)
    assert (end.stop_reason, end.raw_stop_reason) == (StopReason.REFUSAL, "stop")


async def test_anthropic_refusal_stop_reason() -> None:
    turn = s.ScriptedTurn(steps=[s.Text(text="I won't"), s.Finish(reason="refusal")])
    async with running("anthropic", [turn]) as (_server, adapter):
        events = await collect(adapter, request())
    end = events[-1]
    assert isinstance(end, MessageEndEvent)
    assert (end.stop_reason, end.raw_stop_reason) == (StopReason.REFUSAL, "refusal")


async def test_an_empty_openai_stream_is_asked_again_without_streaming_for_its_error() -> None:
    """llama.cpp's server answers a prompt over its window, while streaming, with an empty 200
    body: the real 400 comes from the same request without streaming, and is the error raised
    (typed: the loop compacts and tries again instead of retrying the same request blindly)."""
    empty = s.ScriptedTurn(silent=True)
    overflow = s.ContextOverflow(prompt_tokens=3000, limit=2048)
    async with running("openai", [empty, overflow]) as (server, adapter):
        with pytest.raises(ProviderError) as raised:
            await collect(adapter, request())
    assert raised.value.code == "context_length_exceeded", raised.value
    assert raised.value.to_payload().details.get("context_limit") == 2048
    streamed, plain = (r.json for r in server.requests)
    assert streamed["stream"] is True and plain["stream"] is False
    assert "stream_options" not in plain and plain["messages"] == streamed["messages"]


async def test_a_stream_of_only_its_opening_chunk_is_asked_again_without_streaming() -> None:
    """llama-cpp-python's server opens the stream (a role chunk) before it meets an overflow,
    then ends it: as good as empty, so the plain request's 400 is the error raised."""
    opened = s.ScriptedTurn(steps=[])  # the role chunk, no content, no finish_reason
    overflow = s.ContextOverflow(prompt_tokens=3000, limit=2048)
    async with running("openai", [opened, overflow]) as (server, adapter):
        events = await collect(adapter, request())
    # Once the message has started, an error is the stream's last event, not an exception.
    last = events[-1]
    assert isinstance(last, ErrorEvent) and last.error.code == "context_length_exceeded", last
    assert [r.json["stream"] for r in server.requests] == [True, False]


async def test_an_empty_openai_stream_whose_plain_answer_is_fine_is_retried_as_incomplete() -> None:
    script = [s.ScriptedTurn(silent=True), s.text_turn("fine"), s.text_turn("streamed")]
    async with running("openai", script) as (server, adapter):
        events = await collect(adapter, request())
    assert text_of(events) == "streamed"
    assert [r.json["stream"] for r in server.requests] == [True, False, True]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_gzip_encoded_stream_gives_the_events_a_plain_one_gives(provider: str) -> None:
    """The adapters read an unencoded body raw (no decoder pass): one that is content-encoded
    must still go through the decoder, frame by frame."""

    def turn(gzip: bool) -> s.ScriptedTurn:
        steps = [s.Text(text="Grüße, "), s.Text(text="日本")]
        steps += s.tool_call(0, "call_a", "get_weather", ['{"ci', 'ty": "Paris"}'])
        return s.ScriptedTurn(steps=[*steps, s.Finish(reason="tool_use")], gzip=gzip)

    async with running(provider, [turn(False), turn(True)]) as (server, adapter):
        plain = await collect(adapter, request())
        encoded = await collect(adapter, request())
        server.assert_script_consumed()
    assert text_of(encoded) == "Grüße, 日本"
    assert [e.model_dump() for e in encoded] == [e.model_dump() for e in plain]
    assert any(isinstance(e, ToolCallEndEvent) for e in encoded)


# Valid JSON of the wrong shape: what each adapter reads is typed or required, never guessed.
_WRONG_SHAPES = {
    "openai": [
        b'{"choices": "x"}',
        b'{"choices": [{"index": 0, "delta": "x"}]}',
        b'{"choices": [{"index": 0, "delta": {"content": 5}}]}',
    ],
    "anthropic": [
        b'{"index": 0, "delta": {"type": "text_delta", "text": "x"}}',  # no type
        b'{"type": "content_block_delta", "index": 0}',  # no delta
        b'{"type": "content_block_delta", '  # no index
        b'"delta": {"type": "input_json_delta", "partial_json": "{"}}',
        b'{"type": "content_block_stop"}',  # no index
    ],
}


@pytest.mark.parametrize(
    ("provider", "payload"), [(p, d) for p, shapes in _WRONG_SHAPES.items() for d in shapes]
)
async def test_a_chunk_of_the_wrong_shape_is_malformed(provider: str, payload: bytes) -> None:
    frame = b"data: " + payload + b"\n\n"
    if provider == "anthropic":
        frame = b"event: content_block_delta\n" + frame
    turn = s.ScriptedTurn(steps=[s.Text(text="fine "), s.Raw(data=frame), s.Finish()])
    async with running(provider, [turn]) as (server, adapter):
        events = await collect(adapter, request())
    assert text_of(events) == "fine "
    last = events[-1]
    assert isinstance(last, ErrorEvent)
    assert last.error.code == "malformed_response"
    assert len(server.requests) == 1
