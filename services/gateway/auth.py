"""Bearer authentication and the per-key token bucket, in one Redis round trip.

A presented key is hashed (SHA-256) and looked up by its hash, so no comparison of secret bytes
happens in Python; the hash id itself is compared with :func:`hmac.compare_digest` when a cached
record is reused. The Lua script resolves the key and takes a token from its bucket atomically,
using the server's clock so that every gateway instance shares one bucket per key.

Keys are accepted only from the ``Authorization`` header (a query-string key is refused) and are
never logged: failures log the client address and the reason, not the header.
"""

from __future__ import annotations

import hmac
import json
import math
from dataclasses import dataclass

from fastapi import Request

from agent_core.bus import BusNames
from agent_core.bus.calls import Bus, LeanScript
from agent_core.bus.names import BusTtl
from services.gateway.errors import ApiError
from services.gateway.keys import hash_key

__all__ = ["Authenticator", "Caller"]

_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="soong-agent"'}
_MAX_KEY_CHARS = 128
# Failed attempts per client address within the window before answers turn into 429.
_QUERY_KEYS = ("api_key", "apikey", "key", "token", "access_token", "authorization")

# KEYS: apikeys hash, bucket key, last-use hash. ARGV: key hash, rate per second, burst.
# Returns {0} for an unknown, revoked or expired key, else {1, record, allowed, retry_after_ms}.
# The key's last use is written at most once a minute (it is shown by `keys list`).
_SCRIPT = """
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return {0} end
local rec = cjson.decode(raw)
if rec['revoked'] then return {0} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expires = rec['expires_at_ms']
if type(expires) == 'number' and now >= expires then return {0} end
local used = tonumber(redis.call('HGET', KEYS[3], rec['key_id']) or '0')
if now - used >= 60000 then redis.call('HSET', KEYS[3], rec['key_id'], now) end
local rate = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local state = redis.call('HMGET', KEYS[2], 'tokens', 'ts')
local tokens = tonumber(state[1])
local ts = tonumber(state[2])
if tokens == nil then tokens = burst; ts = now end
tokens = math.min(burst, tokens + (now - ts) * rate / 1000)
local allowed = 0
local retry = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  retry = math.ceil((1 - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[2], 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('PEXPIRE', KEYS[2], math.ceil(burst * 1000 / rate) + 1000)
return {1, raw, allowed, retry}
"""


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling: the account every lookup is scoped by, and the key's id."""

    account_id: str
    key_id: str


def _unauthorized(message: str) -> ApiError:
    return ApiError(401, "unauthorized", message, headers=_CHALLENGE)


def _bearer(request: Request) -> str:
    if any(k in request.query_params for k in _QUERY_KEYS):
        raise _unauthorized("API keys are accepted only in the Authorization header")
    header = request.headers.get("authorization")
    if header is None:
        raise _unauthorized("missing API key (Authorization header, Bearer scheme)")
    scheme, _, key = header.partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key:
        raise _unauthorized("expected the Bearer scheme in the Authorization header")
    if len(key) > _MAX_KEY_CHARS:
        raise _unauthorized("invalid API key")
    return key


class Authenticator:
    """Resolves the caller of a request and applies its rate limit (a FastAPI dependency)."""

    def __init__(
        self,
        bus: Bus,
        names: BusNames,
        *,
        rate_per_s: float,
        burst: int,
        max_failures: int = 100,
    ) -> None:
        self._redis = bus.redis
        self._max_failures = max_failures
        self._names = names
        self._keys_hash = names.api_keys
        self._used_hash = names.api_keys_used
        self._rate = rate_per_s
        self._burst = burst
        self._script = LeanScript(bus, _SCRIPT)

    async def __call__(self, request: Request) -> Caller:
        """The caller, or 401 (unknown/revoked/missing key) / 429 (rate or failure limit)."""
        try:
            key = _bearer(request)
        except ApiError:
            await self._count_failure(request)
            raise
        digest = hash_key(key)
        bucket = self._names.rate_limit(digest[:16])
        reply = await self._script(
            keys=[self._keys_hash, bucket, self._used_hash],
            args=[digest, self._rate, self._burst],
        )
        if not reply or int(reply[0]) == 0:
            await self._count_failure(request)
            raise _unauthorized("invalid API key")
        record = json.loads(reply[1])
        # Defence in depth: the stored id must be the prefix of the digest we looked up.
        if not hmac.compare_digest(str(record["key_id"]), digest[:16]):
            raise _unauthorized("invalid API key")
        if int(reply[2]) == 0:
            retry_s = max(1, math.ceil(int(reply[3]) / 1000))
            raise ApiError(
                429,
                "rate_limited",
                "too many requests for this key",
                details={"retry_after_s": retry_s},
                headers={"Retry-After": str(retry_s)},
            )
        caller = Caller(account_id=str(record["account_id"]), key_id=str(record["key_id"]))
        request.state.caller = caller
        return caller

    async def _count_failure(self, request: Request) -> None:
        host = request.client.host if request.client else "unknown"
        key = self._names.auth_failures(host)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.incr(key)
            pipe.expire(key, BusTtl.AUTH_FAILURE_WINDOW_S, nx=True)
            count, _ = await pipe.execute()
        if int(count) > self._max_failures:
            raise ApiError(
                429,
                "too_many_failures",
                "too many failed authentication attempts",
                headers={"Retry-After": str(BusTtl.AUTH_FAILURE_WINDOW_S)},
            )
