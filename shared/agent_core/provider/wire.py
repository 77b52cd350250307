"""Decoding streamed response bodies: SSE events and NDJSON lines, at the bytes level.

The adapters read the raw body (the SDKs still own auth, base URL, timeouts and HTTP errors)
and decode it here instead of through the SDKs' stream classes: those spend more per chunk
than the transport itself (a text decode, line objects, several generator layers per event).
Lines are split as bytes, so a multi-byte character split across chunks is never decoded in
halves; each complete payload is parsed once: into a msgspec ``Struct`` that names only the
fields an adapter reads where one is declared (:func:`struct_loads`), else by orjson
(:func:`loads`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Protocol, TypeVar

import msgspec
import orjson

from agent_core.types.protocol import TextDeltaEvent

__all__ = [
    "MAX_LINE_BYTES",
    "LineSplitter",
    "SSEDecoder",
    "body_chunks",
    "loads",
    "struct_loads",
    "text_delta",
]

MAX_LINE_BYTES = 16 * 1024 * 1024
"""A line (or SSE event) longer than this is refused: a broken server must not exhaust memory."""


class StreamedResponse(Protocol):
    """What :func:`body_chunks` needs of an ``httpx`` (or the SDKs' ``httpx2``) response."""

    @property
    def headers(self) -> Mapping[str, str]: ...

    def aiter_raw(self) -> AsyncIterator[bytes]: ...

    def aiter_bytes(self) -> AsyncIterator[bytes]: ...


_IDENTITY = frozenset({"", "identity"})


def body_chunks(response: StreamedResponse) -> AsyncIterator[bytes]:
    """The body's reads, content-decoded: ``aiter_raw()`` when the body has no content coding
    (a streamed response from every provider we speak to), else ``aiter_bytes()``.

    ``aiter_bytes`` wraps ``aiter_raw`` in one more generator and passes every read through an
    identity decoder and a chunker even when there is nothing to decode: ~0.3 µs a read, a
    tenth of an adapter's own cost per chunk (``bench/provider_overhead.py``). A body that is
    gzip- (or otherwise) encoded still goes through the decoders.
    """
    if response.headers.get("content-encoding", "").strip().lower() in _IDENTITY:
        return response.aiter_raw()
    return response.aiter_bytes()


def loads(payload: bytes) -> Any:
    """Parse one JSON payload (UTF-8); raises ``ValueError`` when it is not valid JSON.

    orjson parses the common case several times faster than ``json`` (the parse is the largest
    part of an adapter's own cost per chunk); what it refuses and ``json`` accepts (``NaN``,
    ``Infinity``, lone surrogates) goes through ``json.loads`` itself, so the accepted language
    is exactly ``json``'s. One value differs: an integer beyond 64 bits comes back as a float
    (orjson's choice); no field of a provider's chunk carries one (tool arguments are a string
    here, parsed later by the tool-call assembler).
    """
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError:
        return json.loads(payload.decode())


S = TypeVar("S", bound=msgspec.Struct)


def struct_loads(kind: type[S]) -> Callable[[bytes], S]:
    """A parser of one JSON payload into ``kind``, a ``msgspec.Struct`` naming the fields read.

    The fields not named are skipped without building a Python object for them (a chunk of
    Chat Completions carries five an adapter never reads), and the ones read are attributes, not
    dict lookups: 0.45 µs less a chunk than :func:`loads` and ``dict.get`` (a tenth of the
    OpenAI adapter's own cost, ``bench/provider_overhead.py``). Declare fields ``Any`` (with the
    default an absent key means) unless the wire shape is certain: a value of another type is
    refused (``msgspec.ValidationError``, a ``ValueError``). The accepted JSON is exactly
    ``json``'s: what msgspec refuses and ``json`` accepts (``NaN``, ``Infinity``, lone
    surrogates) is parsed by ``json.loads`` and converted to ``kind`` the same way.
    """
    decode = msgspec.json.Decoder(kind).decode

    def parse(payload: bytes) -> S:
        try:
            return decode(payload)
        except msgspec.ValidationError:
            raise
        except msgspec.DecodeError:
            return msgspec.convert(json.loads(payload.decode()), kind)

    return parse


_VALIDATE_TEXT_DELTA = TextDeltaEvent.__pydantic_validator__.validate_python


def text_delta(text: str) -> TextDeltaEvent:
    """``TextDeltaEvent(text=text)``, the same validation called directly on the model's compiled
    validator: ``BaseModel.__init__`` wraps it in ~0.6 µs of Python, and an adapter makes one of
    these per streamed chunk (a fifth of its own cost per chunk, ``bench/provider_overhead.py``).
    """
    event: TextDeltaEvent = _VALIDATE_TEXT_DELTA({"text": text})
    return event


class LineSplitter:
    """Splits a byte stream into complete lines (``\\n``, ``\\r\\n``; the ending is dropped)."""

    __slots__ = ("_rest",)

    def __init__(self) -> None:
        self._rest = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines completed by ``chunk``; an unfinished last line is kept for the next."""
        if self._rest:
            chunk = self._rest + chunk
        lines = chunk.split(b"\n")
        self._rest = lines.pop()
        if len(self._rest) > MAX_LINE_BYTES:
            raise ValueError(f"a line is longer than {MAX_LINE_BYTES} bytes")
        return [line[:-1] if line[-1:] == b"\r" else line for line in lines]

    def flush(self) -> list[bytes]:
        """The last line when the stream ended without a final newline."""
        rest, self._rest = self._rest, b""
        rest = rest.removesuffix(b"\r")
        return [rest] if rest else []


class SSEDecoder:
    """Incremental Server-Sent Events decoder (the WHATWG rules for what matters here).

    Lines end in ``\\n``, ``\\r\\n`` or ``\\r``; a blank line dispatches the event. Only the
    ``event`` and ``data`` fields are kept (``id``, ``retry`` and comments are ignored);
    several ``data`` lines are joined with ``\\n``. An event without any ``data`` line is not
    dispatched. An unfinished event at the end of the stream is dropped, as the standard says.
    """

    __slots__ = ("_cr", "_data", "_event", "_rest")

    def __init__(self) -> None:
        self._rest = b""
        self._cr = False  # the previous chunk ended in "\r": a "\n" starting this one pairs it
        self._event: bytes | None = None
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> list[tuple[bytes | None, bytes]]:
        """The ``(event name or None, data)`` pairs completed by ``chunk``."""
        if not chunk:
            return []
        if self._cr:
            self._cr = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if b"\r" in chunk:
            self._cr = chunk[-1:] == b"\r"
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if self._rest:
            chunk = self._rest + chunk
        lines = chunk.split(b"\n")
        self._rest = lines.pop()
        out: list[tuple[bytes | None, bytes]] = []
        data = self._data
        for line in lines:
            if not line:
                if data:
                    out.append((self._event, data[0] if len(data) == 1 else b"\n".join(data)))
                    data = self._data = []
                self._event = None
            elif line.startswith(b"data:"):
                data.append(line[6:] if line[5:6] == b" " else line[5:])
            elif line.startswith(b"event:"):
                self._event = line[7:] if line[6:7] == b" " else line[6:]
            elif line == b"data":  # a field name alone means an empty value
                data.append(b"")
            elif line == b"event":
                self._event = b""
        if len(self._rest) > MAX_LINE_BYTES or (data and sum(map(len, data)) > MAX_LINE_BYTES):
            raise ValueError(f"an event is longer than {MAX_LINE_BYTES} bytes")
        return out
