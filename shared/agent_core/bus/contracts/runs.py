"""Contracts of the ``runs`` stream (gateway → run-workers)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, TypeAdapter

from agent_core.bus.contracts._base import BusMessage

__all__ = ["RUNS_MESSAGE", "RunNudge", "RunsMessage"]


class RunNudge(BusMessage):
    """Wake a worker for a session whose FIFO has runs; the FIFO, not this message, holds them."""

    type: Literal["run_nudge"] = "run_nudge"
    session_id: str
    run_id: str | None = None


RunsMessage = Annotated[RunNudge, Field(discriminator="type")]
RUNS_MESSAGE: TypeAdapter[RunsMessage] = TypeAdapter(RunsMessage)
