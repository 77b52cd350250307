"""Every stream name, consumer group and Redis key of the bus, declared once.

All names live under a namespace (default ``soong``) so that tests and several deployments can share
one Redis without seeing each other. Keys that belong to one session carry the session id in a hash
tag (``{sess_…}``) so that a Redis Cluster keeps them on one node.
"""

from __future__ import annotations

import re
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

_NAMESPACE = re.compile(r"[a-z][a-z0-9_\-]{0,31}")


@dataclass(frozen=True, slots=True)
class BusNames:
    """Names of streams and keys under one namespace."""

    namespace: str = "soong"

    def __post_init__(self) -> None:
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
        """Storage commands, routed by session: one shard today.

        Every storage command is sent through this one function of the session id, so sharding
        sessions across several writers later changes only this function.
        """
        return f"{self.namespace}:storage:commands"

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

    def session_fifo(self, session_id: str) -> str:
        """Pending main runs of a session, in arrival order."""
        return f"{self.namespace}:fifo:{{{session_id}}}"

    def session_processing(self, session_id: str) -> str:
        """The run a worker moved out of the FIFO and is executing (reliable move target)."""
        return f"{self.namespace}:processing:{{{session_id}}}"

    def session_lease(self, session_id: str) -> str:
        """The lease of the worker that drains a session's FIFO (SET NX PX + fencing token)."""
        return f"{self.namespace}:lease:{{{session_id}}}"

    def run_control(self, run_id: str) -> str:
        """Pub/Sub channel for control signals to a running run (cancel)."""
        return f"{self.namespace}:control:{run_id}"

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

    def key(self, *parts: str) -> str:
        """Any other key of this namespace, e.g. ``names.key("ratelimit", key_id)``."""
        return ":".join((self.namespace, *parts))
