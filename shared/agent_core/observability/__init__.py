"""Metrics, structured logs and traces shared by every service (see docs/architecture.md)."""

from agent_core.observability.metrics import observe_pending, render_metrics

__all__ = ["observe_pending", "render_metrics"]
