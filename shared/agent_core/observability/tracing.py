"""Traces of a run across services: OpenTelemetry spans, linked through the bus by W3C headers.

Spans are made through the OpenTelemetry API everywhere; they are recorded and exported only in a
process whose ``observability.otlp_endpoint`` is set (:func:`setup_tracing` installs the SDK with
our span processor, which encodes each span to OTLP protobuf as it ends and posts them over
OTLP/HTTP from its own thread, see :mod:`agent_core.observability.otlp`). Without it the API's
no-op tracer costs a few attribute reads per span and nothing leaves the machine.

A trace crosses services in two ways: every bus entry we publish carries the current context's
``traceparent`` header (:func:`trace_headers`, used by :func:`agent_core.bus.publishing.publish`), and a
queued run carries its gateway request's context in ``QueuedRun.trace_parent``. The receiving side
continues from :func:`context_from`. Even in a process that records nothing, the context passes
through unchanged, so one trace id spans the run wherever it is exported.
"""

from __future__ import annotations

import contextlib
import os
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
TRACESTATE: Final = "tracestate"
_PROPAGATOR: Final = TraceContextTextMapPropagator()


# Made once: the SDK builds a new tracer and scope on every ``get_tracer`` call (~7 µs, paid per
# span). Made before the SDK is installed, this is the API's proxy, which turns to the SDK's
# tracer as soon as :func:`setup_tracing` installs it.
_TRACER: Final = trace.get_tracer("soong-agent")


def tracer() -> trace.Tracer:
    """The tracer of soong-agent (the no-op one until :func:`setup_tracing` installs the SDK)."""
    return _TRACER


def setup_tracing(
    settings: ObservabilitySettings, service: str, instance: str
) -> Callable[[], None] | None:
    """Install the SDK exporting to ``settings.otlp_endpoint``; return its shutdown, or ``None``.

    The SDK is imported only here, so a process that exports nothing never loads it.
    """
    if not settings.otlp_endpoint:
        return None
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    from agent_core.observability.otlp import EncodingSpanProcessor, OtlpHttpPoster, otlp_options

    provider = TracerProvider(
        resource=Resource.create(
            {"service.name": f"soong-{service}", "service.instance.id": f"{service}-{instance}"}
        ),
        sampler=ParentBased(TraceIdRatioBased(settings.trace_sample_ratio)),
    )
    endpoint = settings.otlp_endpoint.rstrip("/") + "/v1/traces"
    # Ours, not the SDK's batch processor and exporter: each span is encoded to bytes as it ends
    # and posted every half second, which costs a fraction of the CPU (see otlp.py).
    # The exporter's standard variables (headers for a vendor's key, timeout, TLS files) are
    # read here, once, like the rest of the settings.
    poster = OtlpHttpPoster(endpoint, otlp_options(os.environ))
    provider.add_span_processor(EncodingSpanProcessor(poster, 0.5))
    trace.set_tracer_provider(provider)
    return provider.shutdown


def trace_headers() -> dict[str, str]:
    """``{"traceparent": …}`` of the current span, or ``{}`` when there is none.

    Written here rather than by the W3C propagator: it runs for every bus entry published, and
    the propagator's generic carrier machinery cost several times this. A ``tracestate`` (only
    ever one a client sent the gateway) travels too.
    """
    span_context = trace.get_current_span().get_span_context()
    if not span_context.is_valid:
        return {}
    headers = {
        TRACEPARENT: f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}"
        f"-{span_context.trace_flags:02x}"
    }
    if span_context.trace_state:
        headers[TRACESTATE] = span_context.trace_state.to_header()
    return headers


# The contexts of the last few traceparents seen: a run publishes dozens of entries from the same
# span, and each receiving process would otherwise parse the same header into an equal context
# every time. A context is immutable, so sharing one is safe.
_CONTEXTS: dict[str, otel_context.Context] = {}
_CONTEXTS_MAX: Final = 512


def context_from(headers: Mapping[str, str] | None) -> otel_context.Context | None:
    """The context a ``traceparent`` header names, or ``None`` (then a span starts a new trace)."""
    if not headers:
        return None
    header = headers.get(TRACEPARENT)
    if header is None:
        return None
    if TRACESTATE in headers:  # rare (see trace_headers): not worth caching
        return _PROPAGATOR.extract({TRACEPARENT: header, TRACESTATE: headers[TRACESTATE]})
    ctx = _CONTEXTS.get(header)
    if ctx is None:
        ctx = _PROPAGATOR.extract({TRACEPARENT: header})
        if len(_CONTEXTS) >= _CONTEXTS_MAX:
            _CONTEXTS.pop(next(iter(_CONTEXTS)), None)  # the oldest: dicts keep insertion order
        _CONTEXTS[header] = ctx
    return ctx


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
