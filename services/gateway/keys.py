"""API keys: issued once, stored only as hashes, mapped to accounts, revocable.

Keys live in a Redis hash (AOF-backed) so that every gateway instance sees the same set; the key
itself is shown once at creation and never stored or logged.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from redis.asyncio import Redis

from agent_core.bus import BusNames
from agent_core.ids import sanitize_identifier

__all__ = ["ApiKey", "ApiKeyStore", "hash_key"]

_PREFIX = "sa_live_"


def hash_key(key: str) -> str:
    """SHA-256 of a key: what is stored and looked up (keys carry 192 random bits, so no salt)."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A stored key: its hash id, account and state."""

    key_id: str
    account_id: str
    created_at: str
    revoked: bool = False


class ApiKeyStore:
    """Creates, revokes and resolves API keys."""

    def __init__(self, redis: Redis, names: BusNames) -> None:
        self._redis = redis
        self._hash = names.key("apikeys")

    async def create(self, account_id: str) -> tuple[str, ApiKey]:
        """A new key for ``account_id``; the plain key is returned once and never stored."""
        sanitize_identifier(account_id)
        key = _PREFIX + secrets.token_urlsafe(24)
        record = ApiKey(hash_key(key)[:16], account_id, datetime.now(UTC).isoformat())
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
        return None if record.revoked else record

    async def revoke(self, key_id: str) -> bool:
        """Revoke the key whose id is ``key_id``; return whether one was found."""
        async for field, raw in self._redis.hscan_iter(self._hash):
            record = ApiKey(**json.loads(raw))
            if record.key_id == key_id and not record.revoked:
                revoked = ApiKey(record.key_id, record.account_id, record.created_at, True)
                await self._redis.hset(self._hash, field, json.dumps(asdict(revoked)))
                return True
        return False
