"""gateway: the stateless HTTP front door, served by uvicorn inside the shared service runner."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import uvicorn

from agent_core.service import ServiceContext, ServiceParts
from services.gateway.app import create_app
from services.gateway.keys import ApiKeyStore
from services.gateway.state import Gateway

__all__ = ["build"]


class _Server(uvicorn.Server):
    # The service runner owns SIGINT/SIGTERM; uvicorn must not replace those handlers.
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def build(ctx: ServiceContext) -> ServiceParts:
    """Serve the HTTP app until the service stops."""
    gw = ctx.settings.gateway
    app = create_app(ctx)
    gateway: Gateway = app.state.gateway
    # A missing bucket, refused credentials or an unreachable store: a ConfigError now, naming
    # which, rather than a 503 on every upload later.
    await gateway.files.check()
    config = uvicorn.Config(
        app,
        host=gw.host,
        port=gw.port,
        log_config=None,
        access_log=False,
        lifespan="off",
        http="httptools",
        timeout_graceful_shutdown=10,
    )
    server = _Server(config)

    async def serve(stop: asyncio.Event) -> None:
        with contextlib.suppress(Exception):  # the bus down at start: `keys` and `up` adopt too
            await ApiKeyStore(ctx.redis, ctx.names).adopt_legacy()
        task = asyncio.create_task(server.serve(), name="uvicorn")
        stopped = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
        server.should_exit = True
        await task
        stopped.cancel()
        if task in done and not stop.is_set():
            ctx.log.critical("HTTP server exited on its own; stopping the gateway")
            stop.set()

    # /healthz and /readyz are on the API port too (a balancer's checks); /metrics only on the
    # ops port, which is not the public one.
    return ServiceParts(
        tasks=[serve, gateway.slots.heartbeat],
        on_stop=[gateway.events.close, app.state.mcp.close, app.state.a2a.close],
    )
