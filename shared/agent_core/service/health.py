"""Health: every instance answers pings on its service's health stream; helpers to ask."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from agent_core.bus import Delivery, StreamConsumer
from agent_core.bus.contracts.health import HEALTH_MESSAGE, HealthMessage, HealthPing, HealthReply
from agent_core.errors import AgentCoreError
from agent_core.service.context import ServiceContext

__all__ = ["health_consumer", "ping_service", "ping_services", "subscribers_running"]


def subscribers_running(consumers: Sequence[StreamConsumer[Any]]) -> dict[str, bool]:
    """Whether each consumer's reading loop is alive (a connection that answers PING says
    nothing about it). Named for the health contract's ``subscribers`` field."""
    return {c.stream: c.running for c in consumers}


def health_consumer(
    ctx: ServiceContext, consumers: Sequence[StreamConsumer[Any]]
) -> StreamConsumer[HealthMessage]:
    """The consumer that answers this service's health pings."""

    async def answer(ping: HealthMessage, _: Delivery) -> HealthReply:
        # A ping that arrives while the service is still starting its readers waits for
        # the start to finish rather than reporting a half-started service as unhealthy.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                await ctx.started.wait()
        subs = subscribers_running(consumers)
        return HealthReply(
            service=ctx.service,
            instance=ctx.instance,
            ok=ctx.started.is_set() and all(subs.values()),
            subscribers=subs,
            nonce=ping.nonce,
        )

    return ctx.consumer(
        ctx.names.health(ctx.service),
        f"health-{ctx.service}",
        HEALTH_MESSAGE,
        handler=answer,
        options=ctx.default_options(max_records=8, min_idle_ms=5_000, max_deliveries=2),
    )


async def ping_service(ctx: ServiceContext, service: str, timeout_s: float = 2.0) -> HealthReply:
    """Ask one service for its health; raises :class:`BusTimeoutError` when nobody answers."""
    return await ctx.rpc.request(
        HealthPing(),
        stream=ctx.names.health(service),
        reply=HealthReply,
        timeout_s=timeout_s,
        maxlen=100,
    )


async def ping_services(
    ctx: ServiceContext, services: Sequence[str], timeout_s: float = 2.0
) -> dict[str, HealthReply | None]:
    """Ping several services at once; ``None`` for those that did not answer in time."""

    async def one(name: str) -> HealthReply | None:
        try:
            return await ping_service(ctx, name, timeout_s)
        except AgentCoreError:
            return None

    replies = await asyncio.gather(*(one(s) for s in services))
    return dict(zip(services, replies, strict=True))
