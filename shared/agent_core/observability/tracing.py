"""Traces of a run across services: OpenTelemetry spans, linked through the bus by W3C headers.

Spans are made through the OpenTelemetry API everywhere; they are recorded and exported only in a
process whose ``observability.otlp_endpoint`` is set (:func:`setup_tracing` installs the SDK with
an OTLP/HTTP exporter and a batch processor, whose export runs on its own thread). Without it the
API's no-op tracer costs a few attribute reads per span and nothing leaves the machine.

A trace crosses services in two ways: every bus entry we publish carries the current context's
``traceparent`` header (:func:`trace_headers`, used by :func:`agent_core.bus.publish`), and a
queued run carries its gateway request's context in ``QueuedRun.trace_parent``. The receiving side
continues from :func:`context_from`. Even in a process that records nothing, the context passes
through unchanged, so one trace id spans the run wherever it is exported.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from agent_core.config import ObservabilitySettings

__all__ = [
    "TRACEPARENT",
    "attach_context",
    "span_attributes",
    "context_from",
    "setup_tracing",
    "trace_headers",
    "tracer",
]

TRACEPARENT: Final = "traceparent"
_PROPAGATOR: Final = TraceContextTextMapPropagator()


def tracer() -> trace.Tracer:
    """The tracer of soong-agent (the no-op one until :func:`setup_tracing` installs the SDK)."""
    return trace.get_tracer("soong-agent")


def setup_tracing(
    settings: ObservabilitySettings, service: str, instance: str
) -> Callable[[], None] | None:
    """Install the SDK exporting to ``settings.otlp_endpoint``; return its shutdown, or ``None``.

    The SDK is imported only here, so a process that exports nothing never loads it.
    """
    if not settings.otlp_endpoint:
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    provider = TracerProvider(
        resource=Resource.create(
            {"service.name": f"soong-{service}", "service.instance.id": f"{service}-{instance}"}
        ),
        sampler=ParentBased(TraceIdRatioBased(settings.trace_sample_ratio)),
    )
    endpoint = settings.otlp_endpoint.rstrip("/") + "/v1/traces"
    provider.add_span_processor(
        BatchSpanProcessor(
            OTLPSpanExporter(endpoint=endpoint, timeout=5), schedule_delay_millis=500
        )
    )
    trace.set_tracer_provider(provider)
    return provider.shutdown


def trace_headers() -> dict[str, str]:
    """``{"traceparent": …}`` of the current span, or ``{}`` when there is none."""
    if not trace.get_current_span().get_span_context().is_valid:
        return {}
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier


def context_from(headers: Mapping[str, str] | None) -> otel_context.Context | None:
    """The context a ``traceparent`` header names, or ``None`` (then a span starts a new trace)."""
    if not headers or TRACEPARENT not in headers:
        return None
    return _PROPAGATOR.extract(dict(headers))


@contextlib.contextmanager
def attach_context(ctx: otel_context.Context | None) -> Iterator[None]:
    """Make ``ctx`` current inside the block (a no-op for ``None``)."""
    if ctx is None:
        yield
        return
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)


def span_attributes(**values: Any) -> dict[str, Any]:
    """Attributes without ``None`` values (OpenTelemetry refuses them)."""
    return {k: v for k, v in values.items() if v is not None}
