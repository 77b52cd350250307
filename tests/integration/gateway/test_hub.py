"""The gateway's SSE hub against real Valkey: one read for many followed runs, each run's events
exactly once and in order, and followers that carry on alone when the read fails."""

from __future__ import annotations

import asyncio
from typing import Any

from agent_core.bus import Bus, BusNames, make_redis
from agent_core.ids import new_id, new_session_id
from agent_core.runqueue import RunEventWriter
from agent_core.types.enums import RunStatus
from agent_core.types.runtime import RUNTIME_EVENT, RunFinished, RunTextDelta
from services.gateway.hub import EventHub


async def _collect(hub: EventHub, sid: str, run_id: str, after: str = "0-0") -> list[Any]:
    events: list[Any] = []
    async for batch in hub.follow_raw(sid, run_id, after=after, block_ms=10_000):
        assert batch is not None, "idle: the hub did not deliver"
        for entry_id, kind, raw in batch:
            event = RUNTIME_EVENT.validate_json(raw)
            assert kind == event.type
            events.append((entry_id, event))
    return events


async def _emit_turns(bus: Bus, names: BusNames, sid: str, runs: list[str], turns: int) -> None:
    writers = [RunEventWriter(bus, names, sid, run_id) for run_id in runs]
    for writer in writers:
        writer.start()
    for turn in range(turns):  # interleaved, a little at a time, as workers write them
        for run_id, writer in zip(runs, writers, strict=True):
            writer.emit(RunTextDelta(run_id=run_id, session_id=sid, turn=turn, text=f"t{turn}"))
        await asyncio.sleep(0.005)
    for run_id, writer in zip(runs, writers, strict=True):
        writer.emit(RunFinished(run_id=run_id, session_id=sid, status=RunStatus.COMPLETED))
    await asyncio.gather(*(w.close() for w in writers))


async def test_many_followed_runs_get_their_own_events_once_in_order(
    bus: Bus, names: BusNames
) -> None:
    # A read that would block for a minute: followers joining while it waits must wake it.
    hub = EventHub(bus, names, read_block_ms=60_000)
    sid = new_session_id()
    runs = [new_id("run") for _ in range(30)]
    try:
        followers = [asyncio.create_task(_collect(hub, sid, r)) for r in runs[:15]]
        await asyncio.sleep(0.05)  # the hub is blocked on these when the rest join
        followers += [asyncio.create_task(_collect(hub, sid, r)) for r in runs[15:]]
        await asyncio.sleep(0.05)
        await _emit_turns(bus, names, sid, runs, turns=20)
        async with asyncio.timeout(30):
            results = await asyncio.gather(*followers)
    finally:
        await hub.close()
    for run_id, events in zip(runs, results, strict=True):
        assert all(e.run_id == run_id for _, e in events)
        ids = [i for i, _ in events]
        assert ids == sorted(set(ids), key=lambda i: tuple(map(int, i.split("-"))))
        text = "".join(e.text for _, e in events if isinstance(e, RunTextDelta))
        assert text == "".join(f"t{t}" for t in range(20))  # nothing lost, nothing twice
        assert isinstance(events[-1][1], RunFinished)


async def test_a_second_follower_of_a_run_and_a_resumed_one_read_on_their_own(
    bus: Bus, names: BusNames
) -> None:
    hub = EventHub(bus, names)
    sid, run_id = new_session_id(), new_id("run")
    try:
        first = asyncio.create_task(_collect(hub, sid, run_id))
        await asyncio.sleep(0.05)
        second = asyncio.create_task(_collect(hub, sid, run_id))
        await asyncio.sleep(0.05)
        await _emit_turns(bus, names, sid, [run_id], turns=5)
        async with asyncio.timeout(30):
            one, two = await asyncio.gather(first, second)
        assert [i for i, _ in one] == [i for i, _ in two] and len(one) == 6
        async with asyncio.timeout(10):
            resumed = await _collect(hub, sid, run_id, after=one[2][0])
        assert [i for i, _ in resumed] == [i for i, _ in one[3:]]
    finally:
        await hub.close()


async def test_followers_carry_on_alone_when_the_hub_loses_its_connection(
    bus: Bus, names: BusNames, redis_url: str
) -> None:
    hub = EventHub(bus, names, read_block_ms=60_000)
    sid = new_session_id()
    runs = [new_id("run") for _ in range(5)]
    admin = make_redis(redis_url)
    try:
        followers = [asyncio.create_task(_collect(hub, sid, r)) for r in runs]
        await asyncio.sleep(0.05)
        writers = [RunEventWriter(bus, names, sid, r) for r in runs]
        for writer, run_id in zip(writers, runs, strict=True):
            writer.start()
            writer.emit(RunTextDelta(run_id=run_id, session_id=sid, turn=0, text="before "))
        await asyncio.sleep(0.1)
        # Kill the hub's blocked connection (only it is blocked in XREAD).
        clients = await admin.client_list()
        blocked = [c for c in clients if c.get("cmd") == "xread"]
        assert blocked, clients
        for client in blocked:
            await admin.client_kill_filter(_id=client["id"])
        await asyncio.sleep(0.1)
        for writer, run_id in zip(writers, runs, strict=True):
            writer.emit(RunTextDelta(run_id=run_id, session_id=sid, turn=1, text="after"))
            writer.emit(RunFinished(run_id=run_id, session_id=sid, status=RunStatus.COMPLETED))
        await asyncio.gather(*(w.close() for w in writers))
        async with asyncio.timeout(30):
            results = await asyncio.gather(*followers)
    finally:
        await hub.close()
        await admin.aclose()
    for events in results:
        text = "".join(e.text for _, e in events if isinstance(e, RunTextDelta))
        assert text == "before after"  # each delta once, across the switch
        assert isinstance(events[-1][1], RunFinished)


async def test_a_refused_read_never_turns_the_hub_off(bus: Bus, names: BusNames) -> None:
    """A position Redis refuses (out of its id range) fails its own follower, nobody else's."""
    from redis.exceptions import ResponseError

    hub = EventHub(bus, names)
    sid, bad_run, good_run = new_session_id(), new_id("run"), new_id("run")
    try:
        bad = asyncio.create_task(_collect(hub, sid, bad_run, after="99999999999999999999-0"))
        done, _ = await asyncio.wait([bad], timeout=10)
        assert done and isinstance(bad.exception(), ResponseError)
        good = asyncio.create_task(_collect(hub, sid, good_run))
        await asyncio.sleep(0.05)
        assert hub._task is not None and not hub._task.done()  # still on
        assert good_run.encode() in b" ".join(hub._followers)  # served by the hub itself
        await _emit_turns(bus, names, sid, [good_run], turns=3)
        async with asyncio.timeout(10):
            events = await good
        assert isinstance(events[-1][1], RunFinished) and len(events) == 4
    finally:
        await hub.close()


async def test_an_idle_follower_hears_so_and_then_gets_its_events(
    bus: Bus, names: BusNames
) -> None:
    """Idle periods come as ``None`` (the stream sends a keep-alive), however long the wait,
    and never stand in for an event."""
    hub = EventHub(bus, names, read_block_ms=60_000)
    sid, run_id = new_session_id(), new_id("run")
    items: list[Any] = []
    idle_twice = asyncio.Event()

    async def follow() -> None:
        async for batch in hub.follow_raw(sid, run_id, block_ms=50):
            items.append(batch)
            if items[-2:] == [None, None]:
                idle_twice.set()

    try:
        follower = asyncio.create_task(follow())
        async with asyncio.timeout(10):
            await idle_twice.wait()
        await _emit_turns(bus, names, sid, [run_id], turns=2)
        async with asyncio.timeout(10):
            await follower
    finally:
        await hub.close()
    events = [RUNTIME_EVENT.validate_json(raw) for batch in items if batch for _, _, raw in batch]
    assert [e.type for e in events] == ["text_delta", "text_delta", "run_finished"]
    assert items[:2] == [None, None] and items[-1][-1][1] == "run_finished"
