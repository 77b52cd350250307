"""Resource limits: the request body cap (counted bytes) and the per-key cap on SSE streams.

The body cap is plain ASGI middleware: it counts the bytes that actually arrive, so neither a
missing nor a lying ``Content-Length`` gets past it, and it answers 413 as soon as the count goes
over — the rest of the body is never read. Uploads (``PUT …/files/input/…``) have their own,
larger cap, enforced by the upload route while it streams to disk (``POST …/files`` forms too).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_core.bus import BusNames
from agent_core.bus.calls import Bus, LeanScript
from agent_core.bus.names import BusTtl
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


# Slots belong to the gateway that holds them: each key's slots are counted per gateway (a hash
# field per gateway), and a gateway's counts count only while it lives. Its liveness sits in the
# same hash (a field ``<gateway>:alive`` holding until when, by the server's clock) so that the
# script touches its one key only (a Cluster refuses a script reading a key it was not given):
# acquiring sets it, the heartbeat renews it every HEARTBEAT_S in each hash the gateway holds
# slots in, it lapses BusTtl.SSE_GATEWAY_ALIVE_S after the gateway dies, and the next acquire
# drops a dead gateway's counts. A dead gateway's slots free that long after its last stamp,
# and an acquire stamps: a gateway killed just after opening a stream keeps its slots the whole
# period, so the period is short (2 s) and the beat frequent enough to leave a live gateway's
# loop 1.5 s of slack.
HEARTBEAT_S = 0.5
_ALIVE = ":alive"

# KEYS: the slot hash. ARGV: gateway, limit, alive ms, hash TTL s.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local fields = redis.call('HGETALL', KEYS[1])
local total = 0
for i = 1, #fields, 2 do
  local name = fields[i]
  if string.sub(name, -6) ~= ':alive' then
    local alive = tonumber(redis.call('HGET', KEYS[1], name .. ':alive') or '0')
    if name == ARGV[1] or alive >= now then
      total = total + tonumber(fields[i + 1])
    else
      redis.call('HDEL', KEYS[1], name, name .. ':alive')
    end
  end
end
if total >= tonumber(ARGV[2]) then return 0 end
redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
redis.call('HSET', KEYS[1], ARGV[1] .. ':alive', now + tonumber(ARGV[3]))
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
"""

# KEYS: the slot hash. ARGV: gateway.
_RELEASE = """
if redis.call('HINCRBY', KEYS[1], ARGV[1], -1) <= 0 then
  redis.call('HDEL', KEYS[1], ARGV[1], ARGV[1] .. ':alive')
end
return 0
"""

# KEYS: the slot hash. ARGV: gateway, alive ms. Renews only a gateway that holds slots there.
_BEAT = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], ARGV[1] .. ':alive', now + tonumber(ARGV[2]))
return 1
"""


class SseSlots:
    """Open SSE streams per API key, capped, counted per live gateway."""

    def __init__(self, bus: Bus, names: BusNames, *, limit: int, gateway_id: str) -> None:
        self._redis = bus.redis
        self._names = names
        self.limit = limit
        self.gateway_id = gateway_id
        self._alive_ms = BusTtl.SSE_GATEWAY_ALIVE_S * 1000
        self._held: dict[str, int] = {}  # key id -> slots this gateway holds (for the beat)
        self._acquire = LeanScript(bus, _ACQUIRE)
        self._release = LeanScript(bus, _RELEASE)
        self._beat = LeanScript(bus, _BEAT)

    def _key(self, key_id: str) -> str:
        return self._names.sse_slots(key_id)

    async def heartbeat(self, stop: asyncio.Event) -> None:
        """Keep this gateway's slots alive until ``stop``; they lapse when this stops."""
        while not stop.is_set():
            with contextlib.suppress(Exception):  # the bus may be down: try again next beat
                await asyncio.gather(
                    *(
                        self._beat(keys=[self._key(k)], args=[self.gateway_id, self._alive_ms])
                        for k in list(self._held)
                    )
                )
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(HEARTBEAT_S):
                    await stop.wait()
        with contextlib.suppress(Exception):
            for key_id in list(self._held):
                await self._redis.hdel(self._key(key_id), self.gateway_id, self.gateway_id + _ALIVE)
        self._held.clear()

    async def acquire(self, key_id: str) -> None:
        """Take a slot or raise 429."""
        args: list[str | int | float] = [
            self.gateway_id,
            self.limit,
            self._alive_ms,
            BusTtl.SSE_SLOTS_S,
        ]
        if not await self._acquire(keys=[self._key(key_id)], args=args):
            raise ApiError(
                429,
                "too_many_streams",
                f"at most {self.limit} concurrent event streams per key",
                details={"limit": self.limit},
                headers={"Retry-After": "1"},
            )
        self._held[key_id] = self._held.get(key_id, 0) + 1

    async def release(self, key_id: str) -> None:
        """Give a slot back."""
        left = self._held.get(key_id, 0) - 1
        if left > 0:
            self._held[key_id] = left
        else:
            self._held.pop(key_id, None)
        await self._release(keys=[self._key(key_id)], args=[self.gateway_id])
