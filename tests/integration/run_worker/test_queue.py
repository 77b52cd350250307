"""The session FIFO's one-round-trip steps against real Valkey: lease + first work, claim prelude."""

from __future__ import annotations

from redis.asyncio import Redis

from agent_core.bus import BusNames
from agent_core.ids import new_id, new_session_id
from agent_core.runqueue import SessionQueue
from agent_core.runqueue.models import QueuedRun


def _run(session_id: str) -> QueuedRun:
    return QueuedRun(
        run_id=new_id("run"),
        session_id=session_id,
        account_id="acct",
        agent_id=new_id("agent"),
        start_node_id=new_id("node"),
    )


async def test_start_drain_takes_the_lease_and_the_first_work(
    redis: Redis, names: BusNames
) -> None:
    queue = SessionQueue(redis, names)
    lane = new_session_id()
    empty = await queue.start_drain(lane, "w1", 10_000)
    assert empty is not None and empty.item is None  # the lease, and nothing to do
    assert await queue.lease_holder(lane) == "w1"
    assert await queue.start_drain(lane, "w2", 10_000) is None  # leased: the holder drains
    assert await queue.release_if_idle(lane, "w1") == 1

    first, second = _run(lane), _run(lane)
    await queue.enqueue(first)
    await queue.enqueue(second)
    start = await queue.start_drain(lane, "w2", 10_000)
    assert start is not None and not start.orphan and start.item is not None
    assert start.item.run.run_id == first.run_id
    in_flight = await queue.in_flight(lane)
    assert in_flight is not None and in_flight.raw == start.item.raw  # moved, exactly as stored
    assert [r.run_id for r in await queue.queued(lane)] == [second.run_id]

    # w2 dies mid-run: its lease expires, the run stays in processing and is recovered first.
    await redis.delete(names.session_lease(lane))
    again = await queue.start_drain(lane, "w3", 10_000)
    assert again is not None and again.orphan and again.item is not None
    assert again.item.raw == start.item.raw
    assert [r.run_id for r in await queue.queued(lane)] == [second.run_id]  # not taken yet


async def test_claim_prelude_numbers_attempts_and_sees_cancels(
    redis: Redis, names: BusNames
) -> None:
    queue = SessionQueue(redis, names)
    run_id = new_id("run")
    assert await queue.claim_prelude(run_id) == (False, 1)
    assert await queue.claim_prelude(run_id) == (False, 2)
    await queue.request_cancel(run_id)
    assert await queue.claim_prelude(run_id) == (True, 3)
    assert await queue.next_attempt(run_id) == 4  # one counter for both


async def test_only_the_lease_holder_takes_the_next_run(redis: Redis, names: BusNames) -> None:
    """A worker that lost its lease moves no run: the new holder's lane stays one run at a time."""
    queue = SessionQueue(redis, names)
    lane = new_session_id()
    first, second = _run(lane), _run(lane)
    await queue.enqueue(first)
    await queue.enqueue(second)
    start = await queue.start_drain(lane, "w1", 10_000)
    assert start is not None and start.item is not None
    await queue.finish(start.item)

    # w1's loop stalls past its TTL and w2 takes the lane over; w1 then asks for the next run.
    await redis.delete(names.session_lease(lane))
    taken = await queue.start_drain(lane, "w2", 10_000)
    assert taken is not None and taken.item is not None
    assert taken.item.run.run_id == second.run_id
    third = _run(lane)
    await queue.enqueue(third)
    assert await queue.take_next(lane, "w1") is None
    assert [r.run_id for r in await queue.queued(lane)] == [third.run_id]  # still queued
    in_flight = await queue.in_flight(lane)
    assert in_flight is not None and in_flight.raw == taken.item.raw  # w2's run alone

    await queue.finish(taken.item)
    following = await queue.take_next(lane, "w2")  # the holder goes on as before
    assert following is not None and following.run.run_id == third.run_id
    assert await queue.take_next(lane, "w2") is None  # nothing queued


async def test_unleased_names_the_lanes_nobody_holds(redis: Redis, names: BusNames) -> None:
    queue = SessionQueue(redis, names)
    held, free, gone = new_session_id(), new_session_id(), new_session_id()
    assert await queue.acquire(held, "w1", 10_000)
    assert await queue.acquire(gone, "w2", 10_000)
    await redis.delete(names.session_lease(gone))  # its holder's lease lapsed
    assert await queue.unleased([held, free, gone]) == [free, gone]
    assert await queue.unleased([]) == []
