"""What a service's handlers get: settings, names, Redis, request/reply, consumers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import TypeAdapter
from redis.asyncio import Redis

from agent_core.bus import (
    BusNames,
    ConsumerOptions,
    DeadLetterSink,
    RpcClient,
    StreamConsumer,
)
from agent_core.bus.calls import Bus
from agent_core.bus.consumer import BatchHandler, Handler
from agent_core.bus.topology import bus_client
from agent_core.config import Settings

__all__ = ["BackgroundTask", "ServiceContext", "ServiceParts", "bus_client"]

T = TypeVar("T")
BackgroundTask = Callable[[asyncio.Event], Coroutine[Any, Any, None]]


@dataclass
class ServiceParts:
    """What a service declares: its consumers, background loops and start/stop hooks.

    Background tasks receive the stop event and must return soon after it is set.
    """

    consumers: list[StreamConsumer[Any]] = field(default_factory=list)
    tasks: list[BackgroundTask] = field(default_factory=list)
    on_start: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    on_stop: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    # False for a service that must not open the ops port even when one is configured.
    ops_port: bool = True


class ServiceContext:
    """Connections and names of one service instance. Constructing it does no I/O."""

    def __init__(self, settings: Settings, service: str, instance: str) -> None:
        if settings.bus.redis_url is None:
            raise ValueError("settings.bus.redis_url must be set before a service starts")
        self.settings = settings
        self.service = service
        self.instance = instance
        self.names = BusNames(settings.bus.namespace, settings.storage.partitions)
        # The process's one bus client: everything that calls the bus is handed this one.
        self.bus = Bus(bus_client(settings.bus))
        self.redis: Redis = self.bus.redis
        self.rpc = RpcClient(self.bus, self.names.reply_channel(f"{service}-{instance}"))
        self.dead_letters = DeadLetterSink(self.redis, self.names.dead_letter)
        self.log = logging.getLogger(f"soong.{service}")
        self._started: asyncio.Event | None = None

    @property
    def started(self) -> asyncio.Event:
        """Set once every reader of the service runs (created lazily: loop-bound)."""
        if self._started is None:
            self._started = asyncio.Event()
        return self._started

    @property
    def consumer_name(self) -> str:
        """A stable consumer name, so a restarted instance drains its own pending entries."""
        return f"{self.service}-{self.instance}"

    def default_options(self, **overrides: object) -> ConsumerOptions:
        """Consumer options from the bus settings, with per-consumer overrides."""
        bus = self.settings.bus
        values: dict[str, object] = {
            "min_idle_ms": bus.min_idle_ms,
            "max_deliveries": bus.max_deliveries,
            "claim_interval_s": bus.claim_interval_s,
        }
        values.update(overrides)
        return ConsumerOptions(**values)  # type: ignore[arg-type]

    def consumer(
        self,
        stream: str,
        group: str,
        adapter: TypeAdapter[T],
        *,
        handler: Handler[T] | None = None,
        batch_handler: BatchHandler[T] | None = None,
        options: ConsumerOptions | None = None,
    ) -> StreamConsumer[T]:
        """A consumer of ``stream`` in ``group`` under this instance's stable name."""
        return StreamConsumer(
            stream=stream,
            group=group,
            consumer=self.consumer_name,
            adapter=adapter,
            dead_letters=self.dead_letters,
            bus=self.bus,
            handler=handler,
            batch_handler=batch_handler,
            options=options or self.default_options(batch=batch_handler is not None),
        )
