"""The session FIFO's one-round-trip steps against real Valkey: lease + first work, claim prelude."""

from __future__ import annotations

from redis.asyncio import Redis

from agent_core.bus import Bus, BusNames
from agent_core.ids import new_id, new_session_id
from agent_core.runqueue import SessionQueue
from agent_core.types.queued import QueuedRun


def _run(session_id: str) -> QueuedRun:
    return QueuedRun(
        run_id=new_id("run"),
        session_id=session_id,
        account_id="acct",
        agent_id=new_id("agent"),
        start_node_id=new_id("node"),
    )


async def test_start_drain_takes_the_lease_and_the_first_work(
    bus: Bus, redis: Redis, names: BusNames
) -> None:
    queue = SessionQueue(bus, names)
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


async def test_claim_prelude_numbers_attempts_and_sees_cancels(bus: Bus, names: BusNames) -> None:
    queue = SessionQueue(bus, names)
    run_id = new_id("run")
    assert await queue.claim_prelude(run_id) == (False, 1)
    assert await queue.claim_prelude(run_id) == (False, 2)
    await queue.request_cancel(run_id)
    assert await queue.claim_prelude(run_id) == (True, 3)
    assert await queue.next_attempt(run_id) == 4  # one counter for both


async def test_only_the_lease_holder_takes_the_next_run(
    bus: Bus, redis: Redis, names: BusNames
) -> None:
    """A worker that lost its lease moves no run: the new holder's lane stays one run at a time."""
    queue = SessionQueue(bus, names)
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


async def test_a_lane_is_due_when_queued_and_each_due_lane_goes_to_one_sweeper(
    bus: Bus, names: BusNames
) -> None:
    queue = SessionQueue(bus, names)
    lanes = [new_session_id() for _ in range(3)]
    for lane in lanes:
        await queue.enqueue(_run(lane))
    assert await queue.pending_lanes() == sorted(lanes)
    first = await queue.due_lanes(2, horizon_ms=60_000)
    second = await queue.due_lanes(5, horizon_ms=60_000)
    assert len(first) == 2 and len(second) == 1  # each lane handed out once per due time
    assert sorted(first + second) == sorted(lanes)
    assert await queue.due_lanes(5, horizon_ms=60_000) == []  # none due before the horizon
    assert await queue.due_lanes(0, horizon_ms=60_000) == []
    assert await queue.pending_lanes() == sorted(lanes)  # still listed: they still have work


async def test_taking_a_lane_moves_its_due_time_to_the_end_of_its_lease(
    bus: Bus, redis: Redis, names: BusNames
) -> None:
    queue = SessionQueue(bus, names)
    lane = new_session_id()
    await queue.enqueue(_run(lane))
    start = await queue.start_drain(lane, "w1", 60_000)
    assert start is not None and start.item is not None
    assert await queue.due_lanes(5, horizon_ms=1) == []  # its holder's lease runs a minute
    # The holder dies: its lease lapses, and a sweep finds the lane due at that time.
    await redis.delete(names.session_lease(lane))
    await redis.zadd(names.lanes_due(lane), {lane: 0}, xx=True)  # (the minute has passed)
    assert await queue.due_lanes(5, horizon_ms=1) == [lane]


async def test_a_renewed_lease_keeps_its_lane_from_every_sweep(
    bus: Bus, redis: Redis, names: BusNames
) -> None:
    """The due set holds lease deadlines: a lane whose holder renews never comes due; one whose
    holder stopped renewing comes due once its lease has run out."""
    queue = SessionQueue(bus, names)
    lane = new_session_id()
    await queue.enqueue(_run(lane))
    start = await queue.start_drain(lane, "w1", 60_000)
    assert start is not None and start.item is not None
    await redis.zadd(names.lanes_due(lane), {lane: 0}, xx=True)  # its first deadline has passed
    assert await queue.renew(lane, "w1", 60_000)
    assert await queue.due_lanes(5, horizon_ms=1) == []  # renewed: a new deadline, not due
    assert not await queue.renew(lane, "w2", 60_000)  # not the holder: nothing moves
    await redis.delete(names.session_lease(lane))  # w1 dies; its deadline passes
    await redis.zadd(names.lanes_due(lane), {lane: 0}, xx=True)
    assert await queue.due_lanes(5, horizon_ms=1) == [lane]


async def test_a_lane_held_long_is_deferred_to_its_lease_end_and_released_lanes_leave(
    bus: Bus, redis: Redis, names: BusNames
) -> None:
    queue = SessionQueue(bus, names)
    held, lapsed, free = new_session_id(), new_session_id(), new_session_id()
    for lane in (held, lapsed, free):
        await queue.enqueue(_run(lane))
    assert await queue.acquire(held, "parked", 600_000)  # held ten minutes by another worker
    assert sorted(await queue.due_lanes(5, horizon_ms=0)) == sorted([held, lapsed, free])
    await queue.defer([held, lapsed], at_least_ms=1_000)
    score = await redis.zscore(names.lanes_due(held), held)
    assert score is not None and score > (await redis.time())[0] * 1000 + 500_000
    assert sorted(await queue.due_lanes(5, horizon_ms=0)) == sorted([lapsed, free])
    await queue.defer([], at_least_ms=1_000)  # nothing to do: no round trip needed

    # The holder of a lane releases it once idle: the lane leaves the due set.
    start = await queue.start_drain(free, "w1", 10_000)
    assert start is not None and start.item is not None
    await queue.finish(start.item)
    assert await queue.release_if_idle(free, "w1") == 1
    assert free not in await queue.pending_lanes()


async def test_lanes_listed_by_an_older_version_are_adopted_once(
    bus: Bus, redis: Redis, names: BusNames
) -> None:
    queue = SessionQueue(bus, names)
    old = [new_session_id(), new_session_id()]
    await redis.sadd(names.sessions_pending, *old)
    assert await queue.adopt_pending_set() == 2
    assert await redis.exists(names.sessions_pending) == 0
    assert sorted(await queue.due_lanes(5, horizon_ms=1_000)) == sorted(old)
    assert await queue.adopt_pending_set() == 0  # done already


async def test_lanes_of_the_version_before_buckets_move_with_their_runs(
    bus: Bus, redis: Redis, names: BusNames
) -> None:
    """An upgrade strands no run: the lanes kept under one due set and lane-tagged keys move to
    their buckets' keys, queued runs in order, in-flight ones with their attempt counters."""
    queue = SessionQueue(bus, names)
    lane = new_session_id()
    first, second, running = _run(lane), _run(lane), _run(lane)
    fifo, processing, lease = names.legacy_lane_keys(lane)
    await redis.rpush(fifo, first.model_dump_json(), second.model_dump_json())
    await redis.rpush(processing, running.model_dump_json())
    await redis.set(lease, "old-worker")
    await redis.set(names.legacy_run_keys(running.run_id)[0], 4)
    await redis.zadd(names.sessions_due, {lane: 0})
    assert await queue.adopt_legacy_lanes() == 1
    assert [r.run_id for r in await queue.queued(lane)] == [first.run_id, second.run_id]
    start = await queue.start_drain(lane, "w1", 10_000)
    assert start is not None and start.orphan and start.item is not None
    assert start.item.run.run_id == running.run_id
    assert await queue.claim_prelude(running.run_id) == (False, 5)  # fenced past the old one
    assert await redis.exists(fifo, processing, lease, names.sessions_due) == 0
    assert await queue.adopt_legacy_lanes() == 0  # done already
