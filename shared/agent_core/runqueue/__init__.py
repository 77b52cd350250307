"""Runs between gateway and workers: the per-session FIFO with its lease, and run event streams."""

from agent_core.runqueue.events import RunEventReader, RunEventWriter
from agent_core.runqueue.fifo import DrainStart, InFlight, SessionQueue
from agent_core.runqueue.submit import (
    SessionBusyError,
    Submitted,
    cancel_queued_run,
    cancel_run,
    submit_message,
)
from agent_core.types.queued import QueuedRun

__all__ = [
    "DrainStart",
    "InFlight",
    "QueuedRun",
    "RunEventReader",
    "RunEventWriter",
    "SessionBusyError",
    "SessionQueue",
    "Submitted",
    "cancel_queued_run",
    "cancel_run",
    "submit_message",
]
