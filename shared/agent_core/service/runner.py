"""Running a service: the one start-up and shutdown sequence every service shares.

Start: connect → create groups → drain own pending entries → start the consumers' reading loops
→ reclaim loops, background tasks and the reader watchdog. Stop (SIGTERM/SIGINT): stop intake and
let in-flight handlers finish (up to a graceful timeout) → stop hooks → cancel what is left.

Exit codes: 0 after a signal, 2 when the bus is unreachable at start, 3 when a reader died
(so the supervisor restarts the process: a dead reader never comes back by itself), 78
(``EX_CONFIG``) when the configuration cannot work (the supervisor stops the stack: a restart
would fail the same way).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
from collections.abc import Awaitable, Callable
from typing import Any

from agent_core.bus import StreamConsumer, drain_own, reclaim_loop
from agent_core.config import Settings
from agent_core.errors import ConfigError
from agent_core.observability.metrics import observe_pending, render_metrics
from agent_core.observability.tracing import setup_tracing
from agent_core.service.context import ServiceContext, ServiceParts
from agent_core.service.health import health_consumer, subscribers_running
from agent_core.service.logs import setup_logging
from agent_core.service.ops import OpsServer

__all__ = [
    "EXIT_BUS_UNREACHABLE",
    "EXIT_CONFIG",
    "EXIT_SUBSCRIBER_DIED",
    "ServiceFactory",
    "run_service",
]

EXIT_BUS_UNREACHABLE = 2
EXIT_SUBSCRIBER_DIED = 3
EXIT_CONFIG = 78  # sysexits.h EX_CONFIG
ServiceFactory = Callable[[ServiceContext], Awaitable[ServiceParts]]

_WATCHDOG_INTERVAL_S = 1.0
_CANCEL_TIMEOUT_S = 5.0
_GRACEFUL_S = 15.0  # in-flight handlers finish within this at stop, else stay pending


async def run_service(
    factory: ServiceFactory,
    settings: Settings,
    service: str,
    instance: str,
    *,
    stop: asyncio.Event | None = None,
    configure_logging: bool = True,
    freeze_heap: bool | None = None,
) -> int:
    """Run one service instance until ``stop`` is set or a signal arrives; return the exit code.

    ``configure_logging=False`` leaves the process's logging and tracing alone (for in-process
    tests). ``freeze_heap`` (default: ``configure_logging``, i.e. when the service has the
    process to itself) moves everything alive once the service is up into the collector's
    permanent generation: modules, models and settings live as long as the process, and scanning
    them again on every full collection cost 4–5 % of a busy worker's or gateway's CPU
    (docs/performance.md). Objects made later are collected as before.
    """
    flush_traces = None
    if configure_logging:
        setup_logging(settings, service, instance)
        flush_traces = setup_tracing(settings.observability, service, instance)
    ctx = ServiceContext(settings, service, instance)
    stop = stop or asyncio.Event()
    # From the first moment: a SIGTERM during start-up (recovery can take a while) must lead to
    # the same clean shutdown as one after it, never to the default "die at once".
    _install_signals(stop)
    try:
        async with asyncio.timeout(10):
            await ctx.redis.ping()
    except Exception as exc:
        ctx.log.error("bus unreachable at %s: %s", _safe_url(settings), exc)
        await ctx.bus.aclose()
        return EXIT_BUS_UNREACHABLE

    parts = await _unless_stopped(factory(ctx), stop)
    if parts is None:  # stopped while it was being built (a standby waiting for its turn)
        await ctx.bus.aclose()
        return 0
    consumers: list[StreamConsumer[Any]] = [*parts.consumers]
    consumers.append(health_consumer(ctx, parts.consumers))
    ops = _ops_server(ctx, consumers) if parts.ops_port else None
    if ops is not None:
        try:
            await ops.start()
        except ConfigError:
            await ctx.bus.aclose()
            raise
        ctx.log.info("ops port %s:%d (/healthz /readyz /metrics)", ops.host, ops.port)
    await _start(ctx, parts, consumers)
    if configure_logging if freeze_heap is None else freeze_heap:
        gc.collect()  # garbage of the start-up goes first, not into the permanent generation
        gc.freeze()
    ctx.started.set()

    died = asyncio.Event()
    await _serve(ctx, parts, consumers, stop, died)
    if ops is not None:
        await ops.stop()
    await ctx.rpc.stop()
    await ctx.bus.aclose()
    if flush_traces is not None:
        await asyncio.to_thread(flush_traces)  # the last spans leave before the process does
    if died.is_set():
        return EXIT_SUBSCRIBER_DIED
    return 0


async def _start(
    ctx: ServiceContext, parts: ServiceParts, consumers: list[StreamConsumer[Any]]
) -> None:
    """Groups, start hooks, the process's own pending entries handled again, then the reading
    loops and the RPC client: in that order, so nothing new is read before what this consumer
    left pending is done."""
    for consumer in consumers:
        await consumer.ensure_group()
    for hook in parts.on_start:
        await hook()
    for consumer in consumers:
        recovered = await drain_own(consumer)
        if recovered:
            ctx.log.info("re-processed %d pending entries of %s", recovered, consumer.stream)
    for consumer in consumers:
        consumer.start_reading()
    await ctx.rpc.start()


async def _serve(
    ctx: ServiceContext,
    parts: ServiceParts,
    consumers: list[StreamConsumer[Any]],
    stop: asyncio.Event,
    died: asyncio.Event,
) -> None:
    """The reclaim loops, the service's tasks and the watchdog until ``stop``; then intake
    stops, in-flight handlers get ``_GRACEFUL_S`` to finish (else they stay pending), the stop
    hooks run and what is left is cancelled."""
    async with asyncio.TaskGroup() as tg:
        background = [
            tg.create_task(reclaim_loop(c, stop), name=f"reclaim:{c.stream}") for c in consumers
        ]
        background += [tg.create_task(t(stop), name=f"task:{i}") for i, t in enumerate(parts.tasks)]
        background.append(tg.create_task(_watchdog(ctx, consumers, stop, died), name="watchdog"))
        ctx.log.info("%s ready (consumer %s)", ctx.service, ctx.consumer_name)
        await stop.wait()
        ctx.log.info("%s stopping", ctx.service)
        await asyncio.gather(*(c.stop_reading(_GRACEFUL_S) for c in consumers))
        for hook in parts.on_stop:
            with contextlib.suppress(Exception):
                await hook()
        _, still = await asyncio.wait(background, timeout=_CANCEL_TIMEOUT_S)
        for task in still:
            task.cancel()


async def _unless_stopped(
    build: Awaitable[ServiceParts], stop: asyncio.Event
) -> ServiceParts | None:
    """``build``'s parts, or ``None`` (``build`` cancelled) when ``stop`` is set first."""
    task = asyncio.ensure_future(build)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return None


async def _watchdog(
    ctx: ServiceContext,
    consumers: list[StreamConsumer[Any]],
    stop: asyncio.Event,
    died: asyncio.Event,
) -> None:
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_WATCHDOG_INTERVAL_S):
                await stop.wait()
        if stop.is_set():
            return
        state = subscribers_running(consumers)
        dead = [name for name, ok in state.items() if not ok]
        if dead:
            ctx.log.critical(
                "subscriber(s) stopped: %s; exiting so the supervisor restarts us", dead
            )
            died.set()
            stop.set()
            return


def _ops_server(ctx: ServiceContext, consumers: list[StreamConsumer[Any]]) -> OpsServer | None:
    """The process's ops port, when configured: ready once every subscriber of it runs."""
    obs = ctx.settings.observability
    if obs.ops_port is None:
        return None

    def readiness() -> dict[str, object]:
        subs = subscribers_running(consumers)
        ready = ctx.started.is_set() and all(subs.values())
        return {
            "ready": ready,
            "service": ctx.service,
            "instance": ctx.instance,
            "subscribers": subs,
        }

    async def metrics() -> bytes:
        await observe_pending(ctx.redis, consumers)
        return render_metrics()

    return OpsServer(obs.ops_host, obs.ops_port, readiness, metrics)


def _install_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)


def _safe_url(settings: Settings) -> str:
    from agent_core.errors import redact

    return redact(settings.bus.redis_url or "")
