"""Turning HTTP statuses, provider error types and transport failures into ``ProviderError``.

Retryable: 408, 409, 429, 5xx (and 529 "overloaded"), timeouts, dropped or refused connections.
Not retryable: other 4xx (400, 401, 403, 404, 413, 422, …), malformed responses, invalid tool
arguments and capability errors. Every message is redacted when the error is built, so even
``str(err)`` is safe to log.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from typing import Any

from agent_core.errors import ProviderError, redact, redact_obj

__all__ = [
    "capability_error",
    "connection_error",
    "malformed_error",
    "parse_retry_after",
    "status_error",
    "stream_error",
    "timeout_error",
]

_STATUS_CODES: dict[int, str] = {
    400: "bad_request",
    401: "authentication_failed",
    402: "payment_required",
    403: "permission_denied",
    404: "not_found",
    408: "timeout",
    409: "conflict",
    413: "request_too_large",
    422: "unprocessable",
    429: "rate_limited",
    529: "overloaded",
}
_RETRYABLE_STATUSES = frozenset({408, 409, 429})

# Error types reported inside a stream or an error body (Anthropic's names; OpenAI's
# "server_error" / "rate_limit_exceeded" map onto the same codes).
_TYPE_CODES: dict[str, tuple[str, bool]] = {
    "overloaded_error": ("overloaded", True),
    "api_error": ("server_error", True),
    "server_error": ("server_error", True),
    "rate_limit_error": ("rate_limited", True),
    "rate_limit_exceeded": ("rate_limited", True),
    "timeout_error": ("timeout", True),
    "invalid_request_error": ("bad_request", False),
    "authentication_error": ("authentication_failed", False),
    "permission_error": ("permission_denied", False),
    "not_found_error": ("not_found", False),
    "request_too_large": ("request_too_large", False),
}


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    if (ms := lowered.get("retry-after-ms")) is not None:
        try:
            return max(float(ms) / 1000.0, 0.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def status_error(
    provider: str,
    status: int,
    message: str,
    *,
    headers: Mapping[str, str] | None = None,
    error_type: str | None = None,
    body: Any = None,
    cause: BaseException | None = None,
) -> ProviderError:
    """A ``ProviderError`` for an HTTP error status (``retry_after_s`` from the headers)."""
    code = _STATUS_CODES.get(status, "server_error" if status >= 500 else "http_error")
    retryable = status in _RETRYABLE_STATUSES or status >= 500
    if error_type in _TYPE_CODES and status < 400:
        code, retryable = _TYPE_CODES[error_type]  # an error event inside a 200 stream
    details: dict[str, Any] = {"status_code": status}
    if error_type:
        details["error_type"] = error_type
    if body is not None:
        details["body"] = redact_obj(body)
    return ProviderError(
        code,
        redact(f"{provider}: {message}"),
        retryable=retryable,
        details=details,
        cause=cause,
        provider=provider,
        status_code=status if status >= 400 else None,
        retry_after_s=parse_retry_after(headers),
    )


def stream_error(provider: str, error_type: str | None, message: str) -> ProviderError:
    """A ``ProviderError`` for an error the provider reported inside a streamed response."""
    code, retryable = _TYPE_CODES.get(error_type or "", ("provider_error", False))
    details = {"error_type": error_type} if error_type else {}
    return ProviderError(
        code,
        redact(f"{provider}: {message}"),
        retryable=retryable,
        details=details,
        provider=provider,
    )


def connection_error(provider: str, cause: BaseException, *, message: str = "") -> ProviderError:
    """A retryable ``ProviderError`` for a refused, reset or dropped connection."""
    text = message or f"connection failed or dropped ({type(cause).__name__})"
    return ProviderError(
        "connection_error",
        redact(f"{provider}: {text}"),
        retryable=True,
        cause=cause,
        provider=provider,
    )


def timeout_error(provider: str, cause: BaseException) -> ProviderError:
    """A retryable ``ProviderError`` for a connect or read timeout."""
    return ProviderError(
        "timeout", f"{provider}: request timed out", retryable=True, cause=cause, provider=provider
    )


def malformed_error(provider: str, what: str, cause: BaseException | None = None) -> ProviderError:
    """A non-retryable ``ProviderError`` for a chunk or body that cannot be parsed."""
    return ProviderError(
        "malformed_response",
        redact(f"{provider}: malformed response: {what}"),
        cause=cause,
        provider=provider,
    )


def capability_error(provider: str, model: str, capability: str) -> ProviderError:
    """A non-retryable ``ProviderError``: the model lacks a capability the request needs."""
    return ProviderError(
        "capability_unsupported",
        f"{provider}: model {model!r} does not support {capability}",
        details={"model": model, "capability": capability},
        provider=provider,
    )
