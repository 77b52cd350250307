"""The dead-letter record: a message the bus could not deliver, with the reason."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agent_core.bus.contracts._base import BusMessage

__all__ = ["DeadLetter", "DeadLetterReason"]

DeadLetterReason = Literal["malformed", "invalid", "unknown_type", "delivery_cap", "entry_deleted"]


class DeadLetter(BusMessage):
    """Where a message came from, why it is here and a redacted preview of what it held."""

    type: Literal["dead_letter"] = "dead_letter"
    stream: str
    group: str
    entry_id: str
    reason: DeadLetterReason
    error: str
    deliveries: int = Field(ge=0)
    body_preview: str = ""
    headers: dict[str, str] = Field(default_factory=dict)
    dead_at: str
