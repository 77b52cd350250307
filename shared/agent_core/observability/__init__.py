"""Metrics, structured logs and traces shared by every service (see docs/architecture.md).

The package re-exports the logs' functions only: a process that only logs (the search index's
child) must not load the metrics' Prometheus registry and Redis client. Import the metrics,
traces and instruments from their modules.
"""

from agent_core.observability.logs import configure_logging, current_ids, log_ids

__all__ = ["configure_logging", "current_ids", "log_ids"]
