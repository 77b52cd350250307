"""A lane's lease is renewed from a thread of its own (``services/run_worker/leases.py``).

CPU work on the worker's event loop — here a model call that blocks the loop, as a long
session's context build does on a loaded host — used to let the lease lapse (the TTL is 1 s in
these workers), and another worker took the lane from a worker that was alive and running the
run; after three such takeovers the run ended ``attempts_exhausted``. A loop stuck past
``loop_stall_limit_s`` still gives its lanes up, and a drain that ends stops renewing.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import redis as sync_redis

from agent_core.bus import BusNames
from agent_core.runtime import ScriptedModel, ScriptedReply
from tests.integration.run_worker.harness import BusClient
from tests.integration.run_worker.inprocess import InProcessWorker, start_worker
from tests.waiting import HangGuard


@pytest.fixture
async def writer_ready(make_cluster: Any, client: BusClient) -> None:
    make_cluster(lambda _: None, workers=0)  # the storage-writer alone
    await client.wait_ready(("storage_writer",), timeout_s=120)


class _BlockingModel:
    """Answers once the worker's loop has been blocked for ``block_s``, noting who held the
    session's lease at the end of the block (read with a client of the test's own)."""

    def __init__(self, redis_url: str, names: BusNames, block_s: float) -> None:
        self.redis_url = redis_url
        self.names = names
        self.block_s = block_s
        self.session_id = ""
        self.holders: list[str | None] = []

    def __call__(self, _: Any) -> ScriptedReply:
        time.sleep(self.block_s)  # CPU work on the loop: nothing else of the worker runs
        with sync_redis.Redis.from_url(self.redis_url) as r:
            raw = r.get(self.names.session_lease(self.session_id))
        self.holders.append(raw.decode() if isinstance(raw, bytes) else None)
        return ScriptedReply(text="done")


@contextlib.asynccontextmanager
async def _blocked_run(
    client: BusClient,
    redis_url: str,
    names: BusNames,
    home: Path,
    *,
    block_s: float,
    extra_config: str = "",
) -> AsyncIterator[tuple[InProcessWorker, _BlockingModel, dict[str, Any]]]:
    """A worker whose model blocks its loop ``block_s`` in a run's one turn; the run, ended;
    the worker closed at the block's end."""
    blocking = _BlockingModel(redis_url, names, block_s)
    worker = await start_worker(
        redis_url, names, home, ScriptedModel(blocking), extra_config=extra_config
    )
    try:
        blocking.session_id = await client.new_session()
        sent = await client.send(blocking.session_id, "think hard")
        [run] = (await client.wait_terminal([sent.run_id], timeout_s=60)).values()
        yield worker, blocking, run
    finally:
        await worker.close()


@pytest.mark.usefixtures("writer_ready")
async def test_a_loop_busy_past_the_ttl_keeps_its_lease(
    client: BusClient, redis_url: str, names: BusNames, tmp_path: Path
) -> None:
    async with _blocked_run(client, redis_url, names, tmp_path, block_s=2.5) as ran:
        worker, blocking, run = ran
        # 2.5 s of a blocked loop against a 1 s TTL: the keeper's thread renewed meanwhile.
        assert blocking.holders == [worker.worker.token]
        assert run["status"] == "completed"
        assert run["attempt"] == 1


@pytest.mark.usefixtures("writer_ready")
async def test_a_loop_stuck_past_the_stall_limit_lets_its_lease_lapse(
    client: BusClient, redis_url: str, names: BusNames, tmp_path: Path
) -> None:
    stuck = _blocked_run(
        client, redis_url, names, tmp_path, block_s=3.5, extra_config="loop_stall_limit_s = 1"
    )
    async with stuck as (_, blocking, run):
        # The loop did not turn for 1 s: renewals stopped, and the 1 s lease ran out.
        assert blocking.holders == [None]
        assert run["status"] == "completed"  # nobody took the lane meanwhile: nothing fenced it
        blocking.block_s = 0
        await _next_run_completes(client, blocking.session_id)  # its lane is taken again


@pytest.mark.usefixtures("writer_ready")
async def test_a_drain_that_ends_stops_renewing_its_lease(
    client: BusClient, redis_url: str, names: BusNames, tmp_path: Path
) -> None:
    async with _blocked_run(client, redis_url, names, tmp_path, block_s=0) as ran:
        worker, blocking, run = ran
        assert run["status"] == "completed"
        await _until(lambda: not worker.worker.lanes, "the drain to finish")
        # Released when the lane went idle (a renewal after that finds no lease to extend).
        assert await client.queue.lease_holder(blocking.session_id) is None
        await _next_run_completes(client, blocking.session_id)


async def _until(done: Callable[[], bool], what: str) -> None:
    guard = HangGuard(30, what)
    while not done():
        guard.check()
        await asyncio.sleep(0.05)


async def _next_run_completes(client: BusClient, session_id: str) -> None:
    """The session's next run starts (nothing holds its lane) and completes."""
    sent = await client.send(session_id, "again")
    [after] = (await client.wait_terminal([sent.run_id], timeout_s=60)).values()
    assert after["status"] == "completed"
