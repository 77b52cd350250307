"""What every storage command shares: the command envelope, the run fence and the common results.

``_Command`` is the envelope of every storage command: the ``command_id`` its sender allocated (a
redelivered, retried or replayed command has no second effect) and the session it writes to.
Run-scoped writes carry a :class:`RunFence`; the writer refuses a write whose attempt is older
than the run's current attempt. The commands themselves live beside this module, by entity
(``storage_sessions``, ``storage_runs``, ``storage_nodes``); their union is
:mod:`agent_core.bus.contracts.storage`'s.
"""

from __future__ import annotations

from pydantic import Field

from agent_core.bus.contracts._base import SQLITE_INT_MAX, BusMessage
from agent_core.bus.contracts._replies import CommandResult
from agent_core.types.enums import RunStatus

__all__ = ["EventPlaced", "RunFence", "RunResult"]


class RunFence(BusMessage):
    """Which attempt at a run makes a write; stale attempts are refused."""

    run_id: str
    attempt: int = Field(ge=1, le=SQLITE_INT_MAX)


class _Command(BusMessage):
    command_id: str = Field(min_length=1, max_length=64)
    session_id: str = Field(min_length=1, max_length=64)


class EventPlaced(CommandResult):
    """Where the writer placed an event: its session ``seq`` and, for a run's event, ``run_seq``."""

    event_id: str
    seq: int
    run_seq: int | None


class RunResult(CommandResult):
    """A run after a command that changed it: its status and current attempt."""

    run_id: str
    status: RunStatus
    attempt: int
