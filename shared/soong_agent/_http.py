"""The SDK's one HTTP path: requests with the API key, error mapping, and retries where safe.

Retries (at most ``max_retries``, exponential back-off with jitter, or the server's
``Retry-After`` when it gives one and it is within ``max_retry_wait_s``):

- a connection that could not be made (nothing was sent) — any operation;
- 429 (the gateway refuses before acting: rate limit, stream slots) — any operation;
- a connection that broke after sending, or 502/503/504/507 (507 ``storage_full``: the
  database's disk is full) — only operations marked idempotent in
  :mod:`soong_agent._operations`, and requests that carry an ``Idempotency-Key`` (a posted
  message: the gateway answers a repeat with the run the first request made; without the key a
  repeated message would be a second message).
"""

from __future__ import annotations

import asyncio
import random
import weakref
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, Protocol, TypeVar

import httpx
import pydantic

from soong_agent._errors import (
    APIError,
    ProtocolError,
    RateLimitedError,
    ServerError,
    TransportError,
    error_from_response,
)
from soong_agent._operations import Operation

__all__ = ["IDEMPOTENCY_KEY", "HttpCore", "backoff_s", "repeatable"]

M = TypeVar("M", bound=pydantic.BaseModel)

_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
_RETRY_STATUSES = frozenset({502, 503, 504, 507})
IDEMPOTENCY_KEY = "Idempotency-Key"


def repeatable(op: Operation, headers: Mapping[str, str] | None) -> bool:
    """Whether ``op`` may be sent again after it may have reached the server: an idempotent
    operation, or one whose request carries an ``Idempotency-Key``."""
    return op.idempotent or (headers is not None and IDEMPOTENCY_KEY in headers)


def backoff_s(attempt: int, *, base_s: float = 0.2, cap_s: float = 5.0) -> float:
    """Exponential back-off with jitter: ~``base_s`` · 2^attempt, at most ``cap_s``."""
    return float(min(cap_s, base_s * 2**attempt)) * (0.5 + random.random() / 2)


class _Closable(Protocol):
    """What :meth:`HttpCore.track` holds: an event stream that closes itself."""

    async def aclose(self) -> None: ...


class HttpCore:
    """An ``httpx.AsyncClient`` bound to one gateway and key, with the SDK's error handling."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout_s: float,
        max_retries: int,
        max_retry_wait_s: float,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.max_retries = max_retries
        self.max_retry_wait_s = max_retry_wait_s
        self._streams: weakref.WeakSet[_Closable] = weakref.WeakSet()
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {api_key}", "User-Agent": "soong-agent-sdk"},
            timeout=timeout_s,
            transport=transport,
        )

    def track(self, stream: _Closable) -> None:
        """Close ``stream`` before the connections (see :meth:`aclose`); held weakly."""
        self._streams.add(stream)

    async def aclose(self) -> None:
        """Close the event streams still open (each may cancel its run: it needs the
        connections), then the connections."""
        for stream in list(self._streams):
            await stream.aclose()
        await self._client.aclose()

    async def request(
        self,
        op: Operation,
        params: Mapping[str, str] | None = None,
        *,
        query: Mapping[str, Any] | None = None,
        json: Any = None,
        content: bytes | None = None,
        files: list[tuple[str, tuple[str, bytes]]] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """Send ``op`` and return its successful answer; raise the mapped error otherwise.

        ``files`` sends a ``multipart/form-data`` body of ``(field, (filename, bytes))`` parts."""
        url = op.url(**(params or {}))
        query = {k: v for k, v in (query or {}).items() if v is not None}
        attempt = 0
        while True:
            try:
                response = await self._client.request(
                    op.method,
                    url,
                    params=query,
                    json=json,
                    content=content,
                    files=files,
                    headers=headers,
                )
            except httpx.TransportError as exc:
                safe = isinstance(exc, _NOT_SENT) or repeatable(op, headers)
                if safe and attempt < self.max_retries:
                    await asyncio.sleep(backoff_s(attempt))
                    attempt += 1
                    continue
                raise TransportError(f"{op.method} {url}: {type(exc).__name__}: {exc}") from exc
            if response.status_code < 400:
                return response
            error = error_from_response(response)
            wait = self._retry_wait(repeatable(op, headers), error, attempt)
            if wait is None:
                raise error
            await asyncio.sleep(wait)
            attempt += 1

    async def send_once(
        self, op: Operation, params: Mapping[str, str] | None = None
    ) -> httpx.Response:
        """Send ``op`` once and return whatever it answered (a failed connection still raises)."""
        url = op.url(**(params or {}))
        try:
            return await self._client.request(op.method, url)
        except httpx.TransportError as exc:
            raise TransportError(f"{op.method} {url}: {type(exc).__name__}: {exc}") from exc

    def _retry_wait(self, may_repeat: bool, error: APIError, attempt: int) -> float | None:
        """How long to wait before sending a request again after ``error`` (``may_repeat``: it
        may be sent again once it may have reached the server); ``None``: don't."""
        if attempt >= self.max_retries:
            return None
        if isinstance(error, RateLimitedError) or (may_repeat and error.status in _RETRY_STATUSES):
            asked = (
                error.retry_after_s if isinstance(error, RateLimitedError | ServerError) else None
            )
            wait = backoff_s(attempt) if asked is None else asked
            return wait if wait <= self.max_retry_wait_s else None
        return None

    async def model(
        self,
        op: Operation,
        model: type[M],
        params: Mapping[str, str] | None = None,
        **kw: Any,
    ) -> M:
        """Send ``op`` and parse its JSON answer as ``model`` (the server's own class)."""
        response = await self.request(op, params, **kw)
        return parse(model, response.content)

    @asynccontextmanager
    async def stream(
        self,
        op: Operation,
        params: Mapping[str, str] | None = None,
        *,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> AsyncIterator[httpx.Response]:
        """Open ``op`` as a streaming response.

        A refusal the gateway answered before acting (429, and for idempotent operations the
        statuses :meth:`request` retries) is retried here like there; a dropped connection is not:
        the caller resumes by itself. Raises the mapped :class:`APIError` for an error status, and
        lets ``httpx`` transport errors through so that the caller can tell a drop from a refusal.
        """
        url = op.url(**(params or {}))
        attempt = 0
        while True:
            request = self._client.build_request(op.method, url, json=json, headers=headers)
            # No read timeout: a live stream may stay quiet between keep-alives for a long time.
            request.extensions["timeout"] = httpx.Timeout(
                self._client.timeout.connect, read=None
            ).as_dict()
            response = await self._client.send(request, stream=True)
            if response.status_code < 400:
                break
            try:
                await response.aread()
            finally:
                await response.aclose()
            error = error_from_response(response)
            wait = self._retry_wait(repeatable(op, headers), error, attempt)
            if wait is None:
                raise error
            await asyncio.sleep(wait)
            attempt += 1
        try:
            yield response
        finally:
            await response.aclose()


def parse(model: type[M], raw: bytes) -> M:
    """``raw`` as ``model``; a body that does not fit is a :class:`ProtocolError`."""
    try:
        return model.model_validate_json(raw)
    except pydantic.ValidationError as exc:
        raise ProtocolError(f"the gateway's answer is not a {model.__name__}: {exc}") from exc
