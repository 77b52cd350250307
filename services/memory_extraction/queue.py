"""Per-account batching with a debounce, kept in Redis so that a restart loses nothing.

An interaction is pushed onto its account's pending list and the account is (re)scheduled in the
sorted set of its bucket (``names.memory_bucket``: an account's keys and its bucket's due set and
first-seen hash share one Cluster slot, so each script touches one slot): due when the account has been quiet for ``debounce_s``, and at the latest
``max_wait_s`` after its oldest pending interaction (a chatty account still gets consolidated).
The flush loop takes due accounts, holds a per-account lock (so several instances can run),
consolidates up to ``max_batch`` interactions and trims exactly those from the list. A crash
before the trim consolidates the batch again, which the update guards make harmless.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from pydantic import ValidationError
from redis.exceptions import NoScriptError

from agent_core.bus import BusNames
from agent_core.bus.calls import Bus
from agent_core.bus.contracts.memory import Interaction as BusInteraction
from agent_core.bus.names import MEMORY_BUCKETS, memory_bucket
from agent_core.bus.resp_wire import Arg

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
        bus: Bus,
        names: BusNames,
        *,
        debounce_s: float,
        max_wait_s: float | None = None,
        max_batch: int = 32,
        lock_ttl_s: float = 300.0,
        poll_s: float | None = None,
        max_attempts: int = 3,
    ) -> None:
        self.bus = bus
        self.redis = redis = bus.redis
        self.names = names
        self.debounce_s = debounce_s
        self.max_wait_s = max_wait_s if max_wait_s is not None else max(10 * debounce_s, 1.0)
        self.max_batch = max_batch
        self.lock_ttl_ms = int(lock_ttl_s * 1000)
        # How often the flush loop looks for due batches (sixteen reads each time): a batch
        # waits its debounce anyway, so a look every half debounce, within [0.2 s, 1 s], adds
        # at most half of it; idle, the loop is what memory extraction spends its time on.
        self.poll_s = poll_s if poll_s is not None else min(1.0, max(0.2, debounce_s / 2))
        self.max_attempts = max_attempts
        self._attempts: dict[str, int] = {}
        # EVALSHA with a fallback to EVAL: the script text is not sent on every call.
        self._push_sha = hashlib.sha1(_PUSH.encode()).hexdigest()
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

    def _script_keys(self, account_id: str) -> list[str]:
        """The push and trim scripts' keys: pending list, due set, first-seen hash."""
        bucket = memory_bucket(account_id)
        n = self.names
        return [n.memory_pending(account_id), n.memory_due(bucket), n.memory_first(bucket)]

    # -- producer side -----------------------------------------------------------------------

    async def push(self, interaction: BusInteraction) -> None:
        """Queue ``interaction`` and (re)schedule its account."""
        await self.push_many([interaction])

    async def push_many(self, interactions: Sequence[BusInteraction]) -> None:
        """Queue ``interactions`` in order and (re)schedule their accounts: one round trip (two
        when a node forgot the script: those calls run again with its text, in order)."""
        now = time.time()
        calls: list[list[Arg]] = []
        for interaction in interactions:
            keys = self._script_keys(interaction.account_id)
            args: list[Arg] = [
                interaction.model_dump_json(),
                interaction.account_id,
                now,
                self.debounce_s,
                self.max_wait_s,
            ]
            calls.append([*keys, *args])
        # Each call keeps to its account's slot; a Cluster runs them node by node.
        lean = self.bus.calls
        replies = await lean.execute_many(
            [["EVALSHA", self._push_sha, 3, *call] for call in calls], raise_on_error=False
        )
        again = [call for call, reply in zip(calls, replies, strict=True) if _failed(reply)]
        if again:
            await lean.execute_many([["EVAL", _PUSH, 3, *call] for call in again])

    # -- consumer side -----------------------------------------------------------------------

    async def due_accounts(self, limit: int = 16) -> list[str]:
        """Accounts whose batch is due now (up to ``limit``; every bucket read in one pipeline)."""
        now = time.time()
        async with self.redis.pipeline(transaction=False) as pipe:
            for bucket in range(MEMORY_BUCKETS):
                pipe.zrangebyscore(self.names.memory_due(bucket), "-inf", now, start=0, num=limit)
            replies: list[list[Any]] = await pipe.execute()
        raw = [a for accounts in replies for a in accounts][:limit]
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
                    due = self.names.memory_due(memory_bucket(account_id))
                    await self.redis.zadd(due, {account_id: time.time() + self.max_wait_s})
                    return 0
            self._attempts.pop(account_id, None)
            keys = self._script_keys(account_id)
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

    async def adopt_legacy(self) -> int:
        """Move the accounts versions before the buckets queued (one due set and first-seen hash,
        lists named by account alone) under today's names, in order; the number moved.
        Idempotent; :meth:`run` calls it once at start. Those versions ran on one node only."""
        old_due, old_first = self.names.legacy_memory_queue
        moved = 0
        entries = cast(
            "list[tuple[Any, float]]", await self.redis.zrange(old_due, 0, -1, withscores=True)
        )
        for raw, score in entries:
            account_id = raw.decode() if isinstance(raw, bytes) else str(raw)
            pending, due, first = self._script_keys(account_id)
            source = self.names.legacy_memory_pending(account_id)
            # Oldest first stays first: the old list's tail goes onto the new list's head.
            while await self.redis.lmove(source, pending, "RIGHT", "LEFT") is not None:
                pass
            seen = await self.redis.hget(old_first, account_id)
            if seen is not None:
                await self.redis.hsetnx(first, account_id, seen)
            await self.redis.zadd(due, {account_id: score}, nx=True)
            moved += 1
        await self.redis.delete(old_due)
        await self.redis.delete(old_first)  # apart: the two may sit on two nodes of a Cluster
        return moved

    async def run(self, stop: asyncio.Event, flush: Flush, *, concurrency: int = 4) -> None:
        """Flush due accounts until ``stop`` is set (a background task of the service)."""
        gate = asyncio.Semaphore(concurrency)
        with contextlib.suppress(Exception):  # the bus down at start: the next start adopts
            if moved := await self.adopt_legacy():
                log.info("moved %d accounts' pending memory to their bucketed keys", moved)

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
                async with asyncio.timeout(self.poll_s):
                    await stop.wait()


def _failed(reply: object) -> bool:
    """Whether a reply of a batch is an error; any error other than NOSCRIPT raises."""
    if isinstance(reply, NoScriptError):
        return True
    if isinstance(reply, Exception):
        raise reply
    return False


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
