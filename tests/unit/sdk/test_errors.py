"""One exception tree from the API's error answers, and retries only where a repeat is safe."""

from __future__ import annotations

import httpx
import pytest

import soong_agent
from soong_agent import (
    APIError,
    ConflictError,
    NotFoundError,
    PreconditionFailedError,
    RateLimitedError,
    ServerError,
    ServiceUnavailableError,
    SoongError,
    TransportError,
    ValidationError,
)
from soong_agent._errors import error_from_response

SID = "sess_20260101_120000_0123456789abcdef"


def _error(status: int, code: str, headers: dict[str, str] | None = None, **details: object):
    body = {"error": {"code": code, "message": f"{code}!", "details": details}}
    return httpx.Response(status, json=body, headers=headers)


def test_statuses_map_to_the_tree() -> None:
    cases = {
        404: NotFoundError,
        409: ConflictError,
        412: PreconditionFailedError,
        503: ServiceUnavailableError,
        500: ServerError,
        418: APIError,
    }
    for status, cls in cases.items():
        error = error_from_response(_error(status, "some_code"))
        assert type(error) is cls and isinstance(error, SoongError)
        assert (error.status, error.code, error.message) == (status, "some_code", "some_code!")
    limited = error_from_response(_error(429, "rate_limited", {"Retry-After": "3"}))
    assert isinstance(limited, RateLimitedError) and limited.retry_after_s == 3.0
    proxy = error_from_response(httpx.Response(502, text="<html>bad gateway</html>"))
    assert isinstance(proxy, ServerError) and proxy.code == "http_502"


def test_validation_errors_name_the_field_by_its_path() -> None:
    errors = [
        {"field": "body.content.0.text", "message": "too long", "type": "string_too_long"},
        {"field": "query.limit", "message": "too big", "type": "less_than_equal"},
    ]
    error = error_from_response(_error(422, "validation_error", errors=errors))
    assert isinstance(error, ValidationError)
    assert error.field == "body.content.0.text"
    assert error.errors[0].path == ("body", "content", 0, "text")
    assert [e.type for e in error.errors] == ["string_too_long", "less_than_equal"]


def _client(handler) -> soong_agent.AsyncClient:
    return soong_agent.AsyncClient(
        "http://gw", "sa_live_x", transport=httpx.MockTransport(handler), max_retries=3
    )


async def test_reads_and_keyed_posts_are_retried_on_503_and_drops_but_creations_are_not() -> None:
    calls: list[str] = []

    def flaky(request: httpx.Request) -> httpx.Response:
        calls.append(request.method)
        if len(calls) == 1:
            raise httpx.ReadError("reset")
        if len(calls) == 2:
            return _error(503, "bus_timeout", {"Retry-After": "0"})
        return httpx.Response(200, json={"status": "ok"})

    async with _client(flaky) as c:
        assert (await c.health()).status == "ok"
    assert calls == ["GET", "GET", "GET"]

    calls.clear()
    keys: list[str | None] = []

    def busy(request: httpx.Request) -> httpx.Response:
        calls.append(request.method)
        keys.append(request.headers.get("idempotency-key"))
        return _error(503, "bus_timeout", {"Retry-After": "0"})

    async with _client(busy) as c:
        with pytest.raises(ServiceUnavailableError):
            # A post carries an Idempotency-Key: sent again with it, a repeat makes no second run.
            await c.session(SID).post("hi")
        with pytest.raises(ServiceUnavailableError):
            await c.session(SID).post("hi", idempotency_key="mine-1")
        with pytest.raises(ServiceUnavailableError):
            await c.session(SID).get()
    assert calls == ["POST"] * 8 + ["GET"] * 4
    first = keys[0]
    assert first and keys[:4] == [first] * 4  # one key for one post's retries
    assert keys[4:8] == ["mine-1"] * 4 and keys[8:] == [None] * 4
    keys.clear()
    async with _client(busy) as c:
        with pytest.raises(ServiceUnavailableError):
            await c.session(SID).post("hi")
    assert keys[0] != first  # a new post, a new key

    calls.clear()

    def dropped(request: httpx.Request) -> httpx.Response:
        calls.append(request.method)
        raise httpx.ReadError("reset after sending")

    async with _client(dropped) as c:
        with pytest.raises(TransportError):
            await c.create_session()
    assert calls == ["POST"]


async def test_refused_before_acting_is_retried_for_any_operation() -> None:
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.method)
        if len(calls) == 1:
            raise httpx.ConnectError("refused")  # nothing was sent
        if len(calls) == 2:
            return _error(429, "rate_limited", {"Retry-After": "0"})
        return httpx.Response(
            202,
            json={
                "session_id": SID,
                "run_id": "run_0123456789abcdef",
                "node_id": "node_0123456789abcdef",
                "kind": "main",
                "events_url": "/x",
            },
        )

    async with _client(handler) as c:
        accepted = await c.session(SID).post("hi")
    assert accepted.run_id == "run_0123456789abcdef" and calls == ["POST"] * 3

    def slow_down(_: httpx.Request) -> httpx.Response:
        return _error(429, "too_many_failures", {"Retry-After": "60"})

    async with _client(slow_down) as c:  # longer than max_retry_wait_s: raised at once
        with pytest.raises(RateLimitedError) as info:
            await c.session(SID).get()
    assert info.value.retry_after_s == 60.0


async def test_a_full_disk_is_retried_for_reads_and_named_for_messages() -> None:
    calls: list[str] = []

    def full(request: httpx.Request) -> httpx.Response:
        calls.append(request.method)
        if request.method == "GET" and len(calls) > 2:
            return httpx.Response(200, json={"status": "ok"})
        return _error(507, "storage_full", {"Retry-After": "0"})

    async with _client(full) as c:
        with pytest.raises(ServerError) as info:
            await c.session(SID).post("hi")  # retried with its key, then named
        assert (info.value.status, info.value.code) == (507, "storage_full")
        assert (await c.health()).status == "ok"
    assert calls == ["POST"] * 4 + ["GET"]
