"""A lane's heartbeat stops with its drain even when the cancel meant to stop it is lost.

On Python 3.11 ``asyncio.wait_for`` returns its result and drops a cancel that lands as the
awaited work completes; redis-py writes every command through it when a socket timeout is set.
Under load that race hit the lease heartbeat: it outlived its drain and renewed the lease forever,
so the session's next runs stayed queued. Here the renewal swallows the cancel on purpose.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from agent_core.bus import BusNames
from agent_core.runtime import ScriptedModel, ScriptedReply
from tests.integration.run_worker.harness import BusClient
from tests.integration.run_worker.inprocess import start_worker


@pytest.fixture
async def writer_ready(make_cluster: Any, client: BusClient) -> None:
    make_cluster(lambda _: None, workers=0)  # the storage-writer alone
    await client.wait_ready(("storage_writer",), timeout_s=120)


@pytest.mark.usefixtures("writer_ready")
async def test_a_heartbeat_whose_cancel_is_swallowed_still_ends_with_its_drain(
    client: BusClient, redis_url: str, names: BusNames, tmp_path: Path
) -> None:
    # Four text pieces 0.2 s apart: the run outlasts the first renewal (a quarter of 1 s).
    model = ScriptedModel(
        lambda _: ScriptedReply(text="slow answer " * 4, chunk_chars=12, delay_s=0.2)
    )
    worker = await start_worker(redis_url, names, tmp_path, model)
    swallowed: list[str] = []
    swallowing = True

    async def renew(lane: str, token: str, ttl_ms: int) -> bool:
        try:
            await asyncio.sleep(3600)  # a renewal in flight when the drain ends
        except asyncio.CancelledError:
            if not swallowing:
                raise
            swallowed.append(lane)
            return True  # what wait_for does when the write completes as the cancel lands
        return True

    worker.worker.queue.renew = renew  # type: ignore[method-assign]
    try:
        sid = await client.new_session()
        first = await client.send(sid, "first")
        [run] = (await client.wait_terminal([first.run_id], timeout_s=60)).values()
        assert run["status"] == "completed"
        deadline = time.monotonic() + 30
        while worker.worker.lanes and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert swallowed == [sid], "the renewal was not in flight when the drain ended"
        assert not worker.worker.lanes, "the drain never finished: its heartbeat went on"
        assert await client.queue.lease_holder(sid) is None
        # The session's next run starts: nothing holds its lane.
        second = await client.send(sid, "second")
        [after] = (await client.wait_terminal([second.run_id], timeout_s=60)).values()
        assert after["status"] == "completed"
    finally:
        swallowing = False  # so that closing the worker can stop a heartbeat that went on
        await worker.close()
