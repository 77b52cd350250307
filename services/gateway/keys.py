"""API keys: issued once, stored only as hashes, mapped to accounts, revocable, expiring.

Keys live in a Redis hash (AOF-backed) so that every gateway instance sees the same set; the key
itself is shown once at creation and never stored or logged. A key's last use is kept beside it
(``apikeys:used``, key id → epoch ms), written by the authentication script at most once a
minute per key, so listing keys costs the request path almost nothing.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from redis.asyncio import Redis

from agent_core.bus import BusNames
from agent_core.ids import sanitize_identifier

__all__ = ["ApiKey", "ApiKeyStore", "KeyListing", "hash_key"]

_PREFIX = "sa_live_"


def hash_key(key: str) -> str:
    """SHA-256 of a key: what is stored and looked up (keys carry 192 random bits, so no salt)."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A stored key: its hash id, account and state (``expires_at_ms``: ``None`` = never)."""

    key_id: str
    account_id: str
    created_at: str
    revoked: bool = False
    expires_at_ms: int | None = None

    def live(self, now_ms: int) -> bool:
        """Neither revoked nor expired at ``now_ms``."""
        return not self.revoked and (self.expires_at_ms is None or now_ms < self.expires_at_ms)


@dataclass(frozen=True, slots=True)
class KeyListing:
    """What ``keys list`` shows of a key: never the key itself."""

    key: ApiKey
    last_used_ms: int | None


class ApiKeyStore:
    """Creates, lists, revokes and resolves API keys."""

    def __init__(self, redis: Redis, names: BusNames) -> None:
        self._redis = redis
        self._names = names
        self._hash = names.api_keys
        self.used_hash = names.api_keys_used

    async def adopt_legacy(self) -> int:
        """Copy the keys and last uses versions before the ``{auth}`` hash tag kept (under
        ``apikeys`` and ``apikeys:used``) into today's hashes, then drop the old ones; the number
        of keys copied. Idempotent; what today's hashes hold already wins."""
        copied = 0
        pairs = tuple(zip(self._names.legacy_api_keys, (self._hash, self.used_hash), strict=True))
        for old, new in pairs:
            fields = await self._redis.hgetall(old)
            for field, value in fields.items():
                added = await self._redis.hsetnx(new, field, value)
                copied += int(bool(added)) if old == pairs[0][0] else 0
            if fields:
                await self._redis.delete(old)
        return copied

    async def create(
        self, account_id: str, *, expires_in_s: float | None = None
    ) -> tuple[str, ApiKey]:
        """A new key for ``account_id``; the plain key is returned once and never stored."""
        sanitize_identifier(account_id)
        key = _PREFIX + secrets.token_urlsafe(24)
        expires = None if expires_in_s is None else int((time.time() + expires_in_s) * 1000)
        record = ApiKey(
            hash_key(key)[:16], account_id, datetime.now(UTC).isoformat(), False, expires
        )
        await self._redis.hset(self._hash, hash_key(key), json.dumps(asdict(record)))
        return key, record

    async def resolve(self, key: str) -> ApiKey | None:
        """The live key record for a presented key, or ``None``.

        The lookup is by hash, so timing does not depend on how much of a key matches.
        """
        if not key.startswith(_PREFIX) or len(key) > 128:
            return None
        raw = await self._redis.hget(self._hash, hash_key(key))
        if raw is None:
            return None
        record = ApiKey(**json.loads(raw))
        return record if record.live(int(time.time() * 1000)) else None

    async def get(self, key_id: str) -> ApiKey | None:
        """The record with id ``key_id`` (live or not), or ``None``."""
        async for _, raw in self._redis.hscan_iter(self._hash):
            record = ApiKey(**json.loads(raw))
            if record.key_id == key_id:
                return record
        return None

    async def list(self, account_id: str | None = None) -> list[KeyListing]:
        """Every key (of one account, if given), oldest first, with its last use."""
        records = [ApiKey(**json.loads(raw)) async for _, raw in self._redis.hscan_iter(self._hash)]
        records = [r for r in records if account_id is None or r.account_id == account_id]
        records.sort(key=lambda r: r.created_at)
        used = (
            await self._redis.hmget(self.used_hash, [r.key_id for r in records]) if records else []
        )
        return [
            KeyListing(r, int(u) if u is not None else None)
            for r, u in zip(records, used, strict=True)
        ]

    async def revoke(self, key_id: str) -> bool:
        """Revoke the key whose id is ``key_id``; return whether one was found."""
        async for field, raw in self._redis.hscan_iter(self._hash):
            record = ApiKey(**json.loads(raw))
            if record.key_id == key_id and not record.revoked:
                revoked = ApiKey(
                    record.key_id, record.account_id, record.created_at, True, record.expires_at_ms
                )
                await self._redis.hset(self._hash, field, json.dumps(asdict(revoked)))
                return True
        return False
