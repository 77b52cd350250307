"""Identifiers: prefixed strings with one validator, session ids, and the table-name sanitizer.

Every id is a plain string so it reads the same in JSON, SQLite, Markdown frontmatter and WAL
records. The prefix says what it names; the body is lowercase hex from a CSPRNG.

Session ids become part of SQL table names (``nodes_<session_id>``), so they are generated here and
must pass :func:`sanitize_identifier` — the only gate between outside input and a table name.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, Literal

if TYPE_CHECKING:
    from agent_core.errors import SchemaError

__all__ = [
    "IDENTIFIER_PATTERN",
    "ID_BODY_PATTERN",
    "ID_PREFIXES",
    "id_pattern",
    "SESSION_ID_PATTERN",
    "IdPrefix",
    "derived_id",
    "is_valid_id",
    "new_id",
    "new_session_id",
    "sanitize_identifier",
    "validate_id",
    "validate_session_id",
]

IdPrefix = Literal["node", "run", "agent", "evt", "artifact", "task", "plan", "acct", "cmd", "asst"]
ID_PREFIXES: Final[frozenset[str]] = frozenset(
    ("node", "run", "agent", "evt", "artifact", "task", "plan", "acct", "cmd", "asst")
)

# 16 hex chars = 64 random bits: collisions are negligible even at millions of ids per session.
_ID_BODY_HEX = 16
# The id rules as patterns, shared with the pydantic field types (which check them natively).
# ASCII only: str.isalnum(), \w and \d would admit other scripts (e.g. Cyrillic 'а').
ID_BODY_PATTERN: Final = "[A-Za-z0-9_]{1,64}"
IDENTIFIER_PATTERN: Final = "[A-Za-z0-9_]{1,64}"
SESSION_ID_PATTERN: Final = "sess_[0-9]{8}_[0-9]{6}_[a-z0-9]{4,16}"
_ID_BODY = re.compile(ID_BODY_PATTERN)
_IDENTIFIER = re.compile(r"[A-Za-z0-9_]+")
_MAX_IDENTIFIER = 64
_SESSION_ID = re.compile(SESSION_ID_PATTERN)


def id_pattern(prefix: IdPrefix) -> str:
    """The anchored pattern of ``<prefix>_…`` ids, for pydantic fields (same rule as
    :func:`is_valid_id`)."""
    return rf"^{prefix}_{ID_BODY_PATTERN}$"


def new_id(prefix: IdPrefix) -> str:
    """A new random id ``<prefix>_<16 hex>``."""
    return f"{prefix}_{secrets.token_hex(_ID_BODY_HEX // 2)}"


def derived_id(prefix: IdPrefix, *parts: str) -> str:
    """The id ``<prefix>_<16 hex>`` that ``parts`` always give (SHA-256 of them, each
    length-prefixed so that no two lists of parts give one string): for a request a client may
    repeat, whose repeats must name what the first one created."""
    digest = hashlib.sha256(prefix.encode())
    for part in parts:
        data = part.encode()
        digest.update(len(data).to_bytes(8, "big") + data)
    return f"{prefix}_{digest.hexdigest()[:_ID_BODY_HEX]}"


def is_valid_id(value: object, prefix: IdPrefix) -> bool:
    """Whether ``value`` is a string id with the given prefix and a safe body."""
    if not isinstance(value, str) or not value.startswith(prefix + "_"):
        return False
    return _ID_BODY.fullmatch(value[len(prefix) + 1 :]) is not None


def validate_id(value: object, prefix: IdPrefix) -> str:
    """Return ``value`` if it is a valid ``<prefix>_…`` id, else raise :class:`SchemaError`."""
    if not is_valid_id(value, prefix):
        raise _refused(
            "invalid_id",
            f"expected an id starting with {prefix + '_'!r}",
            details={"prefix": prefix, "value": repr(value)[:80]},
        )
    assert isinstance(value, str)
    return value


def new_session_id(now: datetime | None = None) -> str:
    """A new session id ``sess_YYYYMMDD_HHMMSS_<16 hex>`` (UTC; 64 random bits in the suffix).

    The architecture asks that thousands of sessions a second never collide: with 64 bits, even
    100,000 ids in one second collide with probability ~3e-10.
    """
    stamp = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y%m%d_%H%M%S")
    return f"sess_{stamp}_{secrets.token_hex(8)}"


def sanitize_identifier(value: object) -> str:
    """Return ``value`` unchanged if it may become part of a SQL identifier, else raise.

    Admits only ``[A-Za-z0-9_]+`` of at most 64 characters. Nothing is rewritten: hostile input
    (quotes, ``;``, spaces, NUL, unicode look-alikes, empty, overlong) is refused, never "fixed",
    so two different inputs can never map to the same table.
    """
    if not isinstance(value, str) or len(value) > _MAX_IDENTIFIER:
        raise _refused("invalid_identifier", "identifier is not a short string")
    if _IDENTIFIER.fullmatch(value) is None:
        raise _refused(
            "invalid_identifier",
            "identifier may contain only ASCII letters, digits and underscores",
            details={"value": repr(value)[:80]},
        )
    return value


def validate_session_id(value: object) -> str:
    """Return ``value`` if it is a session id this core could have generated, else raise."""
    sanitize_identifier(value)
    assert isinstance(value, str)
    if _SESSION_ID.fullmatch(value) is None:
        raise _refused("invalid_session_id", "not a session id", details={"value": value[:80]})
    return value


def _refused(code: str, message: str, *, details: dict[str, Any] | None = None) -> SchemaError:
    # Imported when an id is refused, not with this module: the search index's child names
    # session tables (their ids checked here) and would otherwise load the error payloads'
    # pydantic models, most of its start-up.
    from agent_core.errors import SchemaError

    return SchemaError(code, message, details=details)
