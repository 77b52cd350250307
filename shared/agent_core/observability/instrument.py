"""Model calls and tool calls, measured where they happen: spans and metrics around each one.

:class:`InstrumentedAdapter` wraps any provider adapter (the run-worker wraps every adapter it
builds), so every model call of every run is timed — latency, time to the first content event,
tokens in and out by provider and model — without the loop knowing. :func:`tool_call` does the same
for one tool call. Both open a span that is a child of the current one (the run's).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from opentelemetry.trace import Span, Status, StatusCode

from agent_core.observability.metrics import (
    MODEL_CALLS,
    MODEL_LATENCY,
    MODEL_TTFT,
    TOKENS,
    TOOL_CALLS,
    TOOL_SECONDS,
)
from agent_core.observability.tracing import tracer
from agent_core.provider.base import ProviderAdapter
from agent_core.types.protocol import ModelEvent, ModelRequest, Usage

__all__ = ["InstrumentedAdapter", "ToolCallMeasure", "tool_call"]

_CONTENT = frozenset({"text_delta", "tool_call_start"})


class InstrumentedAdapter:
    """A provider adapter that measures each call of the adapter it wraps (same contract)."""

    def __init__(self, inner: ProviderAdapter, provider: str) -> None:
        self.inner = inner
        self.provider = provider

    def __getattr__(self, name: str) -> Any:
        # Everything but ``stream`` is the wrapped adapter's own (``aclose``, ``warm_up``, …).
        return getattr(self.inner, name)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """The wrapped adapter's events, unchanged; measured as one model call."""
        labels = (self.provider, request.model)
        started = time.perf_counter()
        first: float | None = None
        usage = Usage()
        outcome = "error"
        # Not made current: a generator's context may be closed from another task, and the
        # model call has no child spans anyway.
        span = tracer().start_span(
            "model.call",
            attributes={"gen_ai.system": self.provider, "gen_ai.request.model": request.model},
        )
        try:
            async for event in self.inner.stream(request):
                if first is None and event.type in _CONTENT:
                    first = time.perf_counter()
                    MODEL_TTFT.labels(*labels).observe(first - started)
                if event.type == "usage":
                    usage = usage + event.usage
                elif event.type == "message_end":
                    outcome = "ok"
                elif event.type == "error":
                    span.set_status(Status(StatusCode.ERROR, event.error.code))
                yield event
        except BaseException as exc:
            outcome = "error" if isinstance(exc, Exception) else "cancelled"
            raise
        finally:
            MODEL_CALLS.labels(*labels, outcome).inc()
            MODEL_LATENCY.labels(*labels).observe(time.perf_counter() - started)
            TOKENS.labels(*labels, "in").inc(usage.input_tokens)
            TOKENS.labels(*labels, "out").inc(usage.output_tokens)
            span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
            span.end()


class ToolCallMeasure:
    """One tool call being measured; :meth:`failed` marks its result as an error."""

    def __init__(self, span: Span) -> None:
        self.span = span
        self.outcome = "ok"

    def failed(self, code: str) -> None:
        """The call's result is an error (``code`` names it on the span)."""
        self.outcome = "error"
        self.span.set_status(Status(StatusCode.ERROR, code))


@contextlib.contextmanager
def tool_call(name: str, call_id: str) -> Iterator[ToolCallMeasure]:
    """Measure one tool call: a ``tool.call`` span, its duration and its outcome by tool name."""
    started = time.perf_counter()
    with tracer().start_as_current_span(
        "tool.call", attributes={"tool.name": name, "tool.call_id": call_id}
    ) as span:
        measure = ToolCallMeasure(span)
        try:
            yield measure
        except BaseException:
            measure.outcome = "error"
            raise
        finally:
            TOOL_SECONDS.labels(name).observe(time.perf_counter() - started)
            TOOL_CALLS.labels(name, measure.outcome).inc()
