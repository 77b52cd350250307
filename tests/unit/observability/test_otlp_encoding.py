"""Our OTLP encoding of finished spans decodes to exactly what the SDK's exporter would send, and
our processor posts it to a receiver."""

from __future__ import annotations

import time

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans as sdk_encode
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from agent_core.observability.otlp import (
    EncodingSpanProcessor,
    OtlpHttpPoster,
    OtlpOptions,
    encode_spans,
    otlp_options,
    parse_headers,
)
from tests.fakes.otlp_receiver import OtlpReceiver


def _spans() -> tuple[ReadableSpan, ...]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "soong-test", "service.instance.id": "test-0"})
    )
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("soong-agent")
    other = provider.get_tracer("other", "1.2", schema_url="https://example.com/schema")
    remote = TraceContextTextMapPropagator().extract(
        {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    )
    with tracer.start_as_current_span("run", context=remote, kind=SpanKind.SERVER) as run:
        run.set_attributes({"run.id": "r1", "turns": 2, "ok": True, "score": 0.5, "neg": -3})
        run.set_attribute("tags", ["a", "b"])
        run.add_event("started", {"n": 1})
        with tracer.start_as_current_span("tool.call") as tool:
            tool.set_status(Status(StatusCode.ERROR, "lookup_failed"))
        other.start_span(
            "storage.commit" * 20,  # a name longer than 127 bytes: a two-byte length
            links=[Link(run.get_span_context(), {"why": "batch"})],
            kind=SpanKind.CONSUMER,
        ).end()
        tracer.start_span("ok", attributes={"x": "é" * 100}).end()
    spans = memory.get_finished_spans()
    assert len(spans) == 4
    return spans


def test_the_encoding_decodes_to_the_sdk_exporters_request() -> None:
    spans = _spans()
    ours = ExportTraceServiceRequest()
    ours.ParseFromString(encode_spans(spans))
    assert ours == sdk_encode(spans)
    names = [s.name for rs in ours.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert sorted(names) == sorted(s.name for s in spans)


def test_an_empty_batch_is_an_empty_request() -> None:
    assert encode_spans([]) == b""


def test_the_processor_posts_what_ended_to_a_receiver_and_survives_a_refusal() -> None:
    spans = _spans()
    with OtlpReceiver() as receiver:
        poster = OtlpHttpPoster(receiver.endpoint + "/v1/traces", backoff_s=(0.05,))
        processor = EncodingSpanProcessor(poster, 60)
        for span in spans:
            processor.on_end(span)
        assert processor.force_flush()  # long before the 60 s delay
        processor.on_end(spans[0])
        assert processor.force_flush()  # the kept-alive connection
        received = receiver.wait_for(lambda got: len(got) == 5)
        assert {s.service for s in received} == {"soong-test"}
        assert sorted(s.name for s in received[:4]) == sorted(s.name for s in spans)
        processor.on_end(spans[1])
        processor.shutdown()  # posts what is pending
        receiver.wait_for(lambda got: len(got) == 6)
        wrong = OtlpHttpPoster(receiver.endpoint + "/v1/nothing")
        assert wrong.post(encode_spans(spans), len(spans)) is False  # 404
        wrong.close()
    gone = OtlpHttpPoster(
        receiver.endpoint + "/v1/traces", OtlpOptions(timeout_s=2), backoff_s=(0.01, 0.01)
    )
    assert gone.post(encode_spans(spans), len(spans)) is False  # nothing listens any more


def test_the_standard_variables_reach_the_request() -> None:
    """A tracing vendor's key comes as OTEL_EXPORTER_OTLP_HEADERS; a signal's own variable wins."""
    env = {
        "OTEL_EXPORTER_OTLP_HEADERS": "api-key=general,x-tenant=a%20b",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "api-key=traces%3Dkey, x-team = data ",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "2500",
    }
    options = otlp_options(env)
    assert dict(options.headers) == {"api-key": "traces=key", "x-team": "data"}
    # The general variable alone (how most vendors document it) is what the request carries.
    general = otlp_options({"OTEL_EXPORTER_OTLP_HEADERS": "api-key=general,x-tenant=a%20b"})
    assert dict(general.headers) == {"api-key": "general", "x-tenant": "a b"}
    assert options.timeout_s == 2.5 and options.ssl_context is None
    assert parse_headers("a=1,broken,b=x%2Cy") == {"a": "1", "b": "x,y"}
    with OtlpReceiver() as receiver:
        poster = OtlpHttpPoster(receiver.endpoint + "/v1/traces", options)
        assert poster.post(encode_spans(_spans()), 4)
        poster.close()
    assert receiver.headers[0]["api-key"] == "traces=key"
    assert receiver.headers[0]["x-team"] == "data"
    assert receiver.headers[0]["content-type"] == "application/x-protobuf"


def test_a_busy_or_restarting_receiver_is_retried_and_a_refusal_is_not() -> None:
    body = encode_spans(_spans())
    with OtlpReceiver() as receiver:
        poster = OtlpHttpPoster(receiver.endpoint + "/v1/traces", backoff_s=(0.01,) * 3)
        receiver.fail_next = [503, 429, 502]
        assert poster.post(body, 4)  # the fourth attempt is taken
        assert receiver.requests == 1 and len(receiver.headers) == 4
        receiver.fail_next = [503] * 4
        assert not poster.post(body, 4)  # gave up after the last wait
        receiver.fail_next = [400]
        before = len(receiver.headers)
        assert not poster.post(body, 4)
        assert len(receiver.headers) == before + 1  # a refusal for good is not sent again
        # A Retry-After longer than the back-off is honoured (a lower bound the test sets) …
        receiver.fail_next, receiver.retry_after = [429], "1"
        started = time.monotonic()
        assert poster.post(body, 4)
        assert time.monotonic() - started >= 1.0
        # … and stopping ends any wait: no more attempts.
        receiver.fail_next, receiver.retry_after = [429], "3600"
        poster.stop_retrying()
        before = len(receiver.headers)
        assert not poster.post(body, 4)
        assert len(receiver.headers) == before + 1
        poster.close()
