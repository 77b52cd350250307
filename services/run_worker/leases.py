"""Lane leases renewed from a thread of their own.

A lane's lease (``SessionQueue.renew``) says that its worker is alive: another worker's sweeper
takes the lane over once the lease lapses (``run_worker.lease_ttl_ms``, 2 s by default), and the
run in flight is recovered there as its next attempt. Renewed from the worker's own event loop, a
lease also lapsed whenever that loop was busy for longer than the TTL — a long session's context
built and compacted, a large reply parsed, a provider SDK imported, each several times slower on a
loaded host — and the lane was taken from a worker that was alive and still running the run. The
next worker met the same CPU work, lost the lane the same way, and after three such "lost workers"
the run ended ``attempts_exhausted``.

So the renewals run on a thread with an event loop and a bus client of its own, built from the
same ``[bus]`` settings as the worker's (a Sentinel set, a Cluster, TLS). The GIL passes between
threads every few milliseconds, so a loop busy in Python does not hold the renewals back. They
stop, and the leases lapse within the TTL, when the process dies or is stopped (SIGKILL, SIGSTOP,
its host lost), and also when the worker's loop has not turned for ``stall_limit_s``: a loop that
is stuck, not merely busy, gives its lanes up. A renewal that finds the lease taken reports it on
the worker's loop (the lane's ``lost`` event); the drain then takes no new run from that lane and
its writes are refused by fencing from then on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from dataclasses import dataclass, field

from agent_core.bus import BusNames
from agent_core.bus.calls import Bus
from agent_core.bus.topology import bus_client
from agent_core.config.schema import BusSettings
from agent_core.runqueue import SessionQueue

__all__ = ["Lease", "LeaseKeeper"]

log = logging.getLogger("soong.run_worker")


@dataclass(eq=False)
class Lease:
    """One held lane: ``lost`` is set, on the worker's loop, once another worker holds it."""

    lane: str
    token: str
    lost: asyncio.Event = field(default_factory=asyncio.Event)


class LeaseKeeper:
    """Renews the worker's held leases every quarter TTL from its own thread (module docstring).

    :meth:`hold` and :meth:`release` are called on the worker's loop; :meth:`close` stops the
    thread. Renewal failures (the bus away) are retried at the next tick, as before.
    """

    def __init__(
        self, bus: BusSettings, names: BusNames, *, ttl_ms: int, stall_limit_s: float
    ) -> None:
        self._bus = bus
        self._names = names
        self.ttl_ms = ttl_ms
        self.stall_limit_s = stall_limit_s
        self._held: dict[str, Lease] = {}
        self._guard = threading.Lock()  # _held is read by the thread, changed by the loop
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._turned_at = time.monotonic()  # when the worker's loop last ran our beat

    def hold(self, lane: str, token: str) -> Lease:
        """Renew ``lane``'s lease (held by ``token``) until :meth:`release`; start the thread on
        first use (it needs the worker's running loop to report to)."""
        lease = Lease(lane, token)
        with self._guard:
            self._held[lane] = lease
        if self._thread is None:
            self._loop = asyncio.get_running_loop()
            self._turned_at = time.monotonic()
            self._thread = threading.Thread(target=self._main, name="lease-keeper", daemon=True)
            self._thread.start()
        return lease

    def release(self, lease: Lease) -> None:
        """Stop renewing ``lease`` (a newer hold of the same lane is kept)."""
        with self._guard:
            if self._held.get(lease.lane) is lease:
                del self._held[lease.lane]

    async def close(self) -> None:
        """Stop renewing and wait for the thread (a renewal in flight ends first)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            await asyncio.to_thread(thread.join, 10)

    def _main(self) -> None:
        try:
            asyncio.run(self._renew_until_stopped())
        except Exception:  # the leases now lapse: other workers take the lanes over
            log.exception("the lease keeper stopped; this worker's lanes will be taken over")

    async def _renew_until_stopped(self) -> None:
        # This thread's own loop needs its own client: the worker's is bound to the worker's loop.
        bus = Bus(bus_client(self._bus))
        queue = SessionQueue(bus, self._names)
        stalled = False
        try:
            while not self._stop.is_set():
                await asyncio.sleep(self.ttl_ms / 4000)
                assert self._loop is not None
                with contextlib.suppress(RuntimeError):  # the worker's loop closed: stopping
                    self._loop.call_soon_threadsafe(self._beat)
                idle = time.monotonic() - self._turned_at
                if idle > self.stall_limit_s:
                    if not stalled:
                        log.error(
                            "the worker's event loop has not turned for %.0f s; its leases are "
                            "left to lapse so that other workers take its lanes",
                            idle,
                        )
                    stalled = True
                    continue
                stalled = False
                with self._guard:
                    leases = list(self._held.values())
                if leases:
                    await asyncio.gather(*(self._renew(queue, lease) for lease in leases))
        finally:
            await bus.aclose()

    def _beat(self) -> None:
        self._turned_at = time.monotonic()

    async def _renew(self, queue: SessionQueue, lease: Lease) -> None:
        try:
            ok = await queue.renew(lease.lane, lease.token, self.ttl_ms)
        except Exception:
            log.warning("lease renewal of %s failed; retrying", lease.lane)
            return
        if ok:
            return
        with self._guard:
            current = self._held.get(lease.lane) is lease
            if current:
                del self._held[lease.lane]
        if current:  # released meanwhile: the drain ended, nothing is lost
            # Another worker took the lane over (we were stopped or cut off past the TTL). Our
            # next storage write is refused by fencing, which ends the run here; the drain
            # takes no new run from this lane.
            log.warning("lost the lease of %s; its runs are fenced from now on", lease.lane)
            assert self._loop is not None
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(lease.lost.set)
