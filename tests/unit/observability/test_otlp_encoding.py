"""Our OTLP encoding of finished spans decodes to exactly what the SDK's exporter would send, and
our processor posts it to a receiver."""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans as sdk_encode
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from agent_core.observability.otlp import EncodingSpanProcessor, OtlpHttpPoster, encode_spans
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
        processor = EncodingSpanProcessor(OtlpHttpPoster(receiver.endpoint + "/v1/traces"), 60)
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
    gone = OtlpHttpPoster(receiver.endpoint + "/v1/traces", timeout=2)
    assert gone.post(encode_spans(spans), len(spans)) is False  # nothing listens any more
