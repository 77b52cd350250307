"""Accepted runs the bus lost are queued again from the storage-writer's record and run once.

The loss is made the way a failover makes it: the run is recorded and queued, then its queue
entry is gone (a promoted replica that never received it), with its lane's due entry.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from agent_core.bus import BusNames
from services.run_worker.reconcile import Reconciler
from tests.integration.run_worker.harness import BusClient, text_answer

_FAST = "[run_worker]\nstranded_after_s = 1\nreconcile_interval_s = 0.5\n"


async def _lose(redis: Redis, names: BusNames, sid: str) -> None:
    """What a promoted replica without the last enqueue holds for the lane: nothing."""
    await redis.delete(names.session_fifo(sid))
    await redis.zrem(names.lanes_due(sid), sid)


async def test_a_run_the_bus_lost_is_queued_again_and_runs_once(
    make_cluster: Any, client: BusClient, redis: Redis, names: BusNames, tmp_path: Path
) -> None:
    cluster = make_cluster(lambda _: text_answer("found again"), workers=0)
    await client.wait_ready(("storage_writer",))
    lost_sid, waiting_sid, later_sid = [await client.new_session() for _ in range(3)]
    lost = await client.send(lost_sid, "lost by the bus")
    waiting = await client.send(waiting_sid, "still queued")
    await _lose(redis, names, lost_sid)
    # Both runs must have been untouched for idle_s before they count as stranded.
    await asyncio.sleep(1.2)

    reconciler = Reconciler(client.storage, client.queue, names, idle_s=1, interval_s=60)
    assert await reconciler.reconcile_once() == 1  # the lost one; the waiting one is in its FIFO
    assert [r.run_id for r in await client.queue.queued(lost_sid)] == [lost.run_id]
    requeued = (await client.queue.queued(lost_sid))[0]
    assert requeued.content[0].model_dump()["text"] == "lost by the bus"
    assert [r.run_id for r in await client.queue.queued(waiting_sid)] == [waiting.run_id]
    assert await reconciler.reconcile_once() == 0  # both held by a lane now: nothing twice

    # The workers' own reconciler: a third run lost before any worker was up.
    later = await client.send(later_sid, "lost before the workers came")
    await _lose(redis, names, later_sid)
    config = tmp_path / "config.toml"
    config.write_text(config.read_text().replace("[run_worker]\n", _FAST, 1))
    cluster.start_worker(0)
    for sid, submitted in ((lost_sid, lost), (waiting_sid, waiting), (later_sid, later)):
        events = await client.events(sid, submitted.run_id)
        assert [e.type for _, e in events].count("run_finished") == 1, cluster.log_text()
        assert (await client.run(submitted.run_id))["status"] == "completed"
    assert "in no lane of the bus; queued it again" in cluster.log_text()
    assert await reconciler.reconcile_once() == 0  # every run ended: none stranded
