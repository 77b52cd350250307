"""Per-session run FIFO with a lease.

Methods take a *lane*: a session id for its main runs, or ``<session>.<run>`` for a branch run
(multitask strategy ``branch``), which gets a FIFO of its own and so runs beside the main runs.

The gateway appends a run to its session's FIFO and nudges the ``runs`` stream. The worker that
takes the nudge acquires the session's lease (``SET NX PX`` with its token, renewed by heartbeat)
and drains the FIFO one run at a time with a reliable move (FIFO → processing list). A nudge for
a leased session is dropped: the lease holder will see the run. Releasing the lease re-checks the
FIFO atomically, so a run enqueued during the release is never stranded; and every lane with
work is also listed in the ``due`` set that the workers' sweepers read, so a lost nudge or a dead
worker delays a run by at most the lease TTL plus a sweep interval, never forever.

The ``due`` sets (one per bucket of lanes, ``names.lane_bucket``: a lane's keys and its bucket's due
set share one Cluster slot, so every script below touches one slot) are sorted sets scored with the time (ms) from which a sweeper should look at the
lane: *now* when a run is enqueued (a lost nudge is found by the next sweep), then, each time a
sweeper takes the lane (:meth:`SessionQueue.due_lanes`), a horizon later; while a worker holds
the lane, its lease deadline (set by :meth:`SessionQueue.start_drain` and moved by every
:meth:`SessionQueue.renew` in the same step), so the due set is the set of lease deadlines and a
held lane comes due only once its holder stopped renewing; and when a sweeper still finds the
lane leased, when that lease runs out (:meth:`SessionQueue.defer`). A sweep therefore reads only the
lanes that are due, each by one sweeper: what it costs the bus does not grow with the number of
leased lanes nor with the number of workers (it used to read every pending lane's lease on every
worker, every sweep).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from agent_core.bus import BusNames
from agent_core.bus.calls import Bus, LeanScript
from agent_core.bus.contracts.runs import RunNudge
from agent_core.bus.names import BusTtl
from agent_core.bus.pubsub import publish_command
from agent_core.bus.resp_wire import Arg, xadd
from agent_core.types.queued import QueuedRun

__all__ = ["DrainStart", "InFlight", "SessionQueue"]

# Extend the lease and move the lane's due time to the new lease deadline in the same step: the
# due set is the set of lease deadlines, and a sweeper sees a held lane only once its holder
# stopped renewing (KEYS: lease, bucket's due set; ARGV: token, ttl ms, deadline ms, lane).
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('ZADD', KEYS[2], 'XX', ARGV[3], ARGV[4])
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

# Release only when nothing is queued or in flight; otherwise keep the lease (the caller drains on).
_RELEASE_IF_IDLE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
if redis.call('LLEN', KEYS[2]) > 0 or redis.call('LLEN', KEYS[3]) > 0 then return 0 end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[4], ARGV[2])
return 1
"""

# Of the lanes ARGV[3..] of one bucket's due set, those still due (score <= ARGV[1]), each moved
# to ARGV[2] in the same step: two sweepers never take the same lane from one due time.
_TAKE_DUE = """
local taken = {}
for i = 3, #ARGV do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) <= tonumber(ARGV[1]) then
    redis.call('ZADD', KEYS[1], 'XX', ARGV[2], ARGV[i])
    taken[#taken + 1] = ARGV[i]
  end
end
return taken
"""

# Take the lease and, in the same step, the lane's first piece of work: an orphan left in the
# processing list by a dead holder (to recover), else the oldest queued run (moved to processing).
# The lane's due time moves to when the lease would run out: no sweeper looks at it before then.
_START_DRAIN = """
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return false end
redis.call('ZADD', KEYS[4], 'XX', ARGV[3], ARGV[4])
local orphan = redis.call('LINDEX', KEYS[3], 0)
if orphan then return {1, orphan} end
local raw = redis.call('LMOVE', KEYS[2], KEYS[3], 'LEFT', 'RIGHT')
if raw then return {0, raw} end
return {0}
"""

# The lease holder's next run: moved only while the caller still holds the lease. A worker that
# lost its lease (a stalled loop) must not move a run beside the new holder's: the two would run
# one session's runs at once, and the new holder, which recovers only the processing list's head,
# would spin on a list that is not empty while the stray run is in it.
_TAKE_NEXT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return false end
return redis.call('LMOVE', KEYS[2], KEYS[3], 'LEFT', 'RIGHT')
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


@dataclass(frozen=True, slots=True)
class InFlight:
    """A run in the processing list, with its exact stored form (the key to remove it)."""

    run: QueuedRun
    raw: str


@dataclass(frozen=True, slots=True)
class DrainStart:
    """A lease just taken, with the lane's first work: ``orphan`` marks a run to recover."""

    item: InFlight | None
    orphan: bool = False


def _s(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw


class SessionQueue:
    """Redis operations of the per-session FIFO, lease, cancel flags and nudges."""

    def __init__(self, bus: Bus, names: BusNames) -> None:
        self.bus = bus
        self.redis = bus.redis
        self.names = names
        # A turn's lane steps (lease, take, finish, release, flags, attempt numbers) go through
        # the bus's request/reply calls: the lean socket on a plain node (a fraction of
        # redis-py's cost per command), redis-py's own elsewhere (docs/architecture.md, "Bus").
        self._renew = LeanScript(bus, _RENEW)
        self._release_if_idle = LeanScript(bus, _RELEASE_IF_IDLE)
        self._release = LeanScript(bus, _RELEASE)
        self._start_drain = LeanScript(bus, _START_DRAIN)
        self._take_next = LeanScript(bus, _TAKE_NEXT)
        self._take_due = LeanScript(bus, _TAKE_DUE)

    def _lane_keys(self, lane: str) -> list[str]:
        """The keys the lane scripts take, in their order: lease, FIFO, processing list."""
        n = self.names
        return [n.session_lease(lane), n.session_fifo(lane), n.session_processing(lane)]

    def due_key(self, lane: str) -> str:
        """The sorted set of ``lane``'s bucket that lists lanes with queued or in-flight runs (see
        the module docstring)."""
        return self.names.lanes_due(lane)

    # -- producer side (gateway) ------------------------------------------------------------------

    async def enqueue(self, run: QueuedRun) -> None:
        """Append ``run`` to its session's FIFO, list the session as pending, and nudge workers."""
        run = run.model_copy(update={"enqueued_at_ms": int(time.time() * 1000)})
        nudge = RunNudge(session_id=run.lane, run_id=run.run_id).model_dump_json()
        # The FIFO and the due set share a slot: one transaction. The nudge's stream lives
        # elsewhere on a Cluster, so it follows in the same write (a lost nudge costs a sweep).
        await self.bus.calls.transaction(
            [
                ["RPUSH", self.names.session_fifo(run.lane), run.model_dump_json()],
                # Due now unless listed already (a leased lane keeps the time its lease runs out).
                ["ZADD", self.due_key(run.lane), "NX", run.enqueued_at_ms, run.lane],
            ],
            # A plain JSON field map: the consumer reads it like any other entry (see codec).
            then=[xadd(self.names.runs, {"__data__": nudge}, maxlen=100_000)],
        )

    async def nudge(self, session_id: str, run_id: str | None = None) -> None:
        """Wake a worker for ``session_id`` (used for branch runs and by the sweeper's tests)."""
        body = RunNudge(session_id=session_id, run_id=run_id).model_dump_json()
        await self.redis.xadd(self.names.runs, {"__data__": body}, maxlen=100_000, approximate=True)

    async def queued(self, session_id: str) -> list[QueuedRun]:
        """Runs waiting in the FIFO, oldest first."""
        raw = await self.redis.lrange(self.names.session_fifo(session_id), 0, -1)
        return [QueuedRun.model_validate_json(r) for r in raw]

    async def holds(self, run: QueuedRun) -> bool:
        """Whether ``run`` is in its lane's FIFO or processing list (queued or being executed)."""
        fifo, processing = await self.bus.calls.execute_many(
            [
                ["LRANGE", self.names.session_fifo(run.lane), 0, -1],
                ["LRANGE", self.names.session_processing(run.lane), 0, -1],
            ]
        )
        return any(json.loads(raw).get("run_id") == run.run_id for raw in [*fifo, *processing])

    async def in_flight(self, session_id: str) -> InFlight | None:
        """The run a worker moved to the processing list (executing, or orphaned by a crash)."""
        raw = await self.redis.lindex(self.names.session_processing(session_id), 0)
        return None if raw is None else InFlight(QueuedRun.model_validate_json(raw), _s(raw))

    async def is_busy(self, session_id: str) -> bool:
        """Whether a main run of the session is queued or executing."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.llen(self.names.session_fifo(session_id))
            pipe.llen(self.names.session_processing(session_id))
            queued, running = await pipe.execute()
        return bool(queued or running)

    async def take_queued(self, lane: str, run_id: str) -> QueuedRun | None:
        """Take a run out of the FIFO before it starts; ``None`` if it is not queued there."""
        for raw in await self.redis.lrange(self.names.session_fifo(lane), 0, -1):
            run = QueuedRun.model_validate_json(raw)
            if run.run_id == run_id and await self.redis.lrem(
                self.names.session_fifo(lane), 1, _s(raw)
            ):
                return run
        return None

    # -- consumer side (run-worker) ---------------------------------------------------------------

    async def acquire(self, session_id: str, token: str, ttl_ms: int) -> bool:
        """Take the session's lease if nobody holds it."""
        return bool(
            await self.redis.set(self.names.session_lease(session_id), token, nx=True, px=ttl_ms)
        )

    async def start_drain(self, lane: str, token: str, ttl_ms: int) -> DrainStart | None:
        """Take the lane's lease and its first work in one round trip; ``None``: leased already.

        The same as :meth:`acquire`, then :meth:`in_flight` (an orphan to recover), else
        :meth:`take_next`.
        """
        keys = [*self._lane_keys(lane), self.due_key(lane)]
        expires = int(time.time() * 1000) + ttl_ms
        reply = await self._start_drain(keys=keys, args=[token, ttl_ms, expires, lane])
        if reply is None:
            return None
        if len(reply) < 2:
            return DrainStart(None)
        raw = _s(reply[1])
        return DrainStart(InFlight(QueuedRun.model_validate_json(raw), raw), bool(reply[0]))

    async def renew(self, session_id: str, token: str, ttl_ms: int) -> bool:
        """Extend our lease, and the lane's due time to its new deadline (no sweeper looks at a
        lane whose holder renews); ``False`` means we lost it and must stop writing."""
        keys = [self.names.session_lease(session_id), self.due_key(session_id)]
        deadline = int(time.time() * 1000) + ttl_ms
        return bool(await self._renew(keys=keys, args=[token, ttl_ms, deadline, session_id]))

    async def take_next(self, session_id: str, token: str) -> InFlight | None:
        """Move the oldest queued run to the processing list and return it.

        ``None`` when nothing is queued or when ``token`` no longer holds the lease: checked in
        the same step as the move, so only the holder ever starts a lane's run.
        """
        raw = await self._take_next(keys=self._lane_keys(session_id), args=[token])
        return None if raw is None else InFlight(QueuedRun.model_validate_json(raw), _s(raw))

    async def finish(self, item: InFlight) -> None:
        """Drop a run from the processing list once it is terminal in storage."""
        await self.bus.calls.execute(
            "LREM", self.names.session_processing(item.run.lane), 0, item.raw
        )

    async def release_if_idle(self, session_id: str, token: str) -> int:
        """1: released; 0: more work arrived, keep draining; -1: the lease was not ours."""
        keys = [*self._lane_keys(session_id), self.due_key(session_id)]
        return int(await self._release_if_idle(keys=keys, args=[token, session_id]))

    async def release(self, session_id: str, token: str) -> None:
        """Give the lease up unconditionally (shutdown); the work stays for the next holder."""
        await self._release(keys=[self.names.session_lease(session_id)], args=[token])

    async def _each_bucket(self, command: str, *args: Arg) -> list[list[bytes | str]]:
        """``command key *args`` on every bucket's due set (one write per node), replies in
        order. Through :attr:`Bus.calls`: a sweep runs twice a second on every worker."""
        replies: list[list[bytes | str]] = await self.bus.calls.execute_many(
            [[command, key, *args] for key in self.names.all_lanes_due]
        )
        return replies

    async def pending_lanes(self) -> list[str]:
        """Every lane with queued or in-flight runs, due or not (for inspection and tests)."""
        replies = await self._each_bucket("ZRANGE", 0, -1)  # names only: no scores asked
        return sorted(_s(m) for members in replies for m in members)

    async def due_lanes(self, limit: int, horizon_ms: int) -> list[str]:
        """Up to ``limit`` lanes due for a look, oldest due first within a bucket; each is moved
        ``horizon_ms`` ahead in the same step, so no other sweeper takes it before then.

        One round trip reads every bucket (a pipeline); a second one, only when some lane is
        due, takes the chosen lanes, bucket by bucket, if they are still due."""
        if limit <= 0:
            return []
        now = int(time.time() * 1000)
        replies = await self._each_bucket("ZRANGE", "-inf", now, "BYSCORE", "LIMIT", 0, limit)
        chosen: dict[int, list[str]] = {}
        count = 0
        # Start at a bucket that turns with the clock: a full sweep does not always favour the
        # first buckets when more lanes are due than one sweep takes.
        first = (now // 1000) % len(replies)
        for i in range(len(replies)):
            bucket = (first + i) % len(replies)
            for member in replies[bucket][: limit - count]:
                chosen.setdefault(bucket, []).append(_s(member))
                count += 1
        if not chosen:
            return []
        later = now + horizon_ms
        takes = [
            self._take_due(keys=[self.names.lanes_due_bucket(b)], args=[now, later, *lanes])
            for b, lanes in chosen.items()
        ]
        taken = await asyncio.gather(*takes)
        return [_s(lane) for lanes in taken for lane in lanes]

    async def defer(self, lanes: Sequence[str], at_least_ms: int) -> None:
        """Look at ``lanes`` (found leased by someone else) again when their leases run out, and
        not before ``at_least_ms`` from now: a lane held for long costs the sweep nothing
        meanwhile. Two round trips, for the lanes a sweep could not take only."""
        if not lanes:
            return
        left = await self.bus.calls.execute_many(
            [["PTTL", self.names.session_lease(lane)] for lane in lanes]
        )
        now = int(time.time() * 1000)
        # A lease gone meanwhile (-2) or without expiry (-1): the horizon already set stands.
        later: dict[str, dict[str, int]] = {}
        for lane, ms in zip(lanes, left, strict=True):
            if ms > at_least_ms:
                later.setdefault(self.due_key(lane), {})[lane] = now + ms
        if later:
            await self.bus.calls.execute_many(
                [
                    ["ZADD", key, "XX", *(x for lane, at in scores.items() for x in (at, lane))]
                    for key, scores in later.items()
                ]
            )

    async def _list_due_now(self, lanes: Sequence[str]) -> None:
        await self.bus.calls.execute_many(
            [["ZADD", self.due_key(lane), "NX", 0, lane] for lane in lanes]
        )

    async def adopt_pending_set(self) -> int:
        """Move the lanes of the plain set older versions kept (``sessions:pending``) into the
        due sets, due now; the number moved. Idempotent; a worker calls it once at start."""
        old = self.names.sessions_pending
        if await self.redis.type(old) not in (b"set", "set"):
            return 0
        lanes = [_s(m) for m in await self.redis.smembers(old)]
        await self._list_due_now(lanes)
        await self.redis.delete(old)
        return len(lanes)

    async def adopt_legacy_lanes(self) -> int:
        """Move the lanes versions before the buckets kept (one due set, keys tagged by lane)
        under today's names: their queued and in-flight runs in order, with each run's attempt
        counter and cancel flag; the number of lanes moved. Idempotent; a worker calls it once at
        start. Those versions ran on one node only, so the moves never cross a node."""
        old_due = self.names.sessions_due
        members = await self.redis.zrange(old_due, 0, -1)  # names only: no scores asked
        lanes = [_s(cast("bytes | str", m)) for m in members]
        for lane in lanes:
            fifo, processing, lease = self.names.legacy_lane_keys(lane)
            for source, target in (
                (fifo, self.names.session_fifo(lane)),
                (processing, self.names.session_processing(lane)),
            ):
                for raw in await self.redis.lrange(source, 0, -1):
                    run_id = QueuedRun.model_validate_json(raw).run_id
                    current = (self._attempt_key(run_id), self._cancel_key(run_id))
                    for legacy, key in zip(
                        self.names.legacy_run_keys(run_id), current, strict=True
                    ):
                        if await self.redis.exists(legacy):
                            await self.redis.rename(legacy, key)
                # Oldest first stays first: pop the old list's tail onto the new list's head.
                while await self.redis.lmove(source, target, "RIGHT", "LEFT") is not None:
                    pass
            await self.redis.delete(lease)
        await self._list_due_now(lanes)
        await self.redis.delete(old_due)
        return len(lanes)

    async def lease_holder(self, session_id: str) -> str | None:
        """The token holding the lease, if any."""
        raw = await self.redis.get(self.names.session_lease(session_id))
        if raw is None:
            return None
        return raw.decode() if isinstance(raw, bytes) else str(raw)

    # -- cancellation ------------------------------------------------------------------------------

    def _attempt_key(self, run_id: str) -> str:
        return self.names.run_attempt(run_id)

    def _cancel_key(self, run_id: str) -> str:
        return self.names.run_cancel(run_id)

    async def request_cancel(self, run_id: str, *, interrupt: bool = False) -> None:
        """Flag ``run_id`` as cancelled (checked before it starts) and signal a running executor.

        ``interrupt``: the stop is the system's, for a newer message of the session (the
        ``interrupt`` strategy), not a cancel the run's client asked for: the run then ends
        ``aborted`` instead of ``cancelled`` (see :meth:`interrupted`)."""
        flag = b"interrupt" if interrupt else b"1"
        await self.bus.calls.execute_many(
            [
                ["SET", self._cancel_key(run_id), flag, "EX", BusTtl.RUN_CANCEL_S],
                [publish_command(self.redis), self.names.run_control(run_id), b"cancel"],
            ]
        )

    async def interrupted(self, run_id: str) -> bool:
        """Whether ``run_id`` was stopped by an interrupt (a later plain cancel overrides it)."""
        return bool(await self.bus.calls.execute("GET", self._cancel_key(run_id)) == b"interrupt")

    async def is_cancelled(self, run_id: str) -> bool:
        """Whether a cancel was requested for ``run_id``."""
        return bool(await self.bus.calls.execute("EXISTS", self._cancel_key(run_id)))

    async def cancelled_among(self, run_ids: Sequence[str]) -> set[str]:
        """The runs of ``run_ids`` a cancel was requested for (one round trip)."""
        if not run_ids:
            return set()
        flags = await self.bus.calls.execute_many(
            [("EXISTS", self._cancel_key(run_id)) for run_id in run_ids]
        )
        return {run_id for run_id, flag in zip(run_ids, flags, strict=True) if flag}

    async def claim_prelude(self, run_id: str) -> tuple[bool, int]:
        """:meth:`is_cancelled` and :meth:`next_attempt` in one round trip (an attempt number
        taken for a cancelled run is never used: numbers only have to grow)."""
        key = self._attempt_key(run_id)
        cancelled, value, _ = await self.bus.calls.transaction(
            [
                ("EXISTS", self._cancel_key(run_id)),
                ("INCR", key),
                ("EXPIRE", key, BusTtl.RUN_ATTEMPT_S),
            ]
        )
        return bool(cancelled), int(value)

    async def next_attempt(self, run_id: str) -> int:
        """A new, strictly larger attempt number for ``run_id`` (the fencing token)."""
        key = self._attempt_key(run_id)
        value, _ = await self.bus.calls.transaction(
            [("INCR", key), ("EXPIRE", key, BusTtl.RUN_ATTEMPT_S)]
        )
        return int(value)
