"""The typed limit signals of every adapter, from each provider's real wire shape: a prompt over
the context window, an answer or a tool call cut by the output limit, tool arguments that are
not JSON — and what the loop does with them: a bad call is answered with an error result for the
model to fix and never runs; a prompt over the window is tried once more after a compaction and
ends the run ``prompt_too_long`` only when it overflows again (test_context_recovery.py has more)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from agent_core.errors import ProviderError
from agent_core.provider import ProviderErrorCode
from agent_core.types.enums import (
    EndReason,
    EventType,
    InvalidToolCallReason,
    Role,
    RunStatus,
    StopReason,
)
from agent_core.types.protocol import (
    ErrorEvent,
    MessageEndEvent,
    ModelEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallInvalidEvent,
    ToolCallStartEvent,
)
from tests.fakes import script as s
from tests.fakes.http_server import FakeHTTPServer
from tests.integration.provider.harness import (
    PROVIDERS,
    collect,
    request,
    run_loop,
    running,
    text_of,
)
from tests.unit.runtime.fakes import EchoTools, MemoryStore

RAW_STOP = {"openai": "length", "anthropic": "max_tokens", "ollama": "length"}


def closed_calls(events: Sequence[ModelEvent]) -> list[ToolCallEndEvent | ToolCallInvalidEvent]:
    """Every call's closing event, after checking each started call is closed exactly once."""
    started = [e.index for e in events if isinstance(e, ToolCallStartEvent)]
    closed = [e for e in events if isinstance(e, ToolCallEndEvent | ToolCallInvalidEvent)]
    assert sorted(e.index for e in closed) == sorted(started), "each start has one end"
    assert isinstance(events[-1], MessageEndEvent), "closed before message_end"
    assert not any(isinstance(e, ErrorEvent) for e in events)
    return closed


# -- context window -------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_prompt_over_the_context_window_is_one_typed_code(provider: str) -> None:
    overflow = s.ContextOverflow(prompt_tokens=210_000, limit=200_000)
    async with running(provider, [overflow, s.text_turn("never")]) as (server, adapter):
        with pytest.raises(ProviderError) as info:
            await collect(adapter, request())
    err = info.value
    assert err.code == ProviderErrorCode.CONTEXT_LENGTH_EXCEEDED
    assert not err.retryable and err.status_code == 400
    assert len(server.requests) == 1, "not retried: the same prompt fails the same way"
    if provider != "ollama":  # Ollama's message carries no sizes
        assert (err.details["prompt_tokens"], err.details["context_limit"]) == (210_000, 200_000)


async def test_ollama_is_asked_to_refuse_an_overflow_instead_of_dropping_messages() -> None:
    answer = s.text_turn("from a shortened prompt", usage=(3, 4))
    overflow = s.ContextOverflow(limit=4096, then=answer)
    # What Ollama does by default (truncate: true): a 200 answer to a silently shortened prompt.
    async with running("ollama", [overflow], provider_options={"truncate": True}) as (_, adapter):
        events = await collect(adapter, request())
    assert text_of(events) == "from a shortened prompt"
    async with running("ollama", [overflow]) as (server, adapter):
        with pytest.raises(ProviderError) as info:
            await collect(adapter, request())
    assert (server.requests[0].json["truncate"], server.requests[0].json["shift"]) == (False, False)
    assert info.value.code == "context_length_exceeded"


async def test_openai_compatible_servers_overflow_the_same_way() -> None:
    llama_cpp = s.ScriptedStatus(
        status=400,
        body={
            "error": {
                "code": 400,
                "message": "request (9412 tokens) exceeds the available context size "
                "(8192 tokens), try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 9412,
                "n_ctx": 8192,
            }
        },
    )
    vllm = s.ScriptedStatus(
        status=400,
        body={
            "object": "error",
            "message": "This model's maximum context length is 4096 tokens. However, you "
            "requested 5120 tokens (4096 in the messages, 1024 in the completion).",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
    )
    codes = []
    async with running("openai", [llama_cpp, vllm]) as (_server, adapter):
        for _ in range(2):
            with pytest.raises(ProviderError) as info:
                await collect(adapter, request())
            codes.append((info.value.code, info.value.details.get("context_limit")))
    assert codes == [("context_length_exceeded", 8192), ("context_length_exceeded", 4096)]


# -- output limit ---------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_answer_cut_by_the_output_limit_ends_as_max_tokens(provider: str) -> None:
    async with running(provider, [s.text_turn("The answer is cu", reason="max_tokens")]) as (
        _server,
        adapter,
    ):
        events = await collect(adapter, request(max_tokens=5))
    end = events[-1]
    assert isinstance(end, MessageEndEvent)
    assert (end.stop_reason, end.raw_stop_reason) == (StopReason.MAX_TOKENS, RAW_STOP[provider])


async def test_anthropic_context_window_stop_is_a_cut_answer_too() -> None:
    frames = (
        'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":'
        '"model_context_window_exceeded","stop_sequence":null},"usage":{"output_tokens":9}}\n\n'
        'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    turn = s.ScriptedTurn(steps=[s.Text(text="long"), s.Raw(data=frames.encode())])
    async with running("anthropic", [turn]) as (_server, adapter):
        events = await collect(adapter, request())
    end = events[-1]
    assert isinstance(end, MessageEndEvent) and end.stop_reason is StopReason.MAX_TOKENS


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_tool_call_cut_by_the_output_limit_is_never_a_call_to_run(provider: str) -> None:
    fragments = ['{"path": "notes.md", ', '"content": "first li']
    turn = s.cut_tool_call_turn("Writing.", "call_w", "write_file", fragments)
    async with running(provider, [turn]) as (_server, adapter):
        events = await collect(adapter, request(tools=True))
    assert text_of(events) == "Writing."
    (closed,) = closed_calls(events)
    assert isinstance(closed, ToolCallInvalidEvent)
    assert closed.raw_arguments == "".join(fragments)
    end = events[-1]
    assert isinstance(end, MessageEndEvent)
    if provider == "ollama":
        # Ollama parses calls itself and reports the cut call as its parser's error, with no
        # done line after it: the reason the limit was hit never reaches the client.
        assert closed.reason is InvalidToolCallReason.INVALID_ARGUMENTS
        assert "unexpected end of JSON input" in closed.error
        assert end.stop_reason is StopReason.TOOL_USE
    else:
        assert (closed.id, closed.name) == ("call_w", "write_file")
        assert closed.reason is InvalidToolCallReason.TRUNCATED
        assert end.stop_reason is StopReason.MAX_TOKENS


async def test_a_complete_call_before_a_cut_one_still_runs() -> None:
    turn = s.ScriptedTurn(
        steps=[
            *s.tool_call(0, "call_ok", "get_time", ['{"city": "Oslo"}']),
            s.ToolCallStart(index=1, id="call_cut", name="get_weather"),
            s.ToolCallArgs(index=1, fragment='{"city": "Par'),
            s.Finish(reason="max_tokens"),
        ]
    )
    async with running("openai", [turn]) as (_server, adapter):
        events = await collect(adapter, request(tools=True))
    ok, cut = closed_calls(events)
    assert isinstance(ok, ToolCallEndEvent) and ok.arguments == {"city": "Oslo"}
    assert isinstance(cut, ToolCallInvalidEvent) and cut.reason is InvalidToolCallReason.TRUNCATED


# -- invalid tool arguments -----------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_invalid_tool_json_is_a_recoverable_call_not_a_failed_stream(provider: str) -> None:
    raw = '{"city": Paris}'
    async with running(provider, [s.invalid_tool_call_turn("call_bad", "get_weather", raw)]) as (
        server,
        adapter,
    ):
        events = await collect(adapter, request(tools=True))
    (closed,) = closed_calls(events)
    assert isinstance(closed, ToolCallInvalidEvent)
    assert closed.reason is InvalidToolCallReason.INVALID_ARGUMENTS
    assert closed.raw_arguments == raw
    deltas = [e.arguments_delta for e in events if isinstance(e, ToolCallDeltaEvent)]
    assert "".join(deltas) == raw
    if provider == "ollama":  # Ollama's parser error names neither the call nor its tool
        assert closed.name == "" and closed.id.startswith("call_")
        assert "invalid character 'P'" in closed.error
    else:
        assert (closed.id, closed.name) == ("call_bad", "get_weather")
        assert "not valid JSON" in closed.error
    end = events[-1]
    assert isinstance(end, MessageEndEvent) and end.stop_reason is StopReason.TOOL_USE
    assert len(server.requests) == 1 + (provider == "ollama"), "(Ollama asked /api/show first)"


async def test_ollama_tool_parse_error_before_any_line_is_the_same_call() -> None:
    # Nothing was streamed yet, so Ollama answers its parser's error as an HTTP 500.
    message = "error parsing tool call: raw='{\"a\": [1, }', err=invalid character '}' looking"
    answer = s.ScriptedStatus(status=500, body={"error": message + " for beginning of value"})
    async with running("ollama", [answer, s.text_turn("retried")], supports_tools=True) as (
        server,
        adapter,
    ):
        events = await collect(adapter, request(tools=True))
    (closed,) = closed_calls(events)
    assert isinstance(closed, ToolCallInvalidEvent) and closed.raw_arguments == '{"a": [1, }'
    assert len(server.requests) == 1, "the model's mistake is not retried as a server error"


# -- what the loop does with them -----------------------------------------------------------------


async def test_the_loop_ends_a_repeated_context_overflow_as_prompt_too_long() -> None:
    # A lone message has nothing to compact: it is sent once more, as it is, then the run ends.
    async with running("openai", [s.ContextOverflow(), s.ContextOverflow()]) as (server, adapter):
        outcome = await run_loop(adapter)
    assert len(server.requests) == 2
    assert (outcome.status, outcome.end_reason) == (RunStatus.FAILED, EndReason.PROMPT_TOO_LONG)
    assert outcome.error is not None and outcome.error.code == "context_length_exceeded"


def _chat_bodies(server: FakeHTTPServer) -> list[str]:
    """The model requests the fake received, as text (Ollama's /api/show left out)."""
    return [r.body.decode() for r in server.requests if not r.path.endswith("/api/show")]


_FIXED = s.ScriptedTurn(
    steps=[
        *s.tool_call(0, "call_ok", "echo", ['{"text": "fixed"}']),
        s.Usage(input_tokens=9, output_tokens=7),
        s.Finish(reason="tool_use"),
    ]
)
_BAD_CALLS = {
    "invalid": (
        s.invalid_tool_call_turn("call_inv", "echo", '{"text": nope}'),
        "invalid_tool_arguments",
        "not a valid JSON object",
    ),
    "truncated": (
        s.cut_tool_call_turn("", "call_tru", "echo", ['{"text": "ha']),
        "tool_call_truncated",
        "cut off by the output limit",
    ),
}


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("kind", sorted(_BAD_CALLS))
async def test_a_bad_call_is_the_models_to_fix_and_never_runs(provider: str, kind: str) -> None:
    bad, code, told = _BAD_CALLS[kind]
    if provider == "ollama" and kind == "truncated":
        # Ollama reports a cut call as its parser's error (see above): the invalid path.
        code, told = "invalid_tool_arguments", "not a valid JSON object"
    tools, store = EchoTools(), MemoryStore()
    async with running(provider, [bad, _FIXED, s.text_turn("done")]) as (server, adapter):
        outcome = await run_loop(adapter, tools, store)
    # Only the call the model sent again ran; the run went on and ended with its answer.
    assert [(c.id, c.arguments) for c in tools.calls] == [("call_ok", {"text": "fixed"})]
    assert (outcome.status, outcome.end_reason) == (RunStatus.COMPLETED, EndReason.COMPLETED)
    assert outcome.turns == 3 and outcome.error is None
    first, second, third = _chat_bodies(server)
    assert told not in first and told in second, "the model was told what was wrong"
    assert told in third and "fixed" in third
    (failed,) = [p for t, p in store.events if t is EventType.TOOL_FAILED]
    assert failed["error_code"] == code
    # Ollama's parser error names no call: the adapter gives it an id of its own.
    assert provider == "ollama" or failed["tool_call_id"] == f"call_{kind[:3]}"
    first_results = next(n for n in store.nodes if n.role is Role.TOOL)
    assert [getattr(b, "is_error", None) for b in first_results.content] == [True]
