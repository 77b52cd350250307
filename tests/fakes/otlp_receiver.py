"""A local OTLP/HTTP trace receiver: what a collector would get, decoded for tests to inspect.

It answers ``POST /v1/traces`` as the OTLP/HTTP specification says (protobuf
``ExportTraceServiceRequest`` in, ``ExportTraceServiceResponse`` out, 200), decodes every span
with the OpenTelemetry protobuf definitions and keeps it. It listens on loopback only and runs on
its own thread, so it serves processes of a stack as well as the test's own.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

__all__ = ["OtlpReceiver", "ReceivedSpan"]


@dataclass(frozen=True)
class ReceivedSpan:
    """One exported span, as the receiver decoded it."""

    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


class OtlpReceiver:
    """``with OtlpReceiver() as receiver:`` — ``receiver.endpoint`` for ``otlp_endpoint``."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self.headers: list[dict[str, str]] = []  # each request's headers, in order
        # Statuses to answer the next requests with, first to last (then 200 again), as a
        # collector that is overloaded (429, with ``retry_after``) or restarting (503) would.
        self.fail_next: list[int] = []
        self.retry_after: str | None = None
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver._lock:
                    receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                    failing = receiver.fail_next.pop(0) if receiver.fail_next else None
                if failing is not None:
                    self.send_response(failing)
                    if receiver.retry_after is not None:
                        self.send_header("Retry-After", receiver.retry_after)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if self.path != "/v1/traces":
                    self.send_error(404)
                    return
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver._keep(request)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *_: Any) -> None:  # quiet
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        """The base URL (the exporter appends ``/v1/traces``)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _keep(self, request: ExportTraceServiceRequest) -> None:
        found = []
        for resource_spans in request.resource_spans:
            attrs = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            service = str(attrs.get("service.name", ""))
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    found.append(
                        ReceivedSpan(
                            service=service,
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                            attributes={a.key: _value(a.value) for a in span.attributes},
                        )
                    )
        with self._lock:
            self.spans.extend(found)
            self.requests += 1

    def wait_for(self, predicate: Any, timeout_s: float = 30.0) -> list[ReceivedSpan]:
        """Poll until ``predicate(spans)`` holds; return the spans (fail on timeout)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                spans = list(self.spans)
            if predicate(spans):
                return spans
            time.sleep(0.1)
        raise AssertionError(f"spans not received in time: {[s.name for s in spans]}")
