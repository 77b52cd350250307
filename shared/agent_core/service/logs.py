"""Logging set-up for service processes: one line per record, redacted."""

from __future__ import annotations

import logging
import sys

from agent_core.errors import redact

__all__ = ["setup_logging"]


class _RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def setup_logging(level: str, service: str) -> None:
    """Log to stderr with the service name; secrets never reach a log line."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        _RedactingFormatter(f"%(asctime)s %(levelname)s {service} %(name)s: %(message)s")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Library chatter that says nothing about our services at INFO.
    for noisy in ("httpx", "httpcore", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
