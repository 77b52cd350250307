"""The one exception root of agent_core and its error payloads (redaction: ``agent_core.redaction``).

Hierarchy::

    AgentCoreError                 expected failure with a stable ``code``
    ├── ConfigError                bad or missing configuration (names key and file)
    ├── ProviderError              an LLM provider call failed (``retryable`` says whether to retry)
    ├── ToolError                  a tool failed or was called wrongly
    ├── StorageError               the storage-writer refused or failed a command
    ├── SchemaError                data that does not match its schema (bus message, file, row)
    ├── PermissionDeniedError      an agent action was denied (not the builtin ``PermissionError``)
    └── BusTimeoutError            a request over the bus got no reply in time (always retryable)

Exceptions become :class:`ErrorPayload` at the edges (run boundary, HTTP response, bus reply): the
payload carries no traceback, and its message and details pass through :func:`redact`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agent_core.redaction import REDACTED, redact, redact_obj

__all__ = [
    "REDACTED",
    "AgentCoreError",
    "BusTimeoutError",
    "ConfigError",
    "ErrorPayload",
    "PermissionDeniedError",
    "ProviderError",
    "ProviderErrorPayload",
    "SchemaError",
    "StorageError",
    "ToolError",
    "redact",
    "redact_obj",
]


class AgentCoreError(Exception):
    """An expected failure inside agent_core, with a stable machine-readable ``code``."""

    error_type = "agent_core_error"

    def __init__(
        self,
        code: str,
        message: str,
        *,
        retryable: bool = False,
        details: Mapping[str, Any] | None = None,
        cause: BaseException | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = retryable
        self.details: dict[str, Any] = dict(details or {})
        self.cause = cause
        if cause is not None:
            self.__cause__ = cause

    def to_payload(self) -> ErrorPayload:
        """The redacted, traceback-free payload of this error."""
        return ErrorPayload(
            type=self.error_type,
            code=self.code,
            message=redact(self.message),
            retryable=self.retryable,
            details=redact_obj(self.details),
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class ConfigError(AgentCoreError):
    """Configuration is missing, unknown or invalid; ``details`` names the key and the file."""

    error_type = "config_error"


class ProviderError(AgentCoreError):
    """An LLM provider call failed; ``retryable`` tells whether a new request may succeed."""

    error_type = "provider_error"

    def __init__(
        self,
        code: str,
        message: str,
        *,
        retryable: bool = False,
        details: Mapping[str, Any] | None = None,
        cause: BaseException | None = None,
        provider: str | None = None,
        status_code: int | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(code, message, retryable=retryable, details=details, cause=cause)
        self.provider = provider
        self.status_code = status_code
        self.retry_after_s = retry_after_s

    def to_payload(self) -> ProviderErrorPayload:
        """The redacted payload, with the provider and HTTP status when known."""
        base = super().to_payload()
        return ProviderErrorPayload(
            **base.model_dump(exclude={"type"}),
            type=self.error_type,
            provider=self.provider,
            status_code=self.status_code,
        )


class ToolError(AgentCoreError):
    """A tool failed or was called with arguments it cannot accept."""

    error_type = "tool_error"


class StorageError(AgentCoreError):
    """The storage-writer refused or failed a command."""

    error_type = "storage_error"


class SchemaError(AgentCoreError):
    """Data does not match its schema (a bus message, a file record, a stored row)."""

    error_type = "schema_error"


class PermissionDeniedError(AgentCoreError):
    """An agent action was denied by policy or by a person."""

    error_type = "permission_denied"


class BusTimeoutError(AgentCoreError):
    """A request over the bus got no reply in time; the request may still run, so retry it idempotently."""

    error_type = "bus_timeout"

    def __init__(self, code: str, message: str, **kwargs: Any) -> None:
        kwargs.setdefault("retryable", True)
        super().__init__(code, message, **kwargs)


class ErrorPayload(BaseModel):
    """An error as data: what runs, events and HTTP bodies carry. Never a traceback."""

    model_config = ConfigDict(extra="forbid")

    type: str
    code: str
    message: str
    retryable: bool = False
    details: dict[str, Any] = Field(default_factory=dict)
    redacted: Literal[True] = True

    @model_validator(mode="after")
    def _redact(self) -> ErrorPayload:
        # A payload may be built directly, not only through AgentCoreError.to_payload():
        # redacting here makes ``redacted=True`` true whichever way it was made.
        self.message = redact(self.message)
        self.details = redact_obj(self.details)
        return self


class ProviderErrorPayload(ErrorPayload):
    """An :class:`ErrorPayload` of a provider call."""

    provider: str | None = None
    status_code: int | None = None
