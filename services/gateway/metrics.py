"""Each HTTP request, measured: its count and latency under its route template.

The request's span is FastAPI's own (its built-in OpenTelemetry server span, which continues a
client's ``traceparent``); work a request queues (a run) carries that context on (see
``docs/architecture.md``, "Operations"). The metrics are declared in
:mod:`agent_core.observability.metrics`.
"""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_core.observability.metrics import GATEWAY_REQUEST_SECONDS, GATEWAY_REQUESTS

__all__ = ["MetricsMiddleware"]


class MetricsMiddleware:
    """Times and counts every HTTP request under its route template (never the raw path)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def tracked(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "<unmatched>"
            GATEWAY_REQUESTS.labels(scope["method"], template, str(status)).inc()
            GATEWAY_REQUEST_SECONDS.labels(template).observe(time.perf_counter() - started)
