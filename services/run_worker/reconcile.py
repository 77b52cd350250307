"""Accepted runs the bus lost, queued again from the storage-writer's record.

A run is recorded by the storage-writer (``queued``, with the user's message) before the gateway
queues it on the bus, and the client is answered only after both. Yet the bus can lose the queue
entry after acknowledging it: Valkey replicates asynchronously, so a primary that dies right
after an enqueue may leave a promoted replica without it; and a gateway that dies between the
two writes leaves a run recorded and never queued. Either way the run would stay ``queued``
forever.

The reconciler closes that gap without a cost on the enqueue path (``WAIT`` for a replica on
every enqueue would add a replication round trip to every turn, and still leave the gateway's
own crash uncovered). Every ``interval_s`` one run-worker of the fleet (``SET NX PX`` on
``BusNames.runs_reconcile``) asks the writer for runs still ``queued``, never claimed, and
untouched for ``idle_s`` (``ListStrandedRuns``), and queues again each one that is in neither
its lane's FIFO nor its processing list. A run queued twice by a race with a worker is harmless:
a claim moves a run out of ``queued`` once (the writer refuses a claim of a run that ended or was
cancelled), so it runs at most once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets

from agent_core.bus import BusNames
from agent_core.bus.contracts.storage import ListStrandedRuns
from agent_core.runqueue.fifo import SessionQueue
from agent_core.storage_client import StorageClient

__all__ = ["Reconciler"]

log = logging.getLogger(__name__)


class Reconciler:
    """Queues again the accepted runs that no lane of the bus holds (see the module docstring)."""

    def __init__(
        self,
        storage: StorageClient,
        queue: SessionQueue,
        names: BusNames,
        *,
        idle_s: float,
        interval_s: float,
    ) -> None:
        self.storage = storage
        self.queue = queue
        self.names = names
        self.idle_s = idle_s
        self.interval_s = interval_s
        self._token = secrets.token_hex(8)

    async def run(self, stop: asyncio.Event) -> None:
        """Every ``interval_s`` until ``stop``: when this worker has the fleet's turn, reconcile."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval_s):
                    await stop.wait()
            if stop.is_set():
                return
            try:
                if await self._take_turn():
                    await self.reconcile_once()
            except Exception:  # the bus or the writer away: the next interval tries again
                log.warning("looking for stranded runs failed; trying again later", exc_info=True)

    async def _take_turn(self) -> bool:
        ttl_ms = max(1, int(self.interval_s * 1000))
        taken = await self.queue.redis.set(
            self.names.runs_reconcile, self._token, nx=True, px=ttl_ms
        )
        return bool(taken)

    async def reconcile_once(self) -> int:
        """Queue again the stranded runs missing from the bus; how many were queued."""
        runs = await self.storage.read(ListStrandedRuns(idle_s=self.idle_s))
        requeued = 0
        for run in runs:
            if await self.queue.holds(run):
                continue  # waiting behind a long run of its session, or being taken right now
            await self.queue.enqueue(run)
            requeued += 1
            log.warning(
                "run %s of session %s was accepted but is in no lane of the bus; queued it again",
                run.run_id,
                run.session_id,
            )
        return requeued
