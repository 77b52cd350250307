"""The Redis-backed pending queue: debounce, max wait, and a failing batch moved aside."""

from __future__ import annotations

from collections.abc import Sequence

from redis.asyncio import Redis

from agent_core.bus import Bus, BusNames
from agent_core.bus.contracts.memory import Interaction, InteractionTurn
from services.memory_extraction.queue import PendingQueue


def ix(n: int) -> Interaction:
    return Interaction(
        interaction_id=f"ix_{n}", account_id="acme", session_id="s", run_id=f"r{n}",
        turns=[InteractionTurn(role="user", content="always use EUR")],
    )  # fmt: skip


async def test_an_account_is_due_only_after_the_debounce(
    bus: Bus, redis: Redis, names: BusNames
) -> None:
    queue = PendingQueue(bus, names, debounce_s=30)
    await queue.push(ix(1))
    assert await queue.due_accounts() == []
    eager = PendingQueue(bus, names, debounce_s=0)
    await eager.push(ix(2))
    assert await eager.due_accounts() == ["acme"]
    seen: list[list[str]] = []

    async def flush(_: str, items: Sequence[Interaction]) -> None:
        seen.append([i.interaction_id for i in items])

    assert await eager.flush_account("acme", flush) == 2
    assert seen == [["ix_1", "ix_2"]]
    assert await eager.due_accounts() == [] and await redis.llen(eager.pending_key("acme")) == 0


async def test_a_batch_failing_every_time_is_moved_aside_not_lost(
    bus: Bus, redis: Redis, names: BusNames
) -> None:
    queue = PendingQueue(bus, names, debounce_s=0, max_attempts=2)
    await queue.push(ix(1))

    async def broken(_: str, __: Sequence[Interaction]) -> None:
        raise RuntimeError("disk full")

    assert await queue.flush_account("acme", broken) == 0
    assert await redis.llen(queue.pending_key("acme")) == 1
    assert await queue.flush_account("acme", broken) == 1
    assert await redis.llen(queue.pending_key("acme")) == 0
    assert await redis.llen(queue.failed_key("acme")) == 1


async def test_a_batch_of_interactions_is_queued_in_order_in_one_call(
    bus: Bus, redis: Redis, names: BusNames
) -> None:
    queue = PendingQueue(bus, names, debounce_s=0)
    other = ix(9).model_copy(update={"account_id": "globex"})
    await redis.script_flush()  # the pipeline loads the script itself when the server lacks it
    await queue.push_many([ix(1), other, ix(2), ix(3)])
    assert sorted(await queue.due_accounts()) == ["acme", "globex"]
    seen: dict[str, list[str]] = {}

    async def flush(account: str, items: Sequence[Interaction]) -> None:
        seen[account] = [i.interaction_id for i in items]

    assert await queue.flush_account("acme", flush) == 3
    assert await queue.flush_account("globex", flush) == 1
    assert seen == {"acme": ["ix_1", "ix_2", "ix_3"], "globex": ["ix_9"]}


async def test_accounts_queued_before_the_buckets_move_in_order_once(
    bus: Bus, redis: Redis, names: BusNames
) -> None:
    """An upgrade loses no pending interaction: those kept under the one due set and an
    account-named list move to the account's bucket, oldest first, due as they were."""
    old_due, old_first = names.legacy_memory_queue
    await redis.rpush(
        names.legacy_memory_pending("acme"), ix(1).model_dump_json(), ix(2).model_dump_json()
    )
    await redis.zadd(old_due, {"acme": 1.0})
    await redis.hset(old_first, "acme", 1.0)
    queue = PendingQueue(bus, names, debounce_s=0)
    await queue.push(ix(3))  # arrived after the upgrade, before the adoption
    assert await queue.adopt_legacy() == 1
    assert await redis.exists(old_due, old_first, names.legacy_memory_pending("acme")) == 0
    assert await queue.due_accounts() == ["acme"]
    seen: list[str] = []

    async def flush(_: str, items: Sequence[Interaction]) -> None:
        seen.extend(i.interaction_id for i in items)

    assert await queue.flush_account("acme", flush) == 3
    assert seen == ["ix_1", "ix_2", "ix_3"]
    assert await queue.adopt_legacy() == 0  # done already
