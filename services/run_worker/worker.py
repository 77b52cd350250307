"""Draining session FIFOs under leases: nudges, the sweeper and cancel signals (the leases are
renewed by :mod:`services.run_worker.leases`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from typing import cast

from redis.asyncio import RedisCluster
from redis.asyncio.cluster import ClusterPubSub
from redis.exceptions import (
    ClusterDownError,
    RedisClusterException,
    RedisError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from agent_core.bus import Delivery
from agent_core.bus.contracts.runs import RunsMessage
from agent_core.bus.pubsub import is_cluster
from agent_core.observability.logs import log_ids
from agent_core.observability.tracing import TRACEPARENT, attach_context, context_from, tracer
from agent_core.runqueue import DrainStart, InFlight, SessionQueue
from agent_core.service import ServiceContext
from services.run_worker.executor import RunExecutor
from services.run_worker.leases import LeaseKeeper

__all__ = ["RunWorker"]

log = logging.getLogger("soong.run_worker")

_CANCEL_POLL_S = 1.0  # how late a cancel whose signal was lost can be
# On a Cluster, how long the cancel listener waits for a message on one shard before it reads
# the next one (redis-py reads the shards in turn) and brings its subscriptions up to date.
_READ_SHARD_S = 0.1

# What the cancel listener subscribes again after: the bus (or one shard) away or slow. A lost or
# refused connection and an authentication failure are redis-py's ``ConnectionError`` (its
# subclasses included), a socket left unanswered its ``TimeoutError`` or the built-in one (an
# ``asyncio.timeout``); a raw socket error can still escape as ``OSError``. On a Cluster a shard
# failing over answers ``CLUSTERDOWN``/``TRYAGAIN``, and a slot map that cannot be read or does
# not cover every slot yet is a ``RedisClusterException``. Anything else is a bug and ends the
# listener, and with it the worker (the supervisor restarts it), rather than looping silently.
_BUS_AWAY: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    TimeoutError,
    OSError,
    ClusterDownError,
    TryAgainError,
    RedisClusterException,
)


def _text(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw


async def _first_of(*events: asyncio.Event, timeout_s: float) -> None:
    """Return when one of ``events`` is set, or after ``timeout_s``."""
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


class RunWorker:
    """Takes leases on lanes (sessions or branch runs) and executes their runs one at a time."""

    def __init__(self, ctx: ServiceContext, queue: SessionQueue, executor: RunExecutor) -> None:
        self.ctx = ctx
        self.queue = queue
        self.executor = executor
        settings = ctx.settings.run_worker
        self.ttl_ms = settings.lease_ttl_ms
        self.max_lanes = settings.max_concurrent_runs
        self.sweep_interval_s = max(0.2, self.ttl_ms / 4000)
        # Renewed from a thread of its own: CPU work on this loop cannot let a lease lapse.
        self.leases = LeaseKeeper(
            ctx.settings.bus,
            ctx.names,
            ttl_ms=self.ttl_ms,
            stall_limit_s=settings.loop_stall_limit_s,
        )
        # Unique per process life: a restarted worker never mistakes an old lease for its own.
        self.token = f"{ctx.consumer_name}:{secrets.token_hex(4)}"
        self.lanes: dict[str, asyncio.Task[None]] = {}
        self._accepting = True
        self._refill: asyncio.Event | None = None

    async def on_nudge(self, nudge: RunsMessage, _: Delivery) -> None:
        """A lane has work: try to take it. Losing the race is fine: the holder sees the run."""
        await self.try_drain(nudge.session_id)

    async def try_drain(self, lane: str) -> bool:
        """Start draining ``lane`` if we can take its lease; return whether we did."""
        if not self._accepting or lane in self.lanes or len(self.lanes) >= self.max_lanes:
            return False
        start = await self.queue.start_drain(lane, self.token, self.ttl_ms)
        if start is None:
            return False
        task = asyncio.create_task(self._drain(lane, start), name=f"lane:{lane}")
        self.lanes[lane] = task
        task.add_done_callback(lambda done: self._lane_done(lane, done))
        return True

    def _lane_done(self, lane: str, task: asyncio.Task[None]) -> None:
        if self.lanes.get(lane) is task:  # a newer drain of the same lane may have started
            del self.lanes[lane]
        # A slot is free: lanes whose nudges were dropped while we were full need not wait
        # for the next sweep.
        if self._accepting and self._refill is not None:
            self._refill.set()

    async def _drain(self, lane: str, start: DrainStart) -> None:
        lease = self.leases.hold(lane, self.token)
        lost = lease.lost
        try:
            item = start.item
            if item is not None and start.orphan:
                # Its worker died (or stopped) mid-run: recover it first.
                log.info("recovering run %s of %s", item.run.run_id, lane)
                if not await self._execute(item):
                    return  # superseded: the new lease holder owns the lane now
                await self.queue.finish(item)
                item = None
            while self._accepting and not lost.is_set():
                if item is None:
                    item = await self.queue.take_next(lane, self.token)
                if item is None:
                    if await self.queue.release_if_idle(lane, self.token) != 0:
                        return
                    continue
                if not await self._execute(item):
                    return
                await self.queue.finish(item)
                item = None
        except asyncio.CancelledError:
            raise
        except Exception:
            # The run stays in the processing list; the lease expires and a sweeper retries it.
            log.exception("draining %s failed", lane)
        finally:
            self.leases.release(lease)
            if not lost.is_set() and not self._accepting:
                await self.queue.release(lane, self.token)
            # The lane is not ours any more: its session's next run may go to any host.
            self.executor.mirrors.release(lane)

    async def _execute(self, item: InFlight) -> bool:
        """Execute one run with its ids on every log line and its spans in the trace of the
        request that queued it: the wait in the queue, then the run (claim, model and tool calls,
        the writer's commits of its commands)."""
        run = item.run
        parent = context_from({TRACEPARENT: run.trace_parent} if run.trace_parent else None)
        with (
            log_ids(session_id=run.session_id, run_id=run.run_id, agent_id=run.agent_id),
            attach_context(parent),
        ):
            if run.enqueued_at_ms:
                tracer().start_span(
                    "run.queue_wait", start_time=run.enqueued_at_ms * 1_000_000
                ).end()
            with tracer().start_as_current_span(
                "run", attributes={"run.id": run.run_id, "session.id": run.session_id}
            ):
                return await self.executor.execute(item)

    async def sweep(self, stop: asyncio.Event) -> None:
        """Take over lanes with work and no lease holder (lost nudges, dead workers), every
        sweep interval and whenever a slot frees up."""
        self._refill = asyncio.Event()
        with contextlib.suppress(RedisError):  # the bus down at start: the next start adopts
            if moved := await self.queue.adopt_pending_set():
                log.info("adopted %d lanes listed by an older version", moved)
            if moved := await self.queue.adopt_legacy_lanes():
                log.info("moved %d lanes to their bucketed keys", moved)
        while not stop.is_set():
            self._refill.clear()
            try:
                await self._sweep_once()
            except Exception:
                log.exception("sweep failed; retrying")
            waiters = [
                asyncio.ensure_future(stop.wait()),
                asyncio.ensure_future(self._refill.wait()),
            ]
            await asyncio.wait(
                waiters, timeout=self.sweep_interval_s, return_when=asyncio.FIRST_COMPLETED
            )
            for waiter in waiters:
                waiter.cancel()

    async def _sweep_once(self) -> None:
        """Take the due lanes this worker has room for; those leased by another worker are
        looked at again when their leases run out (``SessionQueue.defer``)."""
        due = await self.queue.due_lanes(self.max_lanes - len(self.lanes), self.ttl_ms)
        held = [lane for lane in due if lane not in self.lanes and not await self.try_drain(lane)]
        await self.queue.defer(held, self.ttl_ms)

    async def listen_for_cancels(self, stop: asyncio.Event) -> None:
        """Cancel signals for runs executing here arrive on their control channels
        (``control:{<run_id>}``).

        A dropped connection (the bus restarting, a shard failing over: ``_BUS_AWAY``) subscribes
        again; any other exception is a bug and is raised. Pub/sub drops what is
        published meanwhile, so the cancel flags of the runs executing here are also read every
        ``_CANCEL_POLL_S``: a lost signal delays a cancel by that much at most, never forever.
        """
        listen = self._listen_sharded if is_cluster(self.ctx.redis) else self._listen_for_cancels
        while not stop.is_set():
            try:
                await listen(stop)
            except _BUS_AWAY as exc:  # a fresh Pub/Sub object subscribes everything again
                log.warning(
                    "cancel listener lost the bus (%s: %s); subscribing again",
                    type(exc).__name__,
                    exc,
                )
                # The safety net goes on while subscribing fails (on a Cluster one shard may be
                # away while the flags of the runs on the others can still be read).
                await self._cancel_flagged()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.5):
                        await stop.wait()

    async def _listen_for_cancels(self, stop: asyncio.Event) -> None:
        """One node: every run's control channel through one pattern subscription."""
        pubsub = self.ctx.redis.pubsub(ignore_subscribe_messages=True)
        await pubsub.psubscribe(self.ctx.names.run_controls)
        polled = time.monotonic()
        try:
            while not stop.is_set():
                msg = await pubsub.get_message(timeout=0.5)
                if time.monotonic() - polled >= _CANCEL_POLL_S:
                    polled = time.monotonic()
                    await self._cancel_flagged()
                if msg is None or msg.get("type") != "pmessage":
                    continue
                self._signalled(self.ctx.names.control_run(_text(msg["channel"])))
        finally:
            with contextlib.suppress(RedisError):
                await pubsub.aclose()  # type: ignore[no-untyped-call]

    async def _listen_sharded(self, stop: asyncio.Event) -> None:
        """A Cluster: the control channel of each run executing here (main and child runs
        alike), subscribed on its shard (``SSUBSCRIBE``) when the run registers here and dropped
        when it leaves (:meth:`RunningRuns.watch`). A pattern has no sharded form, and a classic
        subscription would hear only a classic ``PUBLISH``, which the Cluster forwards to every
        node."""
        cluster = cast("RedisCluster", self.ctx.redis)
        await cluster.initialize()  # the slot map: a client that sent nothing yet knows no node
        pubsub = cluster.pubsub()
        registry = self.executor.runs
        # Runs that registered (True) or left (False) since the subscriptions were last brought
        # up to date; the runs registered already come first, read in the same step as the
        # watch begins, so none is missed.
        changes: dict[str, bool] = dict.fromkeys(registry.run_ids, True)
        changed = asyncio.Event()
        changed.set()

        def follow(run_id: str, running: bool) -> None:
            changes[run_id] = running
            changed.set()

        unwatch = registry.watch(follow)
        runs: dict[bytes, str] = {}  # subscribed channel -> its run
        polled = time.monotonic()
        try:
            while not stop.is_set():
                if changed.is_set():
                    changed.clear()
                    await self._follow_runs(pubsub, runs, changes)
                if time.monotonic() - polled >= _CANCEL_POLL_S:
                    polled = time.monotonic()
                    await self._cancel_flagged()
                # Nothing subscribed (and every unsubscription's reply read, which lets redis-py
                # close that shard's connection): nothing to read until a run registers.
                if not pubsub.node_pubsub_mapping:
                    await _first_of(stop, changed, timeout_s=_CANCEL_POLL_S)
                    continue
                msg = await pubsub.get_sharded_message(
                    ignore_subscribe_messages=True, timeout=_READ_SHARD_S
                )
                if msg is None or msg.get("type") != "smessage":
                    continue
                if (run_id := runs.get(msg["channel"])) is not None:
                    self._signalled(run_id)
        finally:
            unwatch()
            with contextlib.suppress(RedisError):
                await pubsub.aclose()

    async def _follow_runs(
        self, pubsub: ClusterPubSub, runs: dict[bytes, str], changes: dict[str, bool]
    ) -> None:
        """Subscribe to the control channels of the runs in ``changes`` that registered and
        unsubscribe from those of the runs that left; ``runs`` (channel -> run) is updated and
        ``changes`` emptied. A run that registered and left in between is neither."""
        pending = dict(changes)
        changes.clear()
        wanted = {self.ctx.names.run_control(r).encode(): (r, on) for r, on in pending.items()}
        started = {c: r for c, (r, on) in wanted.items() if on and c not in runs}
        ended = [c for c, (_, on) in wanted.items() if not on and c in runs]
        if started:
            await pubsub.ssubscribe(*started)
            runs.update(started)
        if ended:
            await pubsub.sunsubscribe(*ended)  # never with no channel: that drops them all
            for channel in ended:
                del runs[channel]

    def _signalled(self, run_id: str) -> None:
        if self.executor.cancel(run_id):
            log.info("cancelled run %s", run_id)

    async def _cancel_flagged(self) -> None:
        """Cancel the runs executing here whose cancel flag is set (a signal may have been lost)."""
        try:
            flagged = await self.queue.cancelled_among(self.executor.runs.run_ids)
        except (RedisError, RedisClusterException) as exc:  # the bus (a shard) is away: next poll
            log.warning("could not read cancel flags: %s", exc)
            return
        for run_id in flagged:
            if self.executor.cancel(run_id):
                log.info("cancelled run %s (flag)", run_id)

    async def shutdown(self, timeout_s: float = 10.0) -> None:
        """Stop taking runs; let running ones finish for ``timeout_s``; then cancel them.

        A cancelled drain leaves its run in the processing list, so the next lease holder
        resumes or fails it: nothing is lost, nothing stays ``running`` forever.
        """
        self._accepting = False
        tasks = list(self.lanes.values())
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=timeout_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        await self.leases.close()
