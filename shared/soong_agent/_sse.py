"""Server-Sent Events decoding: bytes as they arrive → frames → typed events.

The decoder follows the SSE framing rules (lines end with LF, CRLF or CR; a blank line ends a
frame; ``:`` starts a comment; several ``data:`` lines join with LF) and keeps an incomplete
frame until the rest arrives, so a frame cut by a dropped connection is never delivered. Frames
become the server's own event types: :data:`~agent_core.types.runtime.RuntimeEvent` members, and
:class:`~agent_core.types.runtime.TimelineEvent` for the ``timeline`` frames of a durable replay.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import pydantic

from agent_core.types.runtime import RUNTIME_EVENT, RuntimeEvent, TimelineEvent
from soong_agent._errors import ProtocolError

__all__ = ["Frame", "SseDecoder", "StreamEvent", "decode_event"]

StreamEvent = RuntimeEvent | TimelineEvent
"""What a run's stream yields: a runtime event, or a timeline row of a durable replay."""

_TIMELINE = "timeline"
# The union's compiled validator, called directly: ``TypeAdapter.validate_json`` passes half a
# dozen keyword options through Python on every call (~0.2 µs of the ~4 µs an event costs).
_VALIDATE_EVENT = RUNTIME_EVENT.validator.validate_json
# ``tuple.__new__`` with the class: a NamedTuple's own ``__new__`` is a Python function (~0.2 µs).
_new_tuple = tuple.__new__


class Frame(NamedTuple):
    """One complete SSE frame: its id (``None`` if it had none), event name and data.

    A named tuple: made once per event, and a tuple is the cheapest record Python makes."""

    id: str | None
    event: str
    data: bytes


class SseDecoder:
    """Feeds of bytes in, complete frames out (frames with no data, like ``retry:``, dropped)."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[Frame]:
        """The frames completed by ``chunk``, in order."""
        buffer = self._buffer + chunk
        if b"\r" in buffer:
            # A CR at the very end may be the first half of a CRLF: keep it for the next feed.
            tail = b"\r" if buffer.endswith(b"\r") else b""
            body = buffer[:-1] if tail else buffer
            buffer = body.replace(b"\r\n", b"\n").replace(b"\r", b"\n") + tail
        blocks = buffer.split(b"\n\n")
        self._buffer = blocks.pop()
        frames = []
        for block in blocks:
            frame = _parse(block)
            if frame is not None:
                frames.append(frame)
        return frames


# The gateway's own frames are exactly "id: …\nevent: …\ndata: <one line>": taken apart by one
# match in C (a third cheaper than partitions and checks in Python); anything else goes through
# the general rules of ``_parse_lines``.
_GATEWAY_FRAME = re.compile(rb"id: ([^\n]*)\nevent: ([^\n]*)\ndata: ([^\n]*)")


def _parse(block: bytes) -> Frame | None:
    match = _GATEWAY_FRAME.fullmatch(block)
    if match is not None:
        event_id, event, data = match.groups()
        return _new_tuple(Frame, (event_id.decode(), event.decode(), data))
    return _parse_lines(block)


def _parse_lines(block: bytes) -> Frame | None:
    event_id: str | None = None
    event = "message"
    data: list[bytes] = []
    for line in block.split(b"\n"):
        if not line or line.startswith(b":"):
            continue
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            data.append(value)
        elif name == b"event":
            event = value.decode()
        elif name == b"id":
            event_id = value.decode()
    if not data:
        return None
    return Frame(event_id, event, data[0] if len(data) == 1 else b"\n".join(data))


def decode_event(frame: Frame) -> StreamEvent:
    """The typed event of a frame; a frame that is not one is a :class:`ProtocolError`."""
    try:
        if frame.event == _TIMELINE:
            return TimelineEvent.model_validate_json(frame.data)
        event: RuntimeEvent = _VALIDATE_EVENT(frame.data)
        return event
    except pydantic.ValidationError as exc:
        raise ProtocolError(
            f"the event stream sent a {frame.event!r} frame that is not a known event: {exc}"
        ) from exc
