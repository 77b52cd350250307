"""Tool-call assembly and error classification."""

from __future__ import annotations

import email.utils
import time

import pytest

from agent_core.errors import ProviderError
from agent_core.provider.errors import parse_retry_after, status_error, stream_error
from agent_core.provider.toolcalls import ToolCallAssembler


def test_assembles_interleaved_calls_by_key_in_start_order() -> None:
    calls = ToolCallAssembler("p")
    assert calls.start(7, "id_a", "a").index == 0
    assert calls.start(3, "", "b").index == 1
    calls.add(3, '{"y": "é')
    calls.add(7, '{"x": ')
    calls.add(3, '"}')
    calls.add(7, "1}")
    ends = calls.finish_all()
    assert [(e.index, e.id, e.name, e.arguments) for e in ends] == [
        (0, "id_a", "a", {"x": 1}),
        (1, "call_1", "b", {"y": "é"}),
    ]
    assert not calls.is_open(7)


def test_empty_arguments_mean_empty_object() -> None:
    calls = ToolCallAssembler("p")
    calls.start(0, "c", "noargs")
    assert calls.finish(0).arguments == {}


@pytest.mark.parametrize("raw", ['{"x": ', "[1, 2]", '"text"'])
def test_invalid_arguments_are_a_provider_error_without_the_arguments(raw: str) -> None:
    calls = ToolCallAssembler("p")
    calls.start(0, "c", "tool")
    calls.add(0, raw)
    with pytest.raises(ProviderError) as info:
        calls.finish(0)
    assert info.value.code == "invalid_tool_arguments" and not info.value.retryable
    assert raw not in str(info.value)


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
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= (parse_retry_after({"Retry-After": future}) or 0) <= 31
