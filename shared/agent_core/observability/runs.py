"""A run's start and end, told once by the process that starts or ends it: a log line and metrics.

The end line carries the run's ids and figures — status, end reason, duration, turns, tokens —
and, for a failure, the error's code and redacted message; ``RUNS_ENDED`` counts it by status and
end reason. Whoever ends a run (its worker, a take-over, a cancel) calls :func:`run_ended` once,
from the path that records the end, so summing the counter over every process counts each run
once. The duration is measured from the :func:`run_started` of the same process; a run ended by
another process than the one that started it (a take-over) is logged without one.
"""

from __future__ import annotations

import logging
import time
from typing import Protocol

from agent_core.errors import ErrorPayload, redact
from agent_core.observability.logs import log_ids
from agent_core.observability.metrics import RUN_DURATION, RUNS_ENDED, RUNS_STARTED
from agent_core.recent import Recent
from agent_core.types.enums import EndReason, RunStatus
from agent_core.types.protocol import Usage
from agent_core.types.runtime import RunHandle

__all__ = ["RunEndFigures", "run_ended", "run_started"]

log = logging.getLogger("soong.runs")


class RunEndFigures(Protocol):
    """What a run's end says about it (the shape every end of a run has)."""

    @property
    def status(self) -> RunStatus: ...
    @property
    def end_reason(self) -> EndReason: ...
    @property
    def turns(self) -> int: ...
    @property
    def usage(self) -> Usage: ...
    @property
    def error(self) -> ErrorPayload | None: ...


_STARTS: Recent[str, float] = Recent(10_000)  # runs in flight in one process stay far below


def run_started(handle: RunHandle, *, kind: str) -> None:
    """Log and count the start of an attempt at a run (``kind``: main, branch, child)."""
    _STARTS.put(handle.run_id, time.monotonic())
    RUNS_STARTED.labels(kind).inc()
    with log_ids(session_id=handle.session_id, run_id=handle.run_id, agent_id=handle.agent_id):
        log.info(
            "run started",
            extra={"fields": {"event": "run_started", "attempt": handle.attempt, "kind": kind}},
        )


def run_ended(handle: RunHandle, outcome: RunEndFigures) -> None:
    """Log and count a run's end (call once per run, where the end is recorded)."""
    started = _STARTS.pop(handle.run_id)
    duration = None if started is None else time.monotonic() - started
    status, reason = outcome.status.value, outcome.end_reason.value
    RUNS_ENDED.labels(status, reason).inc()
    if duration is not None:
        RUN_DURATION.labels(status).observe(duration)
    fields: dict[str, object] = {
        "event": "run_ended",
        "status": status,
        "end_reason": reason,
        "attempt": handle.attempt,
        "turns": outcome.turns,
        "input_tokens": outcome.usage.input_tokens,
        "output_tokens": outcome.usage.output_tokens,
    }
    if duration is not None:
        fields["duration_ms"] = round(duration * 1000, 1)
    if outcome.error is not None:
        fields["error_code"] = outcome.error.code
        fields["error_message"] = redact(outcome.error.message)[:500]
    failed = outcome.status is RunStatus.FAILED
    with log_ids(session_id=handle.session_id, run_id=handle.run_id, agent_id=handle.agent_id):
        log.log(
            logging.WARNING if failed else logging.INFO,
            "run failed" if failed else "run ended",
            extra={"fields": fields},
        )
