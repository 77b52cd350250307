"""Every stream name, consumer group, Redis key and key lifetime (TTL) of the bus, declared once.

All names live under a namespace (default ``soong``) so that tests and several deployments can share
one Redis without seeing each other.

Keys that a script or a transaction touches together share a hash tag, so that a Valkey Cluster
keeps them in one slot (a script given keys of two slots fails there with ``CROSSSLOT``):

* a session's permission keys and run event streams: the session id (``{sess_…}``);
* a lane's FIFO, processing list and lease with the due set of its bucket: the lane's bucket
  (``{lanes-N}``, :func:`lane_bucket`; the sweeper reads the buckets' due sets, not one per lane);
* a run's attempt counter, cancel flag and control channel: the run id (``{run_…}``; on a
  Cluster the cancel signal is published on the flag's shard, after the flag, in the same write);
* the API key hash, its last-use hash and the token buckets: ``{auth}``;
* an account's pending memory list, lock and failed list with the due set and first-seen hash of
  its bucket: the account's bucket (``{memory-N}``, :func:`memory_bucket`).
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from typing import Final

from agent_core.errors import ConfigError

__all__ = [
    "GROUP_MEMORY",
    "GROUP_RUN_WORKERS",
    "GROUP_STORAGE",
    "GROUP_TASKS",
    "SERVICE_NAMES",
    "BusNames",
    "BusTtl",
    "LANE_BUCKETS",
    "MEMORY_BUCKETS",
    "lane_bucket",
    "memory_bucket",
]

# Consumer groups: one per consuming service; instances of a service share its group.
GROUP_RUN_WORKERS: Final = "run-workers"
GROUP_STORAGE: Final = "storage-writer"
GROUP_TASKS: Final = "task-wal"
GROUP_MEMORY: Final = "memory-extraction"

SERVICE_NAMES: Final[tuple[str, ...]] = (
    "gateway",
    "run_worker",
    "storage_writer",
    "task_wal",
    "memory_extraction",
)


class BusTtl:
    """How long each expiring key of the bus lives, declared once (seconds; ``_MS``: ms).

    Lifetimes that operators tune (a session lease, memory-extraction's lock) are settings
    instead; these are the fixed ones.
    """

    # A run's cancel flag: outlives any run that could still start.
    RUN_CANCEL_S: Final = 7 * 24 * 3600
    # A run's attempt counter (the fencing token's source): outlives any takeover of the run.
    RUN_ATTEMPT_S: Final = 30 * 24 * 3600
    # A run's event stream after its ``run_finished``: long enough for late readers to replay.
    RUN_EVENTS_AFTER_FINISH_S: Final = 3600
    # A permission request, its session's pending hash and the decision on it (set by the
    # worker that asks and by the gateway that decides).
    PERMISSION_S: Final = 7 * 24 * 3600
    # The list a waiting run blocks on until the decision is pushed to it.
    PERMISSION_WAKE_S: Final = 3600
    # An A2A task's record (the gateway's A2A endpoint): a day past its last change, like a
    # client's memory of a conversation; the run behind it stays in the API for good.
    A2A_TASK_S: Final = 24 * 3600
    # A gateway's SSE hub wake-up stream (renewed on every wake).
    GATEWAY_WAKE_MS: Final = 3_600_000
    # A gateway's liveness stamp for its SSE slots: its heartbeat renews it every half second,
    # so the slots of a gateway that died (SIGKILL included) stop counting this long after its
    # last sign of life, and a live gateway's loop may stall 1.5 s before its slots lapse (a
    # lapse only lets the key open more streams than its limit for a while).
    SSE_GATEWAY_ALIVE_S: Final = 2
    # An API key's SSE slot hash, left behind by keys that stopped streaming.
    SSE_SLOTS_S: Final = 24 * 3600
    # The window in which failed authentications of one client address are counted.
    AUTH_FAILURE_WINDOW_S: Final = 60


# How many slots the lanes (and the memory queues) are spread over: enough to spread them over the
# primaries of any cluster we expect, few enough that a sweep reads every bucket in one pipeline.
LANE_BUCKETS: Final = 16
MEMORY_BUCKETS: Final = 16


def lane_bucket(lane: str) -> int:
    """The bucket of a lane: by its session (a branch lane ``<session>.<run>`` stays beside its
    session's main lane), stable across processes (CRC-32, not Python's salted ``hash``)."""
    return zlib.crc32(lane.partition(".")[0].encode()) % LANE_BUCKETS


def memory_bucket(account_id: str) -> int:
    """The bucket of an account's memory queue (stable across processes)."""
    return zlib.crc32(account_id.encode()) % MEMORY_BUCKETS


_NAMESPACE = re.compile(r"[a-z][a-z0-9_\-]{0,31}")


@dataclass(frozen=True, slots=True)
class BusNames:
    """Names of streams and keys under one namespace."""

    namespace: str = "soong"
    # ``[storage] partitions``: how many command streams the sessions are spread over. Every
    # sender and every writer must agree on it (they read the same configuration).
    storage_partitions: int = 1

    def __post_init__(self) -> None:
        if not 1 <= self.storage_partitions <= 256:
            raise ConfigError(
                "invalid_partitions",
                "storage partitions must be between 1 and 256",
                details={"partitions": self.storage_partitions},
            )
        if _NAMESPACE.fullmatch(self.namespace) is None:
            raise ConfigError(
                "invalid_namespace",
                "bus namespace must match [a-z][a-z0-9_-]{0,31}",
                details={"namespace": self.namespace},
            )

    # -- work streams (consumer groups) ---------------------------------------------------------

    @property
    def runs(self) -> str:
        """Run nudges for run-workers (shared group; per-session order comes from the FIFO)."""
        return f"{self.namespace}:runs"

    def storage_commands(self, session_id: str | None = None) -> str:
        """The command stream of a session's partition (:meth:`storage_partition`).

        Every storage command is sent through this one function of the session id. With one
        partition (the default, and SQLite's only choice) it is always ``<ns>:storage:commands``.
        """
        return self.storage_partition_stream(self.storage_partition(session_id))

    def storage_partition(self, session_id: str | None) -> int:
        """A session's partition: CRC-32 of its id modulo ``storage_partitions`` (stable across
        processes and hosts, unlike Python's salted ``hash``); 0 without a session (an
        account's commands) and always 0 with one partition."""
        if session_id is None or self.storage_partitions == 1:
            return 0
        return zlib.crc32(session_id.encode()) % self.storage_partitions

    def storage_partition_stream(self, partition: int) -> str:
        """Partition ``partition``'s command stream: ``<ns>:storage:commands`` for 0 (so one
        partition keeps the name it always had), ``<ns>:storage:commands:<p>`` for the others."""
        base = f"{self.namespace}:storage:commands"
        return base if partition == 0 else f"{base}:{partition}"

    @property
    def storage_queries(self) -> str:
        """Storage queries (request/reply); read by the writer on its own read connection."""
        return f"{self.namespace}:storage:queries"

    @property
    def task_commands(self) -> str:
        """Task DAG commands and queries for the task-wal service (request/reply)."""
        return f"{self.namespace}:tasks:commands"

    @property
    def memory_interactions(self) -> str:
        """Finished interactions handed to memory-extraction."""
        return f"{self.namespace}:memory:interactions"

    @property
    def memory_queries(self) -> str:
        """Memory render/read/update requests (request/reply)."""
        return f"{self.namespace}:memory:queries"

    def health(self, service: str) -> str:
        """Health pings answered by every instance of ``service``."""
        return f"{self.namespace}:health:{service}"

    @property
    def dead_letter(self) -> str:
        """Messages that could not be parsed, validated or processed within the delivery cap."""
        return f"{self.namespace}:dlq"

    # -- per-run and per-session keys --------------------------------------------------------------

    def run_events(self, session_id: str, run_id: str) -> str:
        """The runtime event stream of one run (and the child runs it started)."""
        return f"{self.namespace}:events:{{{session_id}}}:{run_id}"

    def _lane_tag(self, lane: str) -> str:
        return f"{{lanes-{lane_bucket(lane)}}}"

    def session_fifo(self, session_id: str) -> str:
        """Pending runs of a lane (a session's main runs, or a branch), in arrival order."""
        return f"{self.namespace}:fifo:{self._lane_tag(session_id)}:{session_id}"

    def session_processing(self, session_id: str) -> str:
        """The run a worker moved out of the FIFO and is executing (reliable move target)."""
        return f"{self.namespace}:processing:{self._lane_tag(session_id)}:{session_id}"

    def session_lease(self, session_id: str) -> str:
        """The lease of the worker that drains a lane's FIFO (SET NX PX + fencing token)."""
        return f"{self.namespace}:lease:{self._lane_tag(session_id)}:{session_id}"

    def lanes_due(self, lane: str) -> str:
        """The due set of the bucket ``lane`` falls in (see :attr:`sessions_due`)."""
        return self.lanes_due_bucket(lane_bucket(lane))

    def lanes_due_bucket(self, bucket: int) -> str:
        """Sorted set of the lanes of one bucket that have queued or in-flight runs, each scored
        with the time (ms) from which a sweeper should look at it (see ``runqueue.fifo``)."""
        return f"{self.namespace}:lanes:due:{{lanes-{bucket}}}"

    @property
    def all_lanes_due(self) -> tuple[str, ...]:
        """Every bucket's due set, in bucket order."""
        return tuple(self.lanes_due_bucket(b) for b in range(LANE_BUCKETS))

    def legacy_lane_keys(self, lane: str) -> tuple[str, str, str]:
        """A lane's FIFO, processing list and lease as versions before the buckets named them
        (read once by ``SessionQueue.adopt_legacy_lanes`` after an upgrade)."""
        tag = f"{{{lane}}}"
        return (
            f"{self.namespace}:fifo:{tag}",
            f"{self.namespace}:processing:{tag}",
            f"{self.namespace}:lease:{tag}",
        )

    @property
    def runs_reconcile(self) -> str:
        """The turn of the run-worker that looks for accepted runs missing from every lane
        (``SET NX PX`` for one interval: one worker of the fleet does it each time)."""
        return f"{self.namespace}:runs:reconcile"

    def run_control(self, run_id: str) -> str:
        """Pub/Sub channel for control signals to a running run (cancel). It carries the run's
        tag: on a Cluster it is a sharded channel of its cancel flag's slot, so the flag set and
        the signal published in one write reach one node in order (a worker that hears the
        signal finds the flag, ``interrupt`` included)."""
        return f"{self.namespace}:control:{{{run_id}}}"

    @property
    def run_controls(self) -> str:
        """The pattern of every run's control channel (classic ``PSUBSCRIBE``: a pattern has no
        sharded form); it matches the untagged names of older versions too."""
        return f"{self.namespace}:control:*"

    def control_run(self, channel: str) -> str:
        """The run id of a control channel (:meth:`run_control`, or an older untagged name)."""
        tail = channel.removeprefix(f"{self.namespace}:control:")
        return tail[1:-1] if tail.startswith("{") and tail.endswith("}") else tail

    def reply_channel(self, instance: str) -> str:
        """Pub/Sub channel on which one process receives replies to its requests."""
        return f"{self.namespace}:reply:{instance}"

    def session_permissions(self, session_id: str) -> str:
        """Hash of a session's permission requests that wait for a decision (id → request)."""
        return f"{self.namespace}:permissions:{{{session_id}}}"

    # A request's keys carry its session as well as its id: a decision is found only by the
    # session whose run asked (the id itself is the run's: ``tools.permissions.request_id_of``).
    def permission_request(self, session_id: str, request_id: str) -> str:
        """One permission request, as the run that waits on it stored it."""
        return f"{self.namespace}:permission-request:{{{session_id}}}:{request_id}"

    def permission_decision(self, session_id: str, request_id: str) -> str:
        """The decision on one permission request (set once)."""
        return f"{self.namespace}:permission:{{{session_id}}}:{request_id}"

    def permission_wake(self, session_id: str, request_id: str) -> str:
        """List the waiting run blocks on; the decider pushes to it after deciding."""
        return f"{self.namespace}:permission-wake:{{{session_id}}}:{request_id}"

    # -- runs: cancellation and fencing ---------------------------------------------------------

    @property
    def sessions_due(self) -> str:
        """The one sorted set of due lanes that versions before the buckets kept (read once by
        ``SessionQueue.adopt_legacy_lanes`` after an upgrade, then deleted)."""
        return f"{self.namespace}:sessions:due"

    @property
    def sessions_pending(self) -> str:
        """The plain set that listed lanes with work before :attr:`sessions_due` (read once by
        :meth:`SessionQueue.adopt_pending_set` after an upgrade, then deleted)."""
        return f"{self.namespace}:sessions:pending"

    def run_attempt(self, run_id: str) -> str:
        """A run's attempt counter: each claim takes the next number (the fencing token)."""
        return f"{self.namespace}:attempt:{{{run_id}}}"

    def run_cancel(self, run_id: str) -> str:
        """A run's cancel flag (``interrupt`` when a newer message stopped it)."""
        return f"{self.namespace}:cancel:{{{run_id}}}"

    # -- gateway: API keys, limits, SSE ---------------------------------------------------------

    @property
    def api_keys(self) -> str:
        """Hash of API key records by key digest."""
        return f"{self.namespace}:{{auth}}:apikeys"

    @property
    def api_keys_used(self) -> str:
        """Hash of when each API key was last used."""
        return f"{self.namespace}:{{auth}}:apikeys:used"

    def rate_limit(self, bucket: str) -> str:
        """The token bucket of one API key."""
        return f"{self.namespace}:{{auth}}:ratelimit:{bucket}"

    def auth_failures(self, host: str) -> str:
        """Failed authentications of one client address (within the failure window)."""
        return f"{self.namespace}:authfail:{host}"

    def gateway_wake(self, hub_id: str) -> str:
        """The stream that wakes one gateway's SSE hub out of its blocking read."""
        return f"{self.namespace}:gateway:wake:{hub_id}"

    def sse_slots(self, key_id: str) -> str:
        """Open SSE streams of one API key, counted per gateway (a hash field each)."""
        return f"{self.namespace}:sse:{key_id}"

    # -- memory-extraction's queue ---------------------------------------------------------------

    def _memory_tag(self, account_id: str) -> str:
        return f"{{memory-{memory_bucket(account_id)}}}"

    def memory_due(self, bucket: int) -> str:
        """Sorted set of the accounts of one bucket by when their pending interactions are due."""
        return f"{self.namespace}:memory:due:{{memory-{bucket}}}"

    def memory_first(self, bucket: int) -> str:
        """When each account of one bucket saw its oldest pending interaction arrive."""
        return f"{self.namespace}:memory:first:{{memory-{bucket}}}"

    def memory_pending(self, account_id: str) -> str:
        """The list of an account's interactions waiting for consolidation."""
        return f"{self.namespace}:memory:pending:{self._memory_tag(account_id)}:{account_id}"

    def memory_failed(self, account_id: str) -> str:
        """Batches of an account that failed ``max_attempts`` times (kept for inspection)."""
        return f"{self.namespace}:memory:failed:{self._memory_tag(account_id)}:{account_id}"

    def memory_lock(self, account_id: str) -> str:
        """The lock of the instance consolidating an account's memory."""
        return f"{self.namespace}:memory:lock:{self._memory_tag(account_id)}:{account_id}"

    # -- the gateway's A2A endpoint ---------------------------------------------------------------

    def a2a_task(self, account_id: str, task_id: str) -> str:
        """An A2A task's record (its task id is its run's id), under the owning account."""
        return f"{self.namespace}:a2a:task:{account_id}:{task_id}"

    # -- names before the Cluster hash tags (read once by the adoptions after an upgrade) ----------

    def legacy_run_keys(self, run_id: str) -> tuple[str, str]:
        """A run's attempt counter and cancel flag as versions before the run tag named them."""
        return self.key("attempt", run_id), self.key("cancel", run_id)

    @property
    def legacy_api_keys(self) -> tuple[str, str]:
        """The API key hash and its last-use hash before the ``{auth}`` tag."""
        return self.key("apikeys"), self.key("apikeys", "used")

    @property
    def legacy_memory_queue(self) -> tuple[str, str]:
        """memory-extraction's one due set and first-seen hash before the buckets."""
        return self.key("memory", "due"), self.key("memory", "first")

    def legacy_memory_pending(self, account_id: str) -> str:
        """An account's pending list before the buckets."""
        return self.key("memory", "pending", account_id)

    def key(self, *parts: str) -> str:
        """A key of this namespace from its parts (the methods above are the bus's own keys;
        this addresses them, or a test's own keys, by parts: ``key("cancel", run_id)``)."""
        return ":".join((self.namespace, *parts))
