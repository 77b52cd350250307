"""The SDK's exceptions: one tree, mapped from the API's status codes and error codes.

::

    SoongError                      anything this SDK raises
    ├── TransportError              the gateway could not be reached, or a connection broke
    │   └── StreamLostError         a run's event stream could not be resumed before the deadline
    ├── ProtocolError               an answer that is not what the API promises
    └── APIError                    the gateway answered with an error body (status, code, message)
        ├── BadRequestError         400
        ├── AuthenticationError     401
        ├── PermissionDeniedError   403
        ├── NotFoundError           404 (also another account's ids)
        ├── ConflictError           409 (a busy or archived session, a decided permission, …)
        ├── PayloadTooLargeError    413
        ├── PreconditionFailedError 412 (a memory file changed since its ETag was read)
        ├── PreconditionRequiredError 428 (a memory write without If-Match)
        ├── ValidationError         422 (``errors`` name each field by its path)
        ├── RateLimitedError        429 (``retry_after_s``)
        └── ServerError             5xx
            └── ServiceUnavailableError 503 (``retry_after_s`` when given)

Every :class:`APIError` carries the API's stable ``code`` (``not_found``, ``session_busy``,
``rate_limited``, …): branch on it rather than on the message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

__all__ = [
    "APIError",
    "AuthenticationError",
    "BadRequestError",
    "ConflictError",
    "FieldError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "PreconditionFailedError",
    "PreconditionRequiredError",
    "ProtocolError",
    "RateLimitedError",
    "ServerError",
    "ServiceUnavailableError",
    "SoongError",
    "StreamLostError",
    "TransportError",
    "ValidationError",
    "error_from_response",
]


class SoongError(Exception):
    """The root of every exception this SDK raises."""


class TransportError(SoongError):
    """The gateway could not be reached, or the connection broke (after any retries)."""


class StreamLostError(TransportError):
    """A run's event stream broke and could not be resumed before the reconnect deadline.

    ``last_event_id`` is where a later :meth:`~soong_agent.AsyncRun.events` call can resume.
    """

    def __init__(self, message: str, *, run_id: str | None, last_event_id: str | None) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.last_event_id = last_event_id


class ProtocolError(SoongError):
    """The gateway answered something the API does not promise (a bad body or frame)."""


@dataclass(frozen=True, slots=True)
class FieldError:
    """One invalid field of a request: its path (``("body", "content", 0, "text")``) and why."""

    path: tuple[str | int, ...]
    message: str
    type: str

    @property
    def field(self) -> str:
        """The path joined with dots, as the API names it (``body.content.0.text``)."""
        return ".".join(str(p) for p in self.path)


class APIError(SoongError):
    """The gateway answered with an error: HTTP ``status``, stable ``code``, ``message``."""

    status: int

    def __init__(
        self, status: int, code: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}


class BadRequestError(APIError):
    """400: a malformed request (a bad file name, a bad Last-Event-ID, …)."""


class AuthenticationError(APIError):
    """401: a missing, unknown or revoked API key."""


class PermissionDeniedError(APIError):
    """403."""


class NotFoundError(APIError):
    """404: no such thing for this key's account (another account's ids answer the same)."""


class ConflictError(APIError):
    """409: the request conflicts with the current state (``code`` says which)."""


class PayloadTooLargeError(APIError):
    """413: the body is over the gateway's limit (``details["limit_bytes"]`` when given)."""


class PreconditionFailedError(APIError):
    """412: the ETag sent in If-Match is stale; read the file again."""


class PreconditionRequiredError(APIError):
    """428: the write needs an If-Match."""


class ValidationError(APIError):
    """422: the request failed validation; ``errors`` name every invalid field by its path."""

    def __init__(
        self, status: int, code: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(status, code, message, details)
        self.errors = [
            _field_error(e) for e in self.details.get("errors", []) if isinstance(e, dict)
        ]

    @property
    def field(self) -> str | None:
        """The first invalid field's dotted path, if the API named one."""
        return self.errors[0].field if self.errors else None


class _Retryable(APIError):
    """An error whose answer may say when to try again (``Retry-After``)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(status, code, message, details)
        self.retry_after_s = retry_after_s


class RateLimitedError(_Retryable):
    """429: too many requests or streams for this key; try again after ``retry_after_s``."""


class ServerError(_Retryable):
    """5xx: the gateway or a service behind it failed."""


class ServiceUnavailableError(ServerError):
    """503: a service behind the gateway did not answer in time (it may have acted)."""


_BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    412: PreconditionFailedError,
    413: PayloadTooLargeError,
    422: ValidationError,
    428: PreconditionRequiredError,
    429: RateLimitedError,
    503: ServiceUnavailableError,
}


def _field_error(raw: dict[str, Any]) -> FieldError:
    field = raw.get("field", "")
    parts = str(field).split(".") if field else []
    path = tuple(int(p) if p.isdigit() else p for p in parts)
    return FieldError(path=path, message=str(raw.get("message", "")), type=str(raw.get("type", "")))


def retry_after(response: httpx.Response) -> float | None:
    """The seconds a ``Retry-After`` header asks for (numeric form only), or ``None``."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def error_from_response(response: httpx.Response) -> APIError:
    """The exception for an error answer (its body read already)."""
    status = response.status_code
    code, message = f"http_{status}", response.reason_phrase or "error"
    details: dict[str, Any] = {}
    try:
        body = json.loads(response.content)
        error = body["error"]
        code, message = str(error["code"]), str(error["message"])
        details = error.get("details") or {}
    except (ValueError, KeyError, TypeError):
        pass  # not the API's error body (a proxy's page, say): keep the status's own words
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else APIError)
    if issubclass(cls, _Retryable):
        return cls(status, code, message, details, retry_after_s=retry_after(response))
    return cls(status, code, message, details)
