"""Resource limits: the request body cap (counted bytes) and the per-key cap on SSE streams.

The body cap is plain ASGI middleware: it counts the bytes that actually arrive, so neither a
missing nor a lying ``Content-Length`` gets past it, and it answers 413 as soon as the count goes
over — the rest of the body is never read. Uploads (``PUT …/files/input/…``) have their own,
larger cap, enforced by the upload route while it streams to disk.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from redis.asyncio import Redis
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_core.bus import BusNames
from services.gateway.errors import ApiError

__all__ = ["BodyLimitMiddleware", "BodyTooLarge", "SseSlots"]


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` when a body goes over its cap (an HTTP 413 for the handlers).

    An ``HTTPException`` so that FastAPI's body parsing re-raises it instead of turning it into
    a 400; the error handlers then answer it with the usual error body.
    """

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body exceeds {limit} bytes")
        self.limit = limit


def _payload(limit: int) -> bytes:
    body = {
        "error": {
            "code": "payload_too_large",
            "message": f"request body exceeds {limit} bytes",
            "details": {"limit_bytes": limit},
        }
    }
    return json.dumps(body).encode()


class BodyLimitMiddleware:
    """Answers 413 once more than the path's limit of body bytes has arrived."""

    def __init__(self, app: ASGIApp, *, limit_for: Callable[[str], int]) -> None:
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["path"])
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._reject(send, limit)
            return
        seen = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge(limit)
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except BodyTooLarge:
            if not started:
                await self._reject(send, limit)

    @staticmethod
    async def _reject(send: Send, limit: int) -> None:
        body = _payload(limit)
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body, "more_body": False})


# If a gateway dies holding slots, its counts decay: the key expires unless a live stream
# refreshes it. Live streams refresh on every keep-alive, well inside this window.
_SLOT_TTL_S = 120


class SseSlots:
    """A Redis counter of open SSE streams per API key, capped."""

    def __init__(self, redis: Redis, names: BusNames, *, limit: int) -> None:
        self._redis = redis
        self._names = names
        self.limit = limit

    def _key(self, key_id: str) -> str:
        return self._names.key("sse", key_id)

    async def acquire(self, key_id: str) -> None:
        """Take a slot or raise 429 (the count is given back at once when over the cap)."""
        key = self._key(key_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.incr(key)
            pipe.expire(key, _SLOT_TTL_S)
            count, _ = await pipe.execute()
        if int(count) > self.limit:
            await self._redis.decr(key)
            raise ApiError(
                429,
                "too_many_streams",
                f"at most {self.limit} concurrent event streams per key",
                details={"limit": self.limit},
                headers={"Retry-After": "1"},
            )

    async def refresh(self, key_id: str) -> None:
        """Keep the counter alive while a stream is open."""
        await self._redis.expire(self._key(key_id), _SLOT_TTL_S)

    async def release(self, key_id: str) -> None:
        """Give a slot back (never below zero)."""
        key = self._key(key_id)
        value = await self._redis.decr(key)
        if int(value) < 0:
            await self._redis.set(key, 0, ex=_SLOT_TTL_S)
