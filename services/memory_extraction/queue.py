"""Per-account batching with a debounce, kept in Redis so that a restart loses nothing.

An interaction is pushed onto its account's pending list and the account is (re)scheduled in one
sorted set: due when the account has been quiet for ``debounce_s``, and at the latest
``max_wait_s`` after its oldest pending interaction (a chatty account still gets consolidated).
The flush loop takes due accounts, holds a per-account lock (so several instances can run),
consolidates up to ``max_batch`` interactions and trims exactly those from the list. A crash
before the trim consolidates the batch again, which the update guards make harmless.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from pydantic import ValidationError
from redis.asyncio import Redis

from agent_core.bus import BusNames
from agent_core.bus.contracts.memory import Interaction as BusInteraction

__all__ = ["Flush", "PendingQueue"]

log = logging.getLogger(__name__)

Flush = Callable[[str, Sequence[BusInteraction]], Awaitable[object]]

# KEYS: pending list, due zset, first-seen hash. ARGV: item, account, now, debounce, max_wait.
_PUSH = """
redis.call('RPUSH', KEYS[1], ARGV[1])
local first = redis.call('HGET', KEYS[3], ARGV[2])
if not first then
  redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
  first = ARGV[3]
end
local due = math.min(tonumber(ARGV[3]) + tonumber(ARGV[4]), tonumber(first) + tonumber(ARGV[5]))
redis.call('ZADD', KEYS[2], due, ARGV[2])
return due
"""
# KEYS: pending list, due zset, first-seen hash. ARGV: n taken, account, now, debounce.
_TRIM = """
redis.call('LTRIM', KEYS[1], tonumber(ARGV[1]), -1)
if redis.call('LLEN', KEYS[1]) == 0 then
  redis.call('ZREM', KEYS[2], ARGV[2])
  redis.call('HDEL', KEYS[3], ARGV[2])
else
  redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
  redis.call('ZADD', KEYS[2], tonumber(ARGV[3]) + tonumber(ARGV[4]), ARGV[2])
end
return redis.call('LLEN', KEYS[1])
"""
# Delete the lock only if we still hold it (it may have expired and been taken over).
_UNLOCK = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end"


class PendingQueue:
    """The pending interactions of every account and the loop that flushes them."""

    def __init__(
        self,
        redis: Redis,
        names: BusNames,
        *,
        debounce_s: float,
        max_wait_s: float | None = None,
        max_batch: int = 32,
        lock_ttl_s: float = 300.0,
        poll_s: float = 0.2,
        max_attempts: int = 3,
    ) -> None:
        self.redis = redis
        self.names = names
        self.debounce_s = debounce_s
        self.max_wait_s = max_wait_s if max_wait_s is not None else max(10 * debounce_s, 1.0)
        self.max_batch = max_batch
        self.lock_ttl_ms = int(lock_ttl_s * 1000)
        self.poll_s = poll_s
        self.max_attempts = max_attempts
        self._due = names.memory_due
        self._first = names.memory_first
        self._attempts: dict[str, int] = {}
        # EVALSHA with a fallback to EVAL: the script text is not sent on every call.
        self._push: Any = redis.register_script(_PUSH)
        self._trim: Any = redis.register_script(_TRIM)
        self._unlock: Any = redis.register_script(_UNLOCK)

    # -- keys (declared here, once) ----------------------------------------------------------

    def pending_key(self, account_id: str) -> str:
        """The list of an account's interactions waiting for consolidation."""
        return self.names.memory_pending(account_id)

    def failed_key(self, account_id: str) -> str:
        """Where a batch goes after ``max_attempts`` failures (kept for inspection, not lost)."""
        return self.names.memory_failed(account_id)

    def _lock_key(self, account_id: str) -> str:
        return self.names.memory_lock(account_id)

    # -- producer side -----------------------------------------------------------------------

    async def push(self, interaction: BusInteraction) -> None:
        """Queue ``interaction`` and (re)schedule its account."""
        await self.push_many([interaction])

    async def push_many(self, interactions: Sequence[BusInteraction]) -> None:
        """Queue ``interactions`` in order and (re)schedule their accounts: one round trip."""
        now = time.time()
        async with self.redis.pipeline(transaction=False) as pipe:
            for interaction in interactions:
                keys = [self.pending_key(interaction.account_id), self._due, self._first]
                args: list[str | float] = [
                    interaction.model_dump_json(),
                    interaction.account_id,
                    now,
                    self.debounce_s,
                    self.max_wait_s,
                ]
                await self._push(keys=keys, args=args, client=pipe)
            await pipe.execute()

    # -- consumer side -----------------------------------------------------------------------

    async def due_accounts(self, limit: int = 16) -> list[str]:
        """Accounts whose batch is due now."""
        raw = await self.redis.zrangebyscore(self._due, "-inf", time.time(), start=0, num=limit)
        return [a.decode() if isinstance(a, bytes) else str(a) for a in raw]

    async def flush_account(self, account_id: str, flush: Flush) -> int:
        """Consolidate one due batch of ``account_id``; return how many interactions it took."""
        token = secrets.token_hex(8)
        lock = self._lock_key(account_id)
        if not await self.redis.set(lock, token, nx=True, px=self.lock_ttl_ms):
            return 0  # another instance is on it
        try:
            raw = await self.redis.lrange(self.pending_key(account_id), 0, self.max_batch - 1)
            items = _decode(raw)
            try:
                await flush(account_id, items)
            except Exception:
                log.exception("memory consolidation of %s failed", account_id)
                if not await self._give_up(account_id, raw):
                    await self.redis.zadd(self._due, {account_id: time.time() + self.max_wait_s})
                    return 0
            self._attempts.pop(account_id, None)
            keys = [self.pending_key(account_id), self._due, self._first]
            args: list[str | float] = [len(raw), account_id, time.time(), self.debounce_s]
            await self._trim(keys=keys, args=args)
            return len(raw)
        finally:
            await self._unlock(keys=[lock], args=[token])

    async def _give_up(self, account_id: str, raw: list[Any]) -> bool:
        self._attempts[account_id] = self._attempts.get(account_id, 0) + 1
        if self._attempts[account_id] < self.max_attempts:
            return False
        log.error("memory batch of %s failed %d times; moved aside", account_id, self.max_attempts)
        await self.redis.rpush(self.failed_key(account_id), *raw)
        return True

    async def run(self, stop: asyncio.Event, flush: Flush, *, concurrency: int = 4) -> None:
        """Flush due accounts until ``stop`` is set (a background task of the service)."""
        gate = asyncio.Semaphore(concurrency)

        async def one(account_id: str) -> None:
            async with gate:
                await self.flush_account(account_id, flush)

        while not stop.is_set():
            try:
                accounts = await self.due_accounts()
                if accounts:
                    async with asyncio.TaskGroup() as tg:
                        for account_id in accounts:
                            tg.create_task(one(account_id))
            except Exception:
                log.exception("memory flush loop failed; retrying")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.poll_s)


def _decode(raw: list[Any]) -> list[BusInteraction]:
    items: list[BusInteraction] = []
    seen: set[str] = set()
    for value in raw:
        try:
            item = BusInteraction.model_validate_json(value)
        except ValidationError:
            log.warning("unreadable pending interaction skipped")
            continue
        if item.interaction_id not in seen:  # a re-delivered entry is pushed twice
            seen.add(item.interaction_id)
            items.append(item)
    return items
