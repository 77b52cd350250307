"""memory_extraction: shell (its handlers land with its issue; today: health only)."""

from __future__ import annotations

from agent_core.service import ServiceContext, ServiceParts

__all__ = ["build"]


async def build(ctx: ServiceContext) -> ServiceParts:
    """No consumers yet beyond the health consumer every service gets."""
    return ServiceParts()
