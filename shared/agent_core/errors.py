"""The one exception root of agent_core, its error payloads, and redaction.

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

import re
from collections.abc import Mapping
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
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

REDACTED = "[REDACTED]"

# The words that make a key name a secret, in the last pattern below and its needle.
_KEY_WORDS: Final = (
    r"api[_\-]?key|apikey|passw(?:or)?d|pwd|secret|token(?!s|_count)|access[_\-]?key|"
    r"private[_\-]?key|auth"
)

# Order matters: URL credentials first, so the password inside a URL is caught as a whole.
# Every pattern is linear-time over any input (it runs over user text and tool output): a match
# starts only where a run begins, and repetitions before something that can fail are bounded.
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # scheme://user:password@host → scheme://[REDACTED]@host
    (
        re.compile(
            r"(?i)(?<![a-z0-9+.\-])([a-z][a-z0-9+.\-]{0,30}://)[^\s/@:]{0,256}(?::[^\s/@]{0,256})?@"
        ),
        r"\1" + REDACTED + "@",
    ),
    # Authorization headers and bearer tokens.
    (re.compile(r"(?i)\b(bearer|basic)\s{1,8}[A-Za-z0-9._~+/=\-]{8,}"), r"\1 " + REDACTED),
    # Well-known API key shapes: OpenAI, Anthropic, GitHub, Slack, AWS, Google, soong-agent's own.
    (re.compile(r"\bsk-(?:ant-)?[A-Za-z0-9_\-]{12,}"), REDACTED),
    (re.compile(r"\bsa_(?:live|dev)_[A-Za-z0-9_\-]{12,}"), REDACTED),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"), REDACTED),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{10,}"), REDACTED),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), REDACTED),
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"), REDACTED),
    # key=value / key: value pairs whose key names a secret (api_key, password, token, secret, …).
    # A key is a whole run of its characters (at most 40 + 11 + 40) just before the separator; the
    # lookahead finds such a run first, possessively (it never backtracks), so at the start of
    # every other word the pattern fails at once instead of trying each word of the key in turn.
    (
        re.compile(
            r"(?i)(?<![A-Za-z0-9_\-])(?=[A-Za-z0-9_\-]{1,91}+\"?\s{0,8}[:=])"
            rf"([A-Za-z0-9_\-]{{0,40}}?(?:{_KEY_WORDS})[A-Za-z0-9_\-]{{0,40}})"
            r"(\"?\s{0,8}[:=]\s{0,8}\"?)([^\s\"',;&]+)"
        ),
        r"\1\2" + REDACTED,
    ),
)

_SECRET_KEY = re.compile(
    r"(?i)(api[_\-]?key|apikey|passw(or)?d|pwd|secret|token(?!s|_count)|authorization|access[_\-]?key|"
    r"private[_\-]?key|credential|cookie)"
)


# The last pattern's second needle: a secret-naming word, the rest of its key and the separator
# (what that pattern cannot match without). A plain substring ("token") would send every log line
# that counts tokens (input_tokens=…) through the last pattern, and the word alone every text that
# mentions an author; the pattern costs ~40 µs a KiB of text, this scan a few.
_SECRET_PAIR: Final = re.compile(rf"(?:{_KEY_WORDS})[a-z0-9_\-]{{0,40}}+\"?\s{{0,8}}[:=]")
# For ASCII text, what each pattern above cannot match without (in the same order), looked up in
# the lowercased text: groups that must all hold, each a few strings of which one must occur, or
# a pattern that must match — a cheap test that lets most texts skip most patterns. Non-ASCII text
# runs every pattern: case-insensitive matching of non-ASCII letters is not plain lowercasing.
_Group = tuple[str, ...] | re.Pattern[str]
_NEEDLES: Final[tuple[tuple[_Group, ...], ...]] = (
    (("://",), ("@",)),
    (("bearer", "basic"),),
    (("sk-",),),
    (("sa_",),),
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),),
    (("xox",),),
    (("akia",),),
    (("aiza",),),
    ((":", "="), _SECRET_PAIR),
)
# A text holding no pattern's first needle can match none: most texts (ids, names, figures)
# leave at this one scan.
_ANY_NEEDLE: Final = re.compile(
    "|".join(re.escape(n) for groups in _NEEDLES if isinstance(groups[0], tuple) for n in groups[0])
)


def _may_match(lowered: str, groups: tuple[_Group, ...]) -> bool:
    # Plain loops: redact runs on every log line, and generators inside all()/any() cost more
    # than the needles' own tests.
    for group in groups:
        if isinstance(group, tuple):
            for needle in group:
                if needle in lowered:
                    break
            else:
                return False
        elif group.search(lowered) is None:
            return False
    return True


def redact(text: str) -> str:
    """Return ``text`` with API keys, bearer tokens, passwords and URL credentials replaced.

    The function is total and idempotent: ``redact(redact(s)) == redact(s)``.
    """
    ascii_only = text.isascii()
    lowered = text.lower() if ascii_only else ""
    if ascii_only and _ANY_NEEDLE.search(lowered) is None:
        return text
    for (pattern, replacement), needles in zip(_PATTERNS, _NEEDLES, strict=True):
        if ascii_only and not _may_match(lowered, needles):
            continue
        replaced = pattern.sub(replacement, text)
        if replaced != text:
            text = replaced
            lowered = text.lower()  # "[REDACTED]" is ASCII: still ascii_only
    return text


def redact_obj(obj: Any) -> Any:
    """Redact strings anywhere inside JSON-like data; values under secret-named keys are dropped."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, Mapping):
        return {
            k: (REDACTED if isinstance(k, str) and _SECRET_KEY.search(k) else redact_obj(v))
            for k, v in obj.items()
        }
    if isinstance(obj, list | tuple):
        return [redact_obj(v) for v in obj]
    return obj


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
