"""Run status transitions: ``queued|pending → running → completed|failed|aborted|cancelled``.

A terminal run never changes again. ``pending`` is a parked run: it may go back to
``queued``. A running run may be re-queued or parked (its worker gave it back), and a queued or
pending run may be cancelled or failed without ever running. Taking a run (``running``) goes
through ``claim_run``, which also bumps the fencing attempt; a claim of a running run is a
takeover by a newer attempt.
"""

from __future__ import annotations

from typing import Final

from agent_core.bus.contracts.refusals import RefusalCode
from agent_core.errors import StorageError
from agent_core.types.enums import TERMINAL_RUN_STATUSES, RunStatus

__all__ = ["CLAIMABLE", "check_run_transition"]

CLAIMABLE: Final = frozenset({RunStatus.QUEUED, RunStatus.PENDING, RunStatus.RUNNING})

_ALLOWED: Final[dict[RunStatus, frozenset[RunStatus]]] = {
    RunStatus.QUEUED: frozenset(
        {RunStatus.PENDING, RunStatus.RUNNING, RunStatus.CANCELLED, RunStatus.ABORTED}
        | {RunStatus.FAILED}
    ),
    RunStatus.PENDING: frozenset(
        {RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.CANCELLED, RunStatus.ABORTED}
        | {RunStatus.FAILED}
    ),
    RunStatus.RUNNING: frozenset({RunStatus.QUEUED, RunStatus.PENDING} | TERMINAL_RUN_STATUSES),
}


def check_run_transition(current: RunStatus, target: RunStatus) -> None:
    """Raise :class:`StorageError` ``invalid_transition`` unless ``current → target`` is allowed.

    Staying in the same non-terminal status is allowed (an update of other fields).
    """
    if current in TERMINAL_RUN_STATUSES:
        raise StorageError(
            RefusalCode.INVALID_TRANSITION,
            f"run is {current.value} (terminal) and cannot become {target.value}",
            details={"from": current.value, "to": target.value},
        )
    if target == current or target in _ALLOWED[current]:
        return
    raise StorageError(
        RefusalCode.INVALID_TRANSITION,
        f"run cannot go from {current.value} to {target.value}",
        details={"from": current.value, "to": target.value},
    )
