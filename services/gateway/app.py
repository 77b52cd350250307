"""The gateway's FastAPI application: health and readiness (the API proper grows here)."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from agent_core.bus import SERVICE_NAMES
from agent_core.service import ServiceContext, ping_services

__all__ = ["create_app"]

_BACKEND_SERVICES = tuple(s for s in SERVICE_NAMES if s != "gateway")


class Health(BaseModel):
    """Liveness: the process is up."""

    model_config = ConfigDict(extra="forbid")
    status: str


class Readiness(BaseModel):
    """Readiness: the bus answers and every service answered its ping."""

    model_config = ConfigDict(extra="forbid")
    ready: bool
    bus: bool
    services: dict[str, bool]


def create_app(ctx: ServiceContext) -> FastAPI:
    """The HTTP app bound to one service context (its broker is started by the service runner)."""
    app = FastAPI(
        title="soong-agent",
        version="0.1.0",
        description="Agent runtime API: sessions, messages, runs, the node tree and live events.",
    )

    @app.get("/healthz", response_model=Health, tags=["health"])
    async def healthz() -> Health:
        """Process liveness."""
        return Health(status="ok")

    @app.get(
        "/readyz",
        response_model=Readiness,
        tags=["health"],
        responses={503: {"model": Readiness, "description": "not ready"}},
    )
    async def readyz() -> JSONResponse:
        """Ready when the bus answers and every backend service answered its health ping."""
        try:
            bus = bool(await ctx.redis.ping())
        except Exception:
            bus = False
        replies = await ping_services(ctx, _BACKEND_SERVICES, timeout_s=2.0) if bus else {}
        services = {s: bool(r is not None and r.ok) for s, r in replies.items()} or dict.fromkeys(
            _BACKEND_SERVICES, False
        )
        ready = bus and all(services.values())
        body = Readiness(ready=ready, bus=bus, services=services)
        return JSONResponse(body.model_dump(), status_code=200 if ready else 503)

    return app
