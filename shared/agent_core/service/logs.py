"""Logging set-up for service processes: the configured format, the process's service and instance.

One line per record, redacted; an exception's traceback only in debug mode (``debug = true``),
else its type and redacted message (tracebacks go to debug-mode artifacts: ``docs/architecture.md``,
"Run lifecycle and endings").
"""

from __future__ import annotations

from agent_core.config import Settings
from agent_core.observability.logs import configure_logging

__all__ = ["setup_logging"]


# How long a service's line below WARNING may wait to be written with others (one write, and one
# wake-up of the supervisor that relays it, for many lines of a busy worker).
LOG_BATCH_S = 0.05


def setup_logging(settings: Settings, service: str, instance: str) -> None:
    """Log to stderr as ``observability.log_format`` says; secrets never reach a log line."""
    configure_logging(
        settings.log_level,
        service,
        instance,
        settings.observability.log_format,
        debug=settings.debug,
        batch_s=LOG_BATCH_S,
    )
