"""What a handler learns about the entry it processes, and how replies travel."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["HEADER_CORRELATION_ID", "HEADER_REPLY_TO", "Delivery", "encode_reply", "decode_reply"]

# Our own header names: FastStream treats ``reply_to`` specially and would publish the
# handler's return value itself, so request/reply uses these instead.
HEADER_REPLY_TO = "x-reply-to"
HEADER_CORRELATION_ID = "x-correlation-id"


@dataclass(frozen=True, slots=True)
class Delivery:
    """One delivery of a stream entry to a handler."""

    stream: str
    entry_id: str
    deliveries: int = 1
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def reply_to(self) -> str | None:
        """The Pub/Sub channel the sender waits on, if this is a request."""
        return self.headers.get(HEADER_REPLY_TO)

    @property
    def correlation_id(self) -> str | None:
        """The id the sender matches the reply with."""
        return self.headers.get(HEADER_CORRELATION_ID)


def encode_reply(correlation_id: str, body: bytes) -> bytes:
    """A reply frame: ``<correlation id>\\n<json body>``."""
    return correlation_id.encode() + b"\n" + body


def decode_reply(frame: bytes) -> tuple[str, bytes]:
    """Split a reply frame into ``(correlation_id, body)``."""
    cid, _, body = frame.partition(b"\n")
    return cid.decode("utf-8", "replace"), body
