"""Base of every bus message: strict, typed by a ``type`` literal."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["SQLITE_INT_MAX", "BusMessage"]

# SQLite's INTEGER is 64-bit: a larger number would fail inside the writer's batch (not as a
# refusal of one command), so the contracts refuse it at the boundary.
SQLITE_INT_MAX = 2**63 - 1


class BusMessage(BaseModel):
    """A message on the bus: data only, no I/O; unknown fields are refused."""

    model_config = ConfigDict(extra="forbid")
