"""Contracts of the health streams: every service instance answers pings."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, TypeAdapter

from agent_core.bus.contracts._base import BusMessage

__all__ = ["HEALTH_MESSAGE", "HealthMessage", "HealthPing", "HealthReply"]


class HealthPing(BusMessage):
    """Are you there, and are all your subscribers running?"""

    type: Literal["health_ping"] = "health_ping"
    nonce: str = ""


HealthMessage = Annotated[HealthPing, Field(discriminator="type")]
HEALTH_MESSAGE: TypeAdapter[HealthMessage] = TypeAdapter(HealthMessage)


class HealthReply(BusMessage):
    """One instance's health."""

    type: Literal["health_reply"] = "health_reply"
    service: str
    instance: str
    ok: bool
    subscribers: dict[str, bool] = Field(default_factory=dict)
    nonce: str = ""
