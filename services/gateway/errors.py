"""Every error the gateway answers, as one body: ``{"error": {"code", "message", "details"}}``.

Handlers are installed for HTTP errors (including Starlette's own 404/405), request validation
(422 naming the field), :class:`AgentCoreError` (status chosen from its type and code) and a
catch-all that answers 500 with no traceback, message or exception text of the failure.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from agent_core.bus.contracts.refusals import RefusalCode
from agent_core.errors import AgentCoreError, BusTimeoutError, redact, redact_obj

__all__ = [
    "ApiError",
    "is_unavailable",
    "ErrorBody",
    "ErrorDetail",
    "error_response",
    "install_error_handlers",
    "not_found",
    "responses",
]

log = logging.getLogger("soong.gateway")


class ErrorDetail(BaseModel):
    """What went wrong: a stable machine code, a human message and structured details."""

    model_config = ConfigDict(extra="forbid")
    code: str = Field(examples=["not_found"])
    message: str = Field(examples=["no such session"])
    details: dict[str, Any] = Field(default_factory=dict)


class ErrorBody(BaseModel):
    """The body of every non-2xx answer."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"error": {"code": "not_found", "message": "no such session", "details": {}}}
            ]
        },
    )
    error: ErrorDetail


class ApiError(Exception):
    """An HTTP error with the gateway's error body; raise it from routes and dependencies."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}
        self.headers = headers


def not_found(what: str) -> ApiError:
    """The one answer for a missing id and for another account's id (no difference leaks)."""
    return ApiError(404, "not_found", f"no such {what}")


def error_response(
    status: int,
    code: str,
    message: str,
    details: dict[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """A JSON response carrying the error body (message and details redacted)."""
    body = ErrorBody(
        error=ErrorDetail(code=code, message=redact(message), details=redact_obj(details or {}))
    )
    return JSONResponse(
        body.model_dump(), status_code=status, headers=dict(headers) if headers else None
    )


_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    429: "rate_limited",
    503: "unavailable",
}

_DESCRIPTIONS = {
    400: "Bad request",
    401: "Missing or invalid API key",
    404: "Not found (also for another account's ids)",
    409: "Conflict with the current state",
    413: "Body too large",
    415: "Unsupported media type (the body's content type)",
    422: "Validation error (the field is named in details)",
    429: "Rate limited (see Retry-After)",
    503: "A backend did not answer in time",
}


def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for error statuses, all with :class:`ErrorBody` (a body
    that is not JSON, or not UTF-8, is a 400 on any route)."""
    codes = sorted({400, 401, 422, 429, *statuses})
    return {s: {"model": ErrorBody, "description": _DESCRIPTIONS.get(s, "Error")} for s in codes}


# What each kind of error the services raise means to a client. A test walks every
# AgentCoreError subclass and checks its type is here: a new kind of error needs its status.
_STATUS_BY_TYPE: Final[dict[str, int]] = {
    "bus_timeout": 503,  # a backend did not answer in time
    "schema_error": 400,  # a value the backend refused (an id, a path, a name)
    "tool_error": 400,
    "permission_denied": 400,
    "conflict": 409,  # the session is busy
    "task_error": 409,  # a task rule refused the change, or the session's lists are unusable
    "provider_error": 502,  # the model provider failed
    "config_error": 503,  # the deployment is misconfigured: not the client's fault, not a crash
    "file_store_error": 503,  # the file store is down or refused the server (see _core_status)
    "memory_proposal_error": 502,
    "run_error": 500,  # ends a run (its error payload), never an answer: escaping here is a bug
    "agent_core_error": 500,  # the base type itself: a bug, when raised bare
}


# File store refusals that are the request's doing; the rest (store unreachable, credentials
# refused) are the server's: 503 with Retry-After.
_FILE_REQUEST_FAULTS: Final[dict[str, int]] = {
    "invalid_key": 400,
    "file_changed": 409,
    "file_is_a_directory": 409,
}


# A client should try again after this long when a backend is down (503) or its disk full (507).
RETRY_AFTER_S = "1"


# Refusals of a state the request conflicts with (any ``conflict``-typed error is one too).
_CONFLICTS = frozenset({RefusalCode.INVALID_TRANSITION, RefusalCode.CONFLICT})


def is_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` means the bus or a service behind it is unreachable for now (a 503 that
    resolves by itself), as opposed to a fault of the request."""
    if isinstance(exc, ApiError):
        return exc.status == 503
    if isinstance(exc, AgentCoreError):
        return _core_status(exc) == 503
    return isinstance(exc, RedisConnectionError | RedisTimeoutError)


def _core_status(exc: AgentCoreError) -> int:
    code = exc.code
    if isinstance(exc, BusTimeoutError):
        return 503
    if code == RefusalCode.STORAGE_FULL:  # the database's disk is full: nothing was written
        return 507
    if code == "not_found" or code.endswith("_not_found"):
        return 404
    if exc.error_type == "conflict" or code in _CONFLICTS:
        return 409
    if exc.error_type == "storage_error":
        return 409 if not exc.retryable else 503
    if exc.error_type == "file_store_error" and exc.code in _FILE_REQUEST_FAULTS:
        return _FILE_REQUEST_FAULTS[exc.code]
    return _STATUS_BY_TYPE.get(exc.error_type, 500)


def _allowed(request: Request) -> str:
    """Every method some route serves at the request's path (Starlette's own ``Allow`` names
    only the first route that matched the path, while one path may have a route per method)."""
    methods: set[str] = set()
    for route in request.app.routes:
        match, _ = route.matches({**request.scope, "method": "GET"})
        if match is not Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    if "GET" in methods:
        methods.add("HEAD")
    return ", ".join(sorted(methods))


def _loc(loc: tuple[Any, ...] | list[Any]) -> str:
    return ".".join(str(p) for p in loc)


def install_error_handlers(app: FastAPI) -> None:
    """Route every failure through :func:`error_response`."""

    @app.exception_handler(ApiError)
    async def _api(_: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.code, exc.message, exc.details, exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        message = exc.detail if isinstance(exc.detail, str) else code.replace("_", " ")
        headers = exc.headers
        if exc.status_code == 405:
            headers = {**(headers or {}), "Allow": _allowed(request)}
        return error_response(exc.status_code, code, message, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        # Field locations, messages and error types only: never echo the offending input back.
        errors = [
            {"field": _loc(e.get("loc", ())), "message": str(e.get("msg", "")), "type": e["type"]}
            for e in exc.errors()
        ]
        first = errors[0]["field"] if errors else "body"
        return error_response(
            422, "validation_error", f"invalid request: {first}", {"errors": errors}
        )

    @app.exception_handler(AgentCoreError)
    async def _core(_: Request, exc: AgentCoreError) -> JSONResponse:
        payload = exc.to_payload()
        status = _core_status(exc)
        if status >= 500:
            log.error("request failed: %s %s", payload.code, payload.message)
        retry = {"Retry-After": RETRY_AFTER_S} if status in (503, 507) else None
        return error_response(status, payload.code, payload.message, payload.details, retry)

    @app.exception_handler(RedisError)
    async def _bus_down(request: Request, exc: RedisError) -> JSONResponse:
        # The bus is down or restarting (the supervisor restarts it within seconds): retryable.
        log.error("request failed: bus_unavailable (%s)", type(exc).__name__)
        if isinstance(exc, RedisConnectionError):
            # A restarted bus closed every connection the pool holds idle; each would fail one
            # more request when next taken. Drop them now: the next requests connect afresh.
            gateway = getattr(request.app.state, "gateway", None)
            if gateway is not None:
                pool = gateway.ctx.redis.connection_pool
                with contextlib.suppress(Exception):
                    await pool.disconnect(inuse_connections=False)
        return error_response(
            503,
            "bus_unavailable",
            "the message bus is not reachable; try again shortly",
            headers={"Retry-After": RETRY_AFTER_S},
        )

    @app.exception_handler(Exception)
    async def _unhandled(_: Request, exc: Exception) -> JSONResponse:
        # The type name only: the exception text may hold user data or secrets.
        log.error("unhandled %s in a request", type(exc).__name__)
        return error_response(500, "internal_error", "internal error")
