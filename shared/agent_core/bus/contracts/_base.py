"""Base of every bus message: strict, typed by a ``type`` literal."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["BusMessage"]


class BusMessage(BaseModel):
    """A message on the bus: data only, no I/O; unknown fields are refused."""

    model_config = ConfigDict(extra="forbid")
