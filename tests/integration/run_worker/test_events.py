"""Run event streams against real Valkey: many runs' events share pipelines, each run's order holds."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from redis.asyncio import Redis

from agent_core.bus import Bus, BusNames, make_redis
from agent_core.ids import new_id, new_session_id
from agent_core.runqueue import RunEventReader, RunEventWriter
from agent_core.service.valkey import find_free_port
from agent_core.types.enums import RunStatus
from agent_core.types.runtime import RunFinished, RunTextDelta


class _CountingPipelines:
    """Counts the batches written through a bus client (wraps its lean client's
    ``execute_many``: the batcher writes through it, agent_core.bus.resp)."""

    def __init__(self, bus: Bus) -> None:
        self.executed = 0
        lean = bus.calls
        real = lean.execute_many

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.executed += 1
            return await real(*args, **kwargs)

        lean.execute_many = counted  # type: ignore[method-assign]


async def test_events_of_many_runs_share_pipelines_and_keep_their_order(
    bus: Bus, redis: Redis, names: BusNames
) -> None:
    counter = _CountingPipelines(bus)
    sid = new_session_id()
    runs = [new_id("run") for _ in range(20)]
    writers = [RunEventWriter(bus, names, sid, run_id) for run_id in runs]
    for writer in writers:
        writer.start()
    for turn in range(3):  # interleaved: every run emits before any write completes
        for run_id, writer in zip(runs, writers, strict=True):
            writer.emit(RunTextDelta(run_id=run_id, session_id=sid, turn=turn, text=f"{turn}a"))
            writer.emit(RunTextDelta(run_id=run_id, session_id=sid, turn=turn, text=f"{turn}b"))
    for run_id, writer in zip(runs, writers, strict=True):
        writer.emit(RunFinished(run_id=run_id, session_id=sid, status=RunStatus.COMPLETED))
    await asyncio.gather(*(w.close() for w in writers))
    # 20 runs × 7 events: a couple of rounds, not one round trip per event or per run.
    assert 1 <= counter.executed <= 3

    late = writers[0]
    late.emit(RunTextDelta(run_id=runs[0], session_id=sid, turn=9, text="after the end"))
    await asyncio.sleep(0.05)  # dropped: a stream ends with its terminal event
    assert await redis.xlen(names.run_events(sid, runs[0])) == 4

    reader = RunEventReader(redis, names)
    for run_id in runs:
        got = [event async for event in _all(reader, sid, run_id)]
        texts = [e.text for e in got if isinstance(e, RunTextDelta)]
        assert texts == ["0a0b", "1a1b", "2a2b"]  # in order; a turn's deltas merged
        assert isinstance(got[-1], RunFinished)
        assert await redis.ttl(names.run_events(sid, run_id)) > 0  # expires after the end


async def _all(reader: RunEventReader, sid: str, run_id: str) -> Any:
    async for item in reader.follow(sid, run_id, block_ms=1000):
        assert item is not None, "the stream ended without run_finished"
        yield item[1]


async def test_a_failed_write_is_raised_by_close_and_abort_drops_the_rest(names: BusNames) -> None:
    dead = Bus(make_redis(f"redis://127.0.0.1:{find_free_port()}"))  # nothing listens there
    try:
        sid, run_id = new_session_id(), new_id("run")
        writer = RunEventWriter(dead, names, sid, run_id)
        writer.start()
        writer.emit(RunTextDelta(run_id=run_id, session_id=sid, turn=0, text="lost"))
        with pytest.raises(Exception, match="(?i)connect"):
            await writer.close()
        aborted = RunEventWriter(dead, names, sid, new_id("run"))
        aborted.start()
        aborted.emit(RunTextDelta(run_id=run_id, session_id=sid, turn=0, text="never written"))
        async with asyncio.timeout(1):
            await aborted.abort()  # returns at once, waits for nothing
    finally:
        await dead.aclose()


async def test_a_phase_replaced_before_it_was_sent_is_left_out(
    bus: Bus, redis: Redis, names: BusNames
) -> None:
    from agent_core.types.runtime import RunPhase

    sid, run_id = new_session_id(), new_id("run")
    writer = RunEventWriter(bus, names, sid, run_id)
    writer.start()
    ids = {"run_id": run_id, "session_id": sid}
    # Emitted before any write completes: model → streaming collapse to the newer phase.
    writer.emit(RunPhase(**ids, phase="model", turn=1, max_turns=5))
    writer.emit(RunPhase(**ids, phase="streaming", turn=1, max_turns=5))
    writer.emit(RunTextDelta(**ids, turn=0, text="hi"))
    writer.emit(RunPhase(**ids, phase="tools", turn=1, max_turns=5, tools=1))
    writer.emit(RunFinished(**ids, status=RunStatus.COMPLETED))
    await writer.close()
    events = [
        e for _, e in [i async for i in RunEventReader(redis, names).follow(sid, run_id) if i]
    ]
    assert [(e.type, getattr(e, "phase", None)) for e in events] == [
        ("phase", "streaming"),
        ("text_delta", None),
        ("phase", "tools"),
        ("run_finished", None),
    ]
