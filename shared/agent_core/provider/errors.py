"""Turning HTTP statuses, provider error types and transport failures into ``ProviderError``.

Every ``ProviderError`` a built-in adapter raises carries one :class:`ProviderErrorCode`.
Retryable: 408, 409, 429, 5xx (and 529 "overloaded"), timeouts, dropped or refused connections,
streams that end early. Not retryable: other 4xx (400, 401, 403, 404, 413, 422, …), a prompt over
the context window (``context_length_exceeded``: a new request fails the same way until the
context shrinks), malformed responses and capability errors. Every message is redacted when the
error is built, so even ``str(err)`` is safe to log.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from agent_core.errors import ProviderError, redact, redact_obj

__all__ = [
    "ProviderErrorCode",
    "capability_error",
    "connection_error",
    "incomplete_error",
    "is_context_overflow",
    "malformed_error",
    "parse_retry_after",
    "status_error",
    "stream_error",
    "timeout_error",
]


class ProviderErrorCode(StrEnum):
    """The ``code`` of a provider failure, whichever provider reported it."""

    BAD_REQUEST = "bad_request"
    AUTHENTICATION_FAILED = "authentication_failed"
    PAYMENT_REQUIRED = "payment_required"
    PERMISSION_DENIED = "permission_denied"
    NOT_FOUND = "not_found"
    TIMEOUT = "timeout"
    CONFLICT = "conflict"
    REQUEST_TOO_LARGE = "request_too_large"  # the body's bytes, not its tokens
    UNPROCESSABLE = "unprocessable"
    RATE_LIMITED = "rate_limited"
    OVERLOADED = "overloaded"
    SERVER_ERROR = "server_error"
    HTTP_ERROR = "http_error"
    PROVIDER_ERROR = "provider_error"  # an error the provider did not classify
    CONNECTION_ERROR = "connection_error"
    INCOMPLETE_RESPONSE = "incomplete_response"  # the stream ended before its end marker
    MALFORMED_RESPONSE = "malformed_response"
    CAPABILITY_UNSUPPORTED = "capability_unsupported"
    # The prompt does not fit the model's context window (OpenAI context_length_exceeded,
    # Anthropic "prompt is too long", Ollama with truncate=false, llama.cpp, vLLM).
    CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"
    # Not raised by adapters (they yield ``tool_call_invalid`` instead): the codes the loop's
    # error result and ``tool_failed`` event carry for such a call.
    INVALID_TOOL_ARGUMENTS = "invalid_tool_arguments"
    TOOL_CALL_TRUNCATED = "tool_call_truncated"


C = ProviderErrorCode

_STATUS_CODES: dict[int, ProviderErrorCode] = {
    400: C.BAD_REQUEST,
    401: C.AUTHENTICATION_FAILED,
    402: C.PAYMENT_REQUIRED,
    403: C.PERMISSION_DENIED,
    404: C.NOT_FOUND,
    408: C.TIMEOUT,
    409: C.CONFLICT,
    413: C.REQUEST_TOO_LARGE,
    422: C.UNPROCESSABLE,
    429: C.RATE_LIMITED,
    529: C.OVERLOADED,
}
_RETRYABLE_STATUSES = frozenset({408, 409, 429})

# Error types reported inside a stream or an error body (Anthropic's names; OpenAI's
# "server_error" / "rate_limit_exceeded" map onto the same codes).
_TYPE_CODES: dict[str, tuple[ProviderErrorCode, bool]] = {
    "overloaded_error": (C.OVERLOADED, True),
    "api_error": (C.SERVER_ERROR, True),
    "server_error": (C.SERVER_ERROR, True),
    "rate_limit_error": (C.RATE_LIMITED, True),
    "rate_limit_exceeded": (C.RATE_LIMITED, True),
    "timeout_error": (C.TIMEOUT, True),
    "invalid_request_error": (C.BAD_REQUEST, False),
    "authentication_error": (C.AUTHENTICATION_FAILED, False),
    "permission_error": (C.PERMISSION_DENIED, False),
    "not_found_error": (C.NOT_FOUND, False),
    "request_too_large": (C.REQUEST_TOO_LARGE, False),
}

# How each server words "the prompt does not fit": OpenAI ("This model's maximum context length is
# N tokens…", code context_length_exceeded), Anthropic ("prompt is too long: N tokens > M
# maximum", "input length and `max_tokens` exceed context limit: …"), Ollama ("the input length
# exceeds the context length", "the prompt is longer than the context length…"), llama.cpp
# (type exceed_context_size_error, "…exceeds the available context size…"), vLLM (OpenAI's
# wording). Bounded repetitions only: linear time on any message.
_OVERFLOW = re.compile(
    r"context_length_exceeded|exceed_context_size|prompt is too long|maximum context length"
    r"|(?:exceeds?|longer than) (?:the |its )?(?:[\w`]+ ){0,2}context (?:length|limit|size|window)",
    re.IGNORECASE,
)
# The sizes, where the wording carries them (prompt tokens first, then the window).
_SIZES = (
    re.compile(r"prompt is too long: (\d+) tokens > (\d+) maximum"),
    re.compile(r"exceed context limit: (\d+) \+ \d+ > (\d+)"),
    re.compile(r"resulted in (\d+) tokens"),
    re.compile(r"request \((\d+) tokens\) exceeds the available context size \((\d+) tokens\)"),
)
_LIMIT = re.compile(r"maximum context length is (\d+) tokens")


def parse_retry_after(
    headers: Mapping[str, str] | None, *, now: float | None = None
) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date,
    counted from ``now``, a Unix time: the current time unless given)."""
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
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


def is_context_overflow(message: str, *markers: str | None) -> bool:
    """Whether an error says the prompt does not fit the context window (its message, or a type
    or code such as OpenAI's ``context_length_exceeded``)."""
    return any(m and _OVERFLOW.search(m) for m in (message, *markers))


def _overflow_sizes(message: str, body: Any) -> dict[str, int]:
    """``prompt_tokens`` and ``context_limit`` when the error states them."""
    sizes: dict[str, int] = {}
    for pattern in _SIZES:
        if match := pattern.search(message):
            sizes["prompt_tokens"] = int(match.group(1))
            if match.lastindex == 2:
                sizes["context_limit"] = int(match.group(2))
            break
    if "context_limit" not in sizes and (match := _LIMIT.search(message)):
        sizes["context_limit"] = int(match.group(1))
    if isinstance(body, Mapping):  # llama.cpp states both as fields
        for field, key in (("n_prompt_tokens", "prompt_tokens"), ("n_ctx", "context_limit")):
            if isinstance(body.get(field), int):
                sizes.setdefault(key, body[field])
    return sizes


def status_error(
    provider: str,
    status: int,
    message: str,
    *,
    headers: Mapping[str, str] | None = None,
    error_type: str | None = None,
    error_code: str | None = None,
    body: Any = None,
    cause: BaseException | None = None,
) -> ProviderError:
    """A ``ProviderError`` for an HTTP error status (``retry_after_s`` from the headers).

    A 4xx that says the prompt does not fit the context window is ``context_length_exceeded``
    (``details`` then carry ``prompt_tokens`` / ``context_limit`` when the error states them).
    """
    code = _STATUS_CODES.get(status, C.SERVER_ERROR if status >= 500 else C.HTTP_ERROR)
    retryable = status in _RETRYABLE_STATUSES or status >= 500
    details: dict[str, Any] = {"status_code": status}
    if error_type in _TYPE_CODES and status < 400:
        code, retryable = _TYPE_CODES[error_type]  # an error event inside a 200 stream
    elif 400 <= status < 500 and is_context_overflow(message, error_type, error_code):
        code, retryable = C.CONTEXT_LENGTH_EXCEEDED, False
        details.update(_overflow_sizes(message, body))
    if error_type:
        details["error_type"] = error_type
    if error_code:
        details["error_code"] = error_code
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
    code, retryable = _TYPE_CODES.get(error_type or "", (C.PROVIDER_ERROR, False))
    if is_context_overflow(message, error_type):
        code, retryable = C.CONTEXT_LENGTH_EXCEEDED, False
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
        C.CONNECTION_ERROR,
        redact(f"{provider}: {text}"),
        retryable=True,
        cause=cause,
        provider=provider,
    )


def timeout_error(provider: str, cause: BaseException) -> ProviderError:
    """A retryable ``ProviderError`` for a connect or read timeout."""
    return ProviderError(
        C.TIMEOUT, f"{provider}: request timed out", retryable=True, cause=cause, provider=provider
    )


def incomplete_error(provider: str, what: str) -> ProviderError:
    """A retryable ``ProviderError``: the stream ended before its end marker (``what`` says which
    one). A body cut short (a dead upstream behind a proxy, a restarted server) ends this way."""
    return ProviderError(
        C.INCOMPLETE_RESPONSE,
        f"{provider}: the stream ended {what}",
        retryable=True,
        provider=provider,
    )


def malformed_error(provider: str, what: str, cause: BaseException | None = None) -> ProviderError:
    """A non-retryable ``ProviderError`` for a chunk or body that cannot be parsed."""
    return ProviderError(
        C.MALFORMED_RESPONSE,
        redact(f"{provider}: malformed response: {what}"),
        cause=cause,
        provider=provider,
    )


def capability_error(provider: str, model: str, capability: str) -> ProviderError:
    """A non-retryable ``ProviderError``: the model lacks a capability the request needs."""
    return ProviderError(
        C.CAPABILITY_UNSUPPORTED,
        f"{provider}: model {model!r} does not support {capability}",
        details={"model": model, "capability": capability},
        provider=provider,
    )
