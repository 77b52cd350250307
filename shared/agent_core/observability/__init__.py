"""Metrics, structured logs and traces shared by every service (see docs/architecture.md)."""

from agent_core.observability.logs import configure_logging, current_ids, log_ids
from agent_core.observability.metrics import observe_pending, render_metrics

__all__ = ["configure_logging", "current_ids", "log_ids", "observe_pending", "render_metrics"]
