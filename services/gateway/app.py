"""The gateway's FastAPI application: the ``/v1`` API, health, readiness, metrics, the console.

Stateless: everything lives in Redis and the storage-writer, so any number of instances can
serve behind a load balancer. Middleware is plain ASGI (no ``BaseHTTPMiddleware``), so streams
and client disconnects pass through untouched.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from agent_core.bus import SERVICE_NAMES
from agent_core.config import Settings
from agent_core.service import ServiceContext, ping_services
from agent_core.types.api import Health, Readiness
from services.gateway import (
    routes_a2a,
    routes_assistants,
    routes_compact,
    routes_files,
    routes_hooks,
    routes_messages,
    routes_nodes,
    routes_openai,
    routes_permissions,
    routes_runs,
    routes_session_data,
    routes_sessions,
    routes_skills,
    routes_tasks_memory,
    routes_usage,
)
from services.gateway.bodies import JsonGuardMiddleware
from services.gateway.docs import add_docs_routes
from services.gateway.errors import install_error_handlers
from services.gateway.lazy import Lazy
from services.gateway.limits import BodyLimitMiddleware
from services.gateway.metrics import MetricsMiddleware
from services.gateway.openapi_events import add_event_stream
from services.gateway.routes_console import mount_console
from services.gateway.state import Gateway

if TYPE_CHECKING:
    from services.gateway.mcp_server import McpEndpoint

__all__ = ["create_app"]

_BACKEND_SERVICES = tuple(s for s in SERVICE_NAMES if s != "gateway")


# Any JSON value the gateway takes (metadata, a JSON block): what its body guard lets through,
# said in the schema — integers within 64 bits (SQLite's), everything else as JSON has it.
_JSON_VALUE: dict[str, Any] = {
    "description": "Any JSON value; integers within the signed 64-bit range.",
    "anyOf": [
        {"type": "string"},
        {"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1},
        {"type": "number"},
        {"type": "boolean"},
        {"type": "null"},
        {"type": "array", "items": {"$ref": "#/components/schemas/JsonValue"}},
        {
            "type": "object",
            "additionalProperties": {"$ref": "#/components/schemas/JsonValue"},
        },
    ],
}
_JSON_REF = {"$ref": "#/components/schemas/JsonValue"}
_ERROR_CONTENT = {
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
}


_INT64 = {"minimum": -(2**63), "maximum": 2**63 - 1}


def _any_json(node: Any) -> Any:
    """``node`` with every "any value" (``{}``, ``additionalProperties: true``) made JsonValue,
    every integer bounded to 64 bits (the body guard's limit) and every ``$ref`` with keywords
    beside it written as ``allOf`` (which every reader of the document honours)."""
    if isinstance(node, dict):
        if "$ref" in node and set(node) - {"$ref", "title", "description", "default"}:
            extra = {k: v for k, v in node.items() if k != "$ref"}
            return {"allOf": [{"$ref": node["$ref"]}, _any_json(extra)]}
        if node.get("type") == "integer":
            node = {**{k: v for k, v in _INT64.items() if k not in node}, **node}
        if node.get("additionalProperties") is True:
            node = {**node, "additionalProperties": _JSON_REF}
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                out[key] = {
                    name: _JSON_REF if _bare(sub) else _any_json(sub) for name, sub in value.items()
                }
            elif key == "items" and _bare(value):
                out[key] = _JSON_REF
            else:
                out[key] = _any_json(value)
        return out
    if isinstance(node, list):
        return [_any_json(v) for v in node]
    return node


def _bare(schema: Any) -> bool:
    """An "any value" schema: nothing but annotations."""
    return isinstance(schema, dict) and not set(schema) - {"title", "description", "default"}


def _refine(schema: dict[str, Any], settings: Settings) -> None:
    """What the pydantic models cannot say of this deployment or of a body's JSON: the
    providers and project roots it serves, that "any value" means JSON the gateway takes, and
    that a block's ``type`` tag must be given (the unions are told apart by it)."""
    components = schema["components"]["schemas"]
    for name, component in list(components.items()):
        components[name] = _any_json(component)
        tag = component.get("properties", {}).get("type", {})
        if "const" in tag and "default" in tag:
            components[name]["required"] = sorted({*component.get("required", ()), "type"})
    components["JsonValue"] = _JSON_VALUE
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            if "requestBody" in operation:  # any body may pass the size cap
                operation["responses"].setdefault(
                    "413", {"description": "Body too large", **_ERROR_CONTENT}
                )
    overrides = components.get("AgentConfigOverrides", {}).get("properties", {})
    if "provider" in overrides:
        served = list(dict.fromkeys([settings.model.provider, *settings.providers]))
        overrides["provider"]["anyOf"][0]["enum"] = served
    cwd = components.get("CreateSessionRequest", {}).get("properties", {}).get("cwd")
    if cwd is not None:
        # `workspace`, a root's name, or a folder below one (checked again by the server)
        roots = "|".join(re.escape(r) for r in settings.projects.roots)
        pattern = f"^workspace$|^(?:{roots})(?:/[A-Za-z0-9._-]+)*$" if roots else "^workspace$"
        cwd["anyOf"][0] = {**cwd["anyOf"][0], "pattern": pattern}


def _openapi(app: FastAPI, settings: Settings) -> dict[str, Any]:
    """The schema with Bearer auth declared on every ``/v1`` operation."""
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(
        title=app.title, version=app.version, description=app.description, routes=app.routes
    )
    components = schema.setdefault("components", {})
    components.setdefault("securitySchemes", {})["bearer"] = {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key from `soong-agent keys create --account NAME`.",
    }
    for path, operations in schema.get("paths", {}).items():
        if path.startswith("/v1/"):
            for operation in operations.values():
                operation["security"] = [{"bearer": []}]
    _refine(schema, settings)
    add_event_stream(schema)
    app.openapi_schema = schema
    return schema


def create_app(ctx: ServiceContext) -> FastAPI:
    """The HTTP app bound to one service context (its broker is started by the service runner)."""
    app = FastAPI(
        title="soong-agent",
        version="0.1.0",
        description="Agent runtime API: sessions, messages, runs, the node tree and live events. "
        'Every error answers `{"error": {"code", "message", "details"}}`.',
        # An id with a slash in it (even sent as %2F, which the server decodes before routing)
        # must get a 404 from the API, not a redirect to some other route.
        redirect_slashes=False,
        # Served from vendored files by add_docs_routes: the default pages load from a CDN.
        docs_url=None,
        redoc_url=None,
        # The request's server span is the one a run's trace needs; FastAPI's own spans of the
        # dependency resolution, endpoint and serialisation inside it would double the gateway's
        # exported spans per turn (see docs/architecture.md, "Operations").
        telemetry={"operation_spans": False},
    )
    gateway = Gateway.build(ctx)
    app.state.gateway = gateway
    install_error_handlers(app)
    for module in (
        routes_sessions,
        routes_session_data,
        routes_skills,
        routes_messages,
        routes_compact,
        routes_runs,
        routes_nodes,
        routes_permissions,
        routes_files,
        routes_hooks,
        routes_tasks_memory,
        routes_assistants,
        routes_openai,
        routes_usage,
    ):
        app.include_router(module.router)

    settings = ctx.settings.gateway

    def limit_for(path: str) -> int:
        # Uploads stream to disk under their own cap, checked again by the upload route.
        return (
            settings.max_upload_bytes if routes_files.is_upload(path) else settings.max_body_bytes
        )

    # Inside the body cap: it reads only what the cap let through.
    app.add_middleware(JsonGuardMiddleware)
    app.add_middleware(BodyLimitMiddleware, limit_for=limit_for)
    app.add_middleware(MetricsMiddleware)
    app.openapi = lambda: _openapi(app, ctx.settings)  # type: ignore[method-assign]

    _add_health_routes(app, ctx, gateway)
    add_docs_routes(app)
    # The account's assistants for other clients: MCP tools (its own ASGI app, the SDK's
    # transport) and A2A agents; neither is part of the OpenAPI document. Both are built on
    # their first request (services/gateway/lazy.py: their SDKs cost seconds to import).
    mcp = _mcp_endpoint(gateway)
    app.state.mcp = mcp

    app.router.routes.append(
        Route("/mcp", endpoint=_McpDoor(mcp), methods=["GET", "POST", "DELETE"],
              include_in_schema=False)
    )  # fmt: skip
    app.state.a2a = routes_a2a.a2a_endpoint()
    app.include_router(routes_a2a.router)
    if settings.console:
        mount_console(app)  # last: API paths match before they could reach it
    return app


def _add_health_routes(app: FastAPI, ctx: ServiceContext, gateway: Gateway) -> None:
    """``/healthz`` (liveness) and ``/readyz`` (the bus and every backend answer). Metrics are
    not on the API port, which clients and the proxy reach: they are on the ops port, as every
    service's are (``agent_core.service.ops``)."""

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


def _mcp_endpoint(gateway: Gateway) -> Lazy[McpEndpoint]:
    def build() -> McpEndpoint:
        from services.gateway.mcp_server import McpEndpoint

        return McpEndpoint(gateway)

    return Lazy(build)


class _McpDoor:
    """The ASGI app at ``/mcp`` (an instance, so that Starlette's Route passes the raw ASGI call
    through rather than treating it as a request handler): the endpoint, built on first use."""

    def __init__(self, endpoint: Lazy[McpEndpoint]) -> None:
        self._endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await (await self._endpoint.get())(scope, receive, send)
