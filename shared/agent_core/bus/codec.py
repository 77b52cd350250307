"""Decoding stream entries: FastStream's binary envelope, or plain field maps from other writers.

Decoding never raises anything but :class:`DecodeError`, which says why (``malformed``,
``unknown_type`` or ``invalid``) so the consumer can dead-letter the entry with its reason.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from agent_core.bus.contracts.dead_letter import DeadLetterReason

__all__ = ["DecodeError", "decode_fields", "validate_body"]

T = TypeVar("T")

_DATA_FIELD = b"__data__"
_UNKNOWN_TAG_ERRORS = frozenset({"union_tag_invalid", "union_tag_not_found"})


class DecodeError(Exception):
    """An entry that cannot become a typed message; ``reason`` is the dead-letter reason."""

    def __init__(self, reason: DeadLetterReason, error: str) -> None:
        super().__init__(error)
        self.reason: DeadLetterReason = reason
        self.error = error


# The first bytes of FastStream's binary envelope (``BinaryMessageFormatV1.IDENTITY_HEADER``, a
# test holds them equal): entries that other FastStream publishers write are still read.
FASTSTREAM_ENVELOPE = b"\x89BIN\r\n\x1a\n"


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def decode_fields(fields: Mapping[bytes | str, bytes | str]) -> tuple[bytes, dict[str, str]]:
    """Return ``(body, headers)`` of a raw stream entry.

    FastStream writes one field ``__data__`` holding its binary envelope; any other field map
    (a raw ``XADD`` from a script or another language) is read as a flat JSON object.
    """
    raw = fields.get(_DATA_FIELD, fields.get(_DATA_FIELD.decode()))
    if raw is None:
        if not fields:
            raise DecodeError("malformed", "entry has no fields (deleted or trimmed)")
        flat = {_text(k): _text(v) for k, v in fields.items()}
        return json.dumps(flat).encode(), {}
    data = raw if isinstance(raw, bytes) else raw.encode()
    if not data.startswith(FASTSTREAM_ENVELOPE):
        # Written by our own publisher (plain JSON body, headers as sibling fields) or by
        # someone else: keep the bytes as the body, the schema check will judge them.
        headers = {_text(k): _text(v) for k, v in fields.items() if _text(k) != "__data__"}
        return data, headers
    # Imported here: only an entry a FastStream publisher wrote needs the library (a process that
    # never meets one never imports it).
    from faststream.redis.parser.binary import BinaryMessageFormatV1

    try:
        body, headers = BinaryMessageFormatV1.parse(data)
    except Exception as exc:  # the parser raises struct/index errors on truncated envelopes
        raise DecodeError("malformed", f"broken message envelope: {type(exc).__name__}") from exc
    return body, {str(k): str(v) for k, v in headers.items()}


def validate_body(adapter: TypeAdapter[T], body: bytes) -> T:
    """Parse and validate ``body`` against the stream's union, classifying failures.

    Parsing and validation are one pass in pydantic-core (no intermediate Python objects): every
    consumer pays this once per entry, so it is on the hot path of every service.
    """
    try:
        return adapter.validate_json(body)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        if any(e["type"] == "json_invalid" for e in errors):
            raise DecodeError("malformed", f"body is not JSON: {_summarize(errors)}") from exc
        if any(e["type"] in _UNKNOWN_TAG_ERRORS for e in errors):
            raise DecodeError("unknown_type", _summarize(errors)) from exc
        raise DecodeError("invalid", _summarize(errors)) from exc


def _summarize(errors: list[Any]) -> str:
    parts = []
    for err in errors[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "<root>"
        parts.append(f"{loc}: {err['msg']}")
    more = f" (+{len(errors) - 5} more)" if len(errors) > 5 else ""
    return "; ".join(parts) + more
