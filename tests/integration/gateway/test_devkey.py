"""The development key of ``soong-agent up`` on real Valkey: made once per home and shown once,
reused by later starts, reissued on request (the old one revoked), replaced when it expired, and
stored only as a hash — neither the home nor the store holds the key itself."""

from __future__ import annotations

import json
import re
from pathlib import Path

from redis.asyncio import Redis

from agent_core.bus import BusNames
from services.gateway.devkey import DEV_ACCOUNT, DEV_KEY_FILE, dev_key
from services.gateway.keys import ApiKeyStore, hash_key

_SHOWN = re.compile(r"API key for account 'dev': (\S+)")


def _shown(line: str) -> str:
    match = _SHOWN.search(line)
    assert match is not None, line
    return match.group(1)


async def test_made_once_reused_then_reissued(
    redis: Redis, redis_url: str, names: BusNames, tmp_path: Path
) -> None:
    store = ApiKeyStore(redis, names)
    made = await dev_key(redis_url, names.namespace, tmp_path, reissue=False)
    first = _shown(made)
    record = await store.resolve(first)
    assert record is not None and record.account_id == DEV_ACCOUNT
    home_file = (tmp_path / DEV_KEY_FILE).read_text()
    assert json.loads(home_file) == {"key_id": record.key_id, "account_id": DEV_ACCOUNT}
    stored = await redis.hgetall(names.api_keys)
    assert list(stored) == [hash_key(first).encode()]  # the hash, never the key
    assert first not in home_file and first.encode() not in b"".join(stored.values())

    reused = await dev_key(redis_url, names.namespace, tmp_path, reissue=False)
    assert _SHOWN.search(reused) is None and record.key_id in reused  # named by id only
    assert "--new-dev-key" in reused
    assert await store.resolve(first) is not None

    reissued = _shown(await dev_key(redis_url, names.namespace, tmp_path, reissue=True))
    assert reissued != first
    assert await store.resolve(first) is None  # the old key is revoked
    renewed = await store.resolve(reissued)
    assert renewed is not None
    assert json.loads((tmp_path / DEV_KEY_FILE).read_text())["key_id"] == renewed.key_id
    listed = {item.key.key_id: item.key.revoked for item in await store.list(DEV_ACCOUNT)}
    assert listed == {record.key_id: True, renewed.key_id: False}


async def test_an_expired_development_key_is_replaced(
    redis: Redis, redis_url: str, names: BusNames, tmp_path: Path
) -> None:
    store = ApiKeyStore(redis, names)
    old, record = await store.create(DEV_ACCOUNT, expires_in_s=0.001)
    (tmp_path / DEV_KEY_FILE).write_text(json.dumps({"key_id": record.key_id}))
    fresh = _shown(await dev_key(redis_url, names.namespace, tmp_path, reissue=False))
    assert fresh != old and await store.resolve(fresh) is not None
    assert await store.resolve(old) is None
