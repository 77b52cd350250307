"""Tool-call assembly and error classification."""

from __future__ import annotations

import email.utils

import pytest

from agent_core.provider.errors import (
    ProviderErrorCode,
    parse_retry_after,
    status_error,
    stream_error,
)
from agent_core.provider.toolcalls import ToolCallAssembler
from agent_core.types.enums import InvalidToolCallReason
from agent_core.types.protocol import ToolCallEndEvent, ToolCallInvalidEvent


def test_assembles_interleaved_calls_by_key_in_start_order() -> None:
    calls = ToolCallAssembler()
    assert calls.start(7, "id_a", "a").index == 0
    second = calls.start(3, "", "b")
    assert second.index == 1
    calls.add(3, '{"y": "é')
    calls.add(7, '{"x": ')
    calls.add(3, '"}')
    calls.add(7, "1}")
    ends = calls.finish_all()
    assert [(e.index, e.id, e.name, getattr(e, "arguments", None)) for e in ends] == [
        (0, "id_a", "a", {"x": 1}),
        (1, second.id, "b", {"y": "é"}),
    ]
    assert not calls.is_open(7)


def test_calls_without_an_id_get_a_fresh_one_every_time() -> None:
    # Ollama before 0.12 sends no ids: a position-derived "call_0" repeated on every turn.
    ids = [ToolCallAssembler().start(0, "", "t").id for _ in range(3)]
    one = ToolCallAssembler()
    ids += [one.start(k, "", "t").id for k in range(3)]
    assert len(set(ids)) == 6 and all(i.startswith("call_") and i != "call_0" for i in ids)


def test_empty_arguments_mean_empty_object() -> None:
    calls = ToolCallAssembler()
    calls.start(0, "c", "noargs")
    end = calls.finish(0)
    assert isinstance(end, ToolCallEndEvent) and end.arguments == {}


@pytest.mark.parametrize(
    ("raw", "why"),
    [('{"x": ', "not valid JSON"), ("[1, 2]", "a JSON list, not an object"), ('"t"', "a JSON str")],
)
def test_invalid_arguments_close_the_call_as_invalid_with_the_raw_text(raw: str, why: str) -> None:
    calls = ToolCallAssembler()
    calls.start(0, "c", "tool")
    calls.add(0, raw)
    invalid = calls.finish(0)
    assert isinstance(invalid, ToolCallInvalidEvent)
    assert (invalid.id, invalid.name, invalid.raw_arguments) == ("c", "tool", raw)
    assert invalid.reason is InvalidToolCallReason.INVALID_ARGUMENTS
    assert why in invalid.error and raw not in invalid.error
    assert not calls.is_open(0) and calls.settle(cut=True) == [], "closed exactly once"


def test_only_the_last_call_of_a_cut_response_is_truncated() -> None:
    calls = ToolCallAssembler()
    for key, raw in ((0, "{oops}"), (1, '{"ok": 1}'), (2, '{"path": "a.t')):
        calls.start(key, f"c{key}", "t")
        calls.add(key, raw)
    closed = calls.finish_all(cut=True)
    assert [(e.type, e.index) for e in closed] == [
        ("tool_call_end", 1),
        ("tool_call_invalid", 0),
        ("tool_call_invalid", 2),
    ]
    reasons = [e.reason for e in closed if isinstance(e, ToolCallInvalidEvent)]
    assert reasons == [InvalidToolCallReason.INVALID_ARGUMENTS, InvalidToolCallReason.TRUNCATED]


def test_a_call_that_does_not_parse_waits_for_the_stop_reason() -> None:
    # Anthropic closes the block before message_delta says whether the limit cut it.
    calls = ToolCallAssembler()
    calls.start(4, "c", "t")
    calls.add(4, '{"content": "half')
    assert calls.close(4) is None
    (invalid,) = calls.settle(cut=True)
    assert invalid.reason is InvalidToolCallReason.TRUNCATED
    assert invalid.raw_arguments == '{"content": "half'


def test_a_call_rejected_by_the_provider_keeps_its_reason() -> None:
    calls = ToolCallAssembler()
    calls.start("x", "", "")
    calls.add("x", "{1: 2}")
    invalid = calls.reject("x", "invalid character '1' looking for beginning of object key")
    assert invalid.reason is InvalidToolCallReason.INVALID_ARGUMENTS
    assert invalid.error.startswith("invalid character") and invalid.raw_arguments == "{1: 2}"


@pytest.mark.parametrize(
    ("status", "code", "retryable"),
    [
        (400, "bad_request", False),
        (401, "authentication_failed", False),
        (403, "permission_denied", False),
        (404, "not_found", False),
        (408, "timeout", True),
        (429, "rate_limited", True),
        (500, "server_error", True),
        (503, "server_error", True),
        (529, "overloaded", True),
    ],
)
def test_status_classification(status: int, code: str, retryable: bool) -> None:
    err = status_error("p", status, "boom")
    assert (err.code, err.retryable, err.status_code) == (code, retryable, status)


def test_status_error_redacts_message_and_body() -> None:
    key = "sk-ant-abcdefghijklmnopqrstuvwxyz"
    err = status_error("p", 401, f"bad key {key}", body={"error": {"message": f"key {key}"}})
    assert key not in str(err) and key not in err.to_payload().model_dump_json()


def test_stream_error_types() -> None:
    assert (
        stream_error("p", "overloaded_error", "x").code,
        stream_error("p", "overloaded_error", "x").retryable,
    ) == ("overloaded", True)
    assert stream_error("p", "invalid_request_error", "x").retryable is False
    assert stream_error("p", None, "x").code == "provider_error"


def test_parse_retry_after() -> None:
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({}) is None and parse_retry_after({"retry-after": "soon"}) is None
    now = 1_790_000_000.0  # an HTTP date is counted from the time given
    future = email.utils.formatdate(now + 30, usegmt=True)
    assert parse_retry_after({"Retry-After": future}, now=now) == 30.0
    assert parse_retry_after({"Retry-After": future}, now=now + 60) == 0.0  # past: no wait


# (status, message, error type, error code, body) as each server sends "the prompt is too long".
OVERFLOWS = {
    "openai": (
        400,
        "This model's maximum context length is 128000 tokens. However, your messages resulted "
        "in 130512 tokens. Please reduce the length of the messages.",
        "invalid_request_error",
        "context_length_exceeded",
        None,
        {"prompt_tokens": 130512, "context_limit": 128000},
    ),
    "anthropic": (
        400,
        "prompt is too long: 208310 tokens > 200000 maximum",
        "invalid_request_error",
        None,
        None,
        {"prompt_tokens": 208310, "context_limit": 200000},
    ),
    "anthropic_with_max_tokens": (
        400,
        "input length and `max_tokens` exceed context limit: 187254 + 20000 > 200000, decrease "
        "input length or `max_tokens` and try again",
        "invalid_request_error",
        None,
        None,
        {"prompt_tokens": 187254, "context_limit": 200000},
    ),
    "ollama": (400, "the input length exceeds the context length", None, None, None, {}),
    "ollama_llama_server": (
        400,
        "the prompt is longer than the context length currently available to the model; shorten "
        "the prompt, adjust the context length in settings, or use a model with a longer context "
        "length",
        None,
        None,
        None,
        {},
    ),
    "llama.cpp": (
        400,
        "request (9412 tokens) exceeds the available context size (8192 tokens), try increasing it",
        "exceed_context_size_error",
        "400",
        {"code": 400, "type": "exceed_context_size_error", "n_prompt_tokens": 9412, "n_ctx": 8192},
        {"prompt_tokens": 9412, "context_limit": 8192},
    ),
    "vllm": (
        400,
        "This model's maximum context length is 4096 tokens. However, you requested 5120 tokens "
        "(4096 in the messages, 1024 in the completion). Please reduce the length of the messages "
        "or completion.",
        "BadRequestError",
        "400",
        None,
        {"context_limit": 4096},
    ),
}


@pytest.mark.parametrize("server", OVERFLOWS)
def test_every_servers_context_overflow_is_one_code_and_not_retryable(server: str) -> None:
    status, message, error_type, error_code, body, sizes = OVERFLOWS[server]
    err = status_error(
        "p", status, message, error_type=error_type, error_code=error_code, body=body
    )
    assert err.code == ProviderErrorCode.CONTEXT_LENGTH_EXCEEDED == "context_length_exceeded"
    assert not err.retryable and err.status_code == 400
    assert {k: err.details[k] for k in sizes} == sizes


@pytest.mark.parametrize(
    "message",
    [
        "max_tokens is too large: 100000. This model supports at most 16384 completion tokens",
        "Incorrect API key provided",
        "messages: roles must alternate between user and assistant",
    ],
)
def test_other_bad_requests_are_not_context_overflows(message: str) -> None:
    assert status_error("p", 400, message).code == "bad_request"


def test_a_context_overflow_reported_in_a_stream_has_the_same_code() -> None:
    err = stream_error("p", None, "the input length exceeds the context length")
    assert (err.code, err.retryable) == ("context_length_exceeded", False)
