"""OTLP/HTTP export of finished spans, encoded straight to protobuf bytes.

The OpenTelemetry exporter builds a protobuf object per span, attribute and value before it
serialises them, about twice the CPU of writing the bytes directly. :func:`encode_spans` writes
the same ``ExportTraceServiceRequest`` wire bytes directly (the resource and scope of a
process are encoded once and cached; attribute keys too). :class:`EncodingSpanProcessor` encodes
each span as it ends and posts what gathered every half second over one kept-alive HTTP
connection (:class:`OtlpHttpPoster`). The unit tests decode its output with the
OpenTelemetry protobuf definitions and compare it with the SDK exporter's own encoding.

What users of an OTLP exporter rely on is kept: the standard variables
(``OTEL_EXPORTER_OTLP_[TRACES_]HEADERS`` — how tracing vendors authenticate —, ``…_TIMEOUT``,
``…_CERTIFICATE``, ``…_CLIENT_CERTIFICATE`` and ``…_CLIENT_KEY``, read once by
:func:`otlp_options`), TLS for ``https`` endpoints, and the specification's retries (429, 502,
503, 504 and broken connections, with exponential back-off and ``Retry-After``). Left out: gzip
compression (``…_COMPRESSION`` is ignored; requests go uncompressed), gRPC (OTLP/HTTP only),
metrics and logs signals (traces only).

Only :func:`agent_core.observability.tracing.setup_tracing` imports this module (it imports the
trace SDK), so a process that exports nothing never loads it.
"""

from __future__ import annotations

import email.utils
import http.client
import logging
import ssl
import struct
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import unquote, urlsplit

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import SpanContext, SpanKind

__all__ = [
    "EncodingSpanProcessor",
    "OtlpHttpPoster",
    "OtlpOptions",
    "encode_spans",
    "otlp_options",
    "parse_headers",
]

log = logging.getLogger(__name__)

_Q: Final = struct.Struct("<Q")
_I: Final = struct.Struct("<I")
_D: Final = struct.Struct("<d")
# Span.flags: the SDK exporter always says whether the parent is known to be remote.
_HAS_IS_REMOTE: Final = 0x100
_IS_REMOTE: Final = 0x200


def _varint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: int, payload: bytes) -> bytes:
    """A length-delimited field: ``tag`` is the key byte (field number << 3 | 2)."""
    n = len(payload)
    return bytes((tag, n)) + payload if n < 0x80 else bytes((tag,)) + _varint(n) + payload


def _any_value(value: Any) -> bytes:
    """An ``AnyValue`` message for one attribute value (the SDK has already checked its type)."""
    if isinstance(value, str):
        return _field(0x0A, value.encode())
    if isinstance(value, bool):  # before int: bool is an int
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, int):
        return b"\x18" + _varint(value & 0xFFFFFFFFFFFFFFFF)  # int64: two's complement
    if isinstance(value, float):
        return b"\x21" + _D.pack(value)
    if isinstance(value, bytes):
        return _field(0x3A, value)
    if isinstance(value, Sequence):
        return _field(0x2A, b"".join(_field(0x0A, _any_value(v)) for v in value))
    return _field(0x0A, str(value).encode())


# Attribute keys are the few names our code and FastAPI use, so this stays small.
_KEYS: dict[str, bytes] = {}


def _attributes(tag: int, attributes: Mapping[str, Any] | None) -> bytes:
    """Repeated ``KeyValue`` fields under ``tag``; each key's encoding is computed once."""
    if not attributes:
        return b""
    parts = []
    for key, value in attributes.items():
        head = _KEYS.get(key)
        if head is None:
            head = _KEYS[key] = _field(0x0A, key.encode())
        parts.append(_field(tag, head + _field(0x12, _any_value(value))))
    return b"".join(parts)


def _trace_state(context: SpanContext) -> bytes:
    state = context.trace_state
    if not state:
        return b""
    return _field(0x1A, ",".join(f"{k}={v}" for k, v in state.items()).encode())


# Span.kind (field 6): the protocol's kinds start at 1, the SDK's at 0.
_KINDS: Final = {kind: bytes((0x30, kind.value + 1)) for kind in SpanKind}


def _span(span: ReadableSpan) -> bytes:
    context = span.get_span_context()
    assert context is not None  # a finished SDK span always has one
    parent = span.parent
    flags = _HAS_IS_REMOTE | (_IS_REMOTE if parent is not None and parent.is_remote else 0)
    parts = [
        b"\x0a\x10",
        context.trace_id.to_bytes(16, "big"),
        b"\x12\x08",
        context.span_id.to_bytes(8, "big"),
        _trace_state(context),
        b"\x22\x08" + parent.span_id.to_bytes(8, "big") if parent is not None else b"",
        _field(0x2A, span.name.encode()),
        _KINDS[span.kind],
        b"\x39" + _Q.pack(span.start_time or 0),
        b"\x41" + _Q.pack(span.end_time or 0),
        _attributes(0x4A, span.attributes),
    ]
    if span.dropped_attributes:
        parts.append(b"\x50" + _varint(span.dropped_attributes))
    for event in span.events:
        body = b"\x09" + _Q.pack(event.timestamp) + _field(0x12, event.name.encode())
        body += _attributes(0x1A, event.attributes)
        if event.dropped_attributes:
            body += b"\x20" + _varint(event.dropped_attributes)
        parts.append(_field(0x5A, body))
    if span.dropped_events:
        parts.append(b"\x60" + _varint(span.dropped_events))
    for link in span.links:
        body = b"\x0a\x10" + link.context.trace_id.to_bytes(16, "big")
        body += b"\x12\x08" + link.context.span_id.to_bytes(8, "big")
        body += _attributes(0x22, link.attributes)
        if link.dropped_attributes:
            body += b"\x28" + _varint(link.dropped_attributes)
        link_flags = _HAS_IS_REMOTE | (_IS_REMOTE if link.context.is_remote else 0)
        parts.append(_field(0x6A, body + b"\x35" + _I.pack(link_flags)))
    if span.dropped_links:
        parts.append(b"\x70" + _varint(span.dropped_links))
    status = span.status
    code = status.status_code.value
    body = _field(0x12, status.description.encode()) if status.description else b""
    parts.append(_field(0x7A, body + (b"\x18" + _varint(code) if code else b"")))
    parts.append(b"\x85\x01" + _I.pack(flags))  # field 16, fixed32
    return _field(0x12, b"".join(parts))


# (resource, schema url) and (scope, schema url) fields, by the span's resource and scope.
_Heads = tuple[tuple[bytes, bytes], tuple[bytes, bytes]]
_HEADS: dict[tuple[Any, ...], tuple[Any, _Heads]] = {}


def _heads(span: ReadableSpan) -> _Heads:
    """The encoded resource and scope of ``span`` (the same few for a whole process).

    Keyed by the resource's identity and the scope's fields: hashing a resource serialises its
    attributes to JSON, and the SDK makes a new scope object for every ``get_tracer`` call.
    """
    resource, scope = span.resource, span.instrumentation_scope
    key = (
        id(resource),
        *((scope.name, scope.version, scope.schema_url) if scope is not None else ()),
    )
    held = _HEADS.get(key)
    if held is not None and held[0] is resource:  # the same object, not a reused id
        return held[1]
    encoded_resource = (
        _field(0x0A, _attributes(0x0A, resource.attributes)),
        _field(0x1A, resource.schema_url.encode()) if resource.schema_url else b"",
    )
    encoded_scope = (b"", b"")
    if scope is not None:
        body = _field(0x0A, scope.name.encode())
        if scope.version:
            body += _field(0x12, scope.version.encode())
        body += _attributes(0x1A, scope.attributes)
        encoded_scope = (
            _field(0x0A, body),
            _field(0x1A, scope.schema_url.encode()) if scope.schema_url else b"",
        )
    heads = (encoded_resource, encoded_scope)
    if scope is None or not scope.attributes:  # a scope's attributes are not in the key
        _HEADS[key] = (resource, heads)
    return heads


def _request(groups: Mapping[_Heads, list[bytes]]) -> bytes:
    """An ``ExportTraceServiceRequest`` of encoded spans grouped by their resource and scope."""
    by_resource: dict[tuple[bytes, bytes], list[bytes]] = {}
    for (resource, (scope, scope_schema)), encoded in groups.items():
        scope_spans = _field(0x12, scope + b"".join(encoded) + scope_schema)
        by_resource.setdefault(resource, []).append(scope_spans)
    return b"".join(
        _field(0x0A, resource + b"".join(scope_spans) + schema)
        for (resource, schema), scope_spans in by_resource.items()
    )


def encode_spans(spans: Sequence[ReadableSpan]) -> bytes:
    """An ``ExportTraceServiceRequest`` with ``spans``, grouped by resource and scope."""
    groups: dict[_Heads, list[bytes]] = {}
    for span in spans:
        groups.setdefault(_heads(span), []).append(_span(span))
    return _request(groups)


# Statuses the OTLP/HTTP specification calls retryable; everything else is final.
_RETRYABLE: Final = frozenset({429, 502, 503, 504})
# Waits between attempts (seconds): a receiver down for half a minute loses nothing.
_BACKOFF_S: Final = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
_MAX_RETRY_AFTER_S: Final = 30.0


def parse_headers(text: str) -> dict[str, str]:
    """``OTEL_EXPORTER_OTLP_HEADERS``: ``key=value`` pairs separated by commas, values
    percent-encoded (``api-key=abc,x-tenant=a%20b``); an entry without ``=`` is skipped."""
    headers: dict[str, str] = {}
    for entry in text.split(","):
        key, sep, value = entry.partition("=")
        if not sep or not key.strip():
            if entry.strip():
                log.warning("OTLP headers: skipped an entry without 'key=value'")
            continue
        headers[key.strip()] = unquote(value.strip())
    return headers


@dataclass(frozen=True)
class OtlpOptions:
    """How to reach the receiver, beyond its URL: headers, timeout and TLS."""

    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 10.0
    ssl_context: ssl.SSLContext | None = None


def otlp_options(env: Mapping[str, str]) -> OtlpOptions:
    """The exporter's standard variables (a signal's own, ``OTEL_EXPORTER_OTLP_TRACES_*``, over
    the general ``OTEL_EXPORTER_OTLP_*``), read once at start-up."""

    def var(name: str) -> str | None:
        return env.get(f"OTEL_EXPORTER_OTLP_TRACES_{name}") or env.get(f"OTEL_EXPORTER_OTLP_{name}")

    timeout_ms = var("TIMEOUT")
    context = None
    ca, cert, key = var("CERTIFICATE"), var("CLIENT_CERTIFICATE"), var("CLIENT_KEY")
    if ca or cert:
        context = ssl.create_default_context(cafile=ca)
        if cert:
            context.load_cert_chain(cert, key)
    return OtlpOptions(
        headers=parse_headers(var("HEADERS") or ""),
        timeout_s=float(timeout_ms) / 1000 if timeout_ms else 10.0,
        ssl_context=context,
    )


def _retry_after_s(response: http.client.HTTPResponse) -> float | None:
    value = response.getheader("Retry-After")
    if value is None:
        return None
    if value.strip().isdigit():
        return float(value.strip())
    when = email.utils.parsedate_to_datetime(value) if value else None
    return None if when is None else max(0.0, when.timestamp() - time.time())


class OtlpHttpPoster:
    """Posts export requests to an OTLP/HTTP traces URL (``…/v1/traces``) over one kept-alive
    connection, as ``application/x-protobuf``, with ``options``' headers and TLS.

    A request the receiver answers with a retryable status (429, 502, 503, 504) or that finds
    the connection broken is sent again after ``backoff_s`` waits (longer when the receiver asks
    with ``Retry-After``); one that is refused for good, or still fails after the last wait, is
    logged and dropped: traces are best effort and never hold up the service (the posting thread
    is the processor's own). :meth:`stop_retrying` ends the waits (at shutdown). Not
    thread-safe: one thread posts.
    """

    def __init__(
        self,
        url: str,
        options: OtlpOptions | None = None,
        *,
        backoff_s: Sequence[float] = _BACKOFF_S,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self._options = options or OtlpOptions()
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._path = parts.path or "/"
        self._headers = {**self._options.headers, "Content-Type": "application/x-protobuf"}
        self._backoff_s = tuple(backoff_s)
        self._stop = threading.Event()
        self._connection: http.client.HTTPConnection | None = None

    def _connect(self) -> http.client.HTTPConnection:
        if self._connection is None:
            timeout = self._options.timeout_s
            self._connection = (
                http.client.HTTPSConnection(
                    self._host, self._port, timeout=timeout, context=self._options.ssl_context
                )
                if self._https
                else http.client.HTTPConnection(self._host, self._port, timeout=timeout)
            )
        return self._connection

    def post(self, body: bytes, spans: int) -> bool:
        """Send one request of ``spans`` spans; ``True`` once the receiver took it."""
        waits = iter(self._backoff_s)
        reconnected = False
        while True:
            try:
                connection = self._connect()
                connection.request("POST", self._path, body, self._headers)
                response = connection.getresponse()
                response.read()
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                if not reconnected:  # the receiver may have closed the kept-alive connection
                    reconnected = True
                    continue
                problem, asked = f"failed: {exc}", None
            else:
                if 200 <= response.status < 300:
                    return True
                problem = f"refused: HTTP {response.status}"
                if response.status not in _RETRYABLE:
                    log.warning("OTLP export of %d spans %s", spans, problem)
                    return False
                asked = _retry_after_s(response)
            wait = next(waits, None)
            if wait is None or self._stop.is_set():
                log.warning("OTLP export of %d spans %s (gave up)", spans, problem)
                return False
            if self._stop.wait(min(max(wait, asked or 0.0), _MAX_RETRY_AFTER_S)):
                log.warning("OTLP export of %d spans %s (stopping)", spans, problem)
                return False

    def stop_retrying(self) -> None:
        """End any wait between attempts, and make no more (the process is stopping)."""
        self._stop.set()

    def close(self) -> None:
        """Close the connection (the next post opens a new one)."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None


class EncodingSpanProcessor(SpanProcessor):
    """Encodes each span as it ends and posts what has gathered every ``delay_s`` seconds.

    Unlike the SDK's batch processor it holds bytes, not span objects, between the end of a span
    and its export: bytes are not tracked by Python's cycle collector, whereas ~12 tracked
    objects per queued span made every service's collections run more often (the larger part of
    tracing's cost, measured in docs/performance.md). Encoding runs in the thread that ends the
    span (~10 µs); the post runs on this processor's own thread. Past ``max_pending`` spans
    waiting (a receiver that cannot keep up) new ones are dropped and counted in a warning.
    """

    def __init__(self, poster: OtlpHttpPoster, delay_s: float = 0.5, max_pending: int = 20_000):
        self._poster = poster
        self._delay_s = delay_s
        self._max_pending = max_pending
        self._lock = threading.Lock()
        self._posting = threading.Lock()  # one post at a time: the poster is not thread-safe
        self._pending: dict[_Heads, list[bytes]] = {}
        self._count = 0
        self._dropped = 0
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="otlp-export", daemon=True)
        self._thread.start()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Nothing to do when a span starts."""

    def on_end(self, span: ReadableSpan) -> None:
        """Encode ``span`` and keep its bytes for the next post."""
        if not span.context.trace_flags.sampled:
            return
        heads = _heads(span)
        encoded = _span(span)
        with self._lock:
            if self._count >= self._max_pending:
                self._dropped += 1
                return
            self._count += 1
            group = self._pending.get(heads)
            if group is None:
                self._pending[heads] = [encoded]
            else:
                group.append(encoded)

    def _take(self) -> tuple[dict[_Heads, list[bytes]], int, int]:
        with self._lock:
            pending, count, dropped = self._pending, self._count, self._dropped
            self._pending, self._count, self._dropped = {}, 0, 0
        return pending, count, dropped

    def _post_pending(self) -> bool:
        with self._posting:
            pending, count, dropped = self._take()
            if dropped:
                log.warning("dropped %d spans: the OTLP receiver does not keep up", dropped)
            return not count or self._poster.post(_request(pending), count)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._delay_s)
            self._wake.clear()
            self._post_pending()
        self._post_pending()
        self._poster.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Post what is pending now (from the calling thread)."""
        return self._post_pending()

    def shutdown(self) -> None:
        """Post what is pending (once, without waiting out a receiver's outage) and stop."""
        self._poster.stop_retrying()
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10)
