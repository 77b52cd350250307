"""The OpenAI-compatible endpoint's pure mapping: request bodies, the turn posted, response ids,
a run's stream read into facts, and the bytes of OpenAI's events — checked by parsing them with
the openai SDK's own models."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter, ValidationError

from services.gateway.openai_compat import (
    ChatCompletionRequest,
    ChatStream,
    Finished,
    MappingError,
    ResponsesRequest,
    ResponsesStream,
    RunText,
    chat_completion,
    chat_turn,
    openai_error_of,
    outcome,
    parse_response_id,
    response_id,
    response_object,
    responses_turn,
)

RUN = "run_0123456789abcdef"
SESSION = "sess_20260101_120000_fedcba9876543210"
STREAM_EVENT: TypeAdapter[ResponseStreamEvent] = TypeAdapter(ResponseStreamEvent)


def _frame(kind: str, entry: str = "1-0", **fields: Any) -> bytes:
    event = {"type": kind, "run_id": RUN, "session_id": SESSION, **fields}
    return f"id: {entry}\nevent: {kind}\ndata: {json.dumps(event)}\n\n".encode()


def _finished(status: str = "completed", **fields: Any) -> bytes:
    usage = {"input_tokens": 12, "output_tokens": 5, "cache_read_tokens": 2}
    return _frame("run_finished", status=status, usage=usage, **fields)


def _chat(messages: list[dict[str, Any]], **extra: Any) -> ChatCompletionRequest:
    return ChatCompletionRequest.model_validate({"model": "helper", "messages": messages, **extra})


# ------------------------------------------------------------------------------ request bodies


def test_common_optional_fields_are_accepted_and_unknown_ones_refused() -> None:
    body = _chat(
        [{"role": "user", "content": "hi"}],
        temperature=0.2,
        top_p=1,
        max_tokens=10,
        user="u1",
        metadata={"k": "v"},
        stream_options={"include_usage": True},
        store=False,
        n=1,
        tool_choice="auto",
        tools=[],
    )
    assert body.stream_options is not None and body.stream_options.include_usage
    with pytest.raises(ValidationError, match="extra"):
        _chat([{"role": "user", "content": "hi"}], frobnicate=1)
    with pytest.raises(ValidationError):  # client-side tools
        _chat([{"role": "user", "content": "hi"}], tools=[{"type": "function"}])
    with pytest.raises(ValidationError):  # one choice only
        _chat([{"role": "user", "content": "hi"}], n=2)
    with pytest.raises(ValidationError):  # tool messages are client-side tools
        _chat([{"role": "tool", "content": "x", "tool_call_id": "c"}])
    with pytest.raises(ValidationError):  # image parts
        _chat([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}])
    with pytest.raises(ValidationError):
        ResponsesRequest.model_validate({"model": "m", "input": "x", "background": True})


# ------------------------------------------------------------------------------ the turn posted


def test_a_new_chat_posts_the_earlier_messages_as_a_transcript_then_the_last() -> None:
    body = _chat(
        [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "answer one"},
            {"role": "user", "content": [{"type": "text", "text": "second"}]},
        ]
    )
    transcript, last = chat_turn(body.messages, continuing=False)
    assert last == "second"
    assert transcript.index("[system]\nbe brief") < transcript.index("[user]\nfirst")
    assert "[assistant]\nanswer one" in transcript and "second" not in transcript
    # Continuing a session: it already holds the history, only the last message is new.
    assert chat_turn(body.messages, continuing=True) == ["second"]
    assert chat_turn(_chat([{"role": "user", "content": "only"}]).messages, continuing=False) == [
        "only"
    ]


def test_the_last_message_must_be_the_users_with_text() -> None:
    with pytest.raises(MappingError) as caught:
        chat_turn(_chat([{"role": "user", "content": "a"}, {"role": "assistant"}]).messages,
                  continuing=False)  # fmt: skip
    assert caught.value.param == "messages[1]"
    with pytest.raises(MappingError):
        chat_turn(_chat([{"role": "user", "content": "  "}]).messages, continuing=True)


def test_responses_input_and_instructions() -> None:
    body = ResponsesRequest.model_validate(
        {"model": "m", "input": "hello", "instructions": "in French"}
    )
    assert responses_turn(body) == ["Instructions:\nin French", "hello"]
    items = ResponsesRequest.model_validate(
        {
            "model": "m",
            "input": [
                {"role": "user", "content": "q1"},
                {
                    "type": "message",
                    "role": "assistant",
                    "id": "msg_1",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "a1", "annotations": []}],
                },
                {"role": "user", "content": [{"type": "input_text", "text": "q2"}]},
            ],
        }
    )
    transcript, last = responses_turn(items)
    assert last == "q2" and "[assistant]\na1" in transcript and "[user]\nq1" in transcript


def test_a_response_id_names_its_session_and_run() -> None:
    rid = response_id(SESSION, RUN)
    assert rid.startswith("resp_") and parse_response_id(rid) == (SESSION, RUN)
    for bad in ("resp_", "resp_x", "chatcmpl-1", rid + "z", "resp_../x_0123456789abcdef", rid[:-1]):
        assert parse_response_id(bad) is None, bad


# ------------------------------------------------------------------------------ a run's stream


def test_run_text_reads_only_its_runs_text_and_its_end() -> None:
    reader = RunText(RUN)
    child = json.dumps(
        {"type": "text_delta", "run_id": "run_ffffffffffffffff", "session_id": SESSION,
         "turn": 1, "text": "child"}
    )  # fmt: skip
    stream = (
        b"retry: 1000\n\n"
        + _frame("text_delta", turn=1, text="Hel")
        + f"id: 2-0\nevent: text_delta\ndata: {child}\n\n".encode()
        + b": keep-alive\n\n"
        + _frame("text_delta", turn=1, text="lo")
        + _frame("tool_started", tool_call_id="call_1", name="lookup")
        + _frame("text_delta", turn=2, text="Done.")
        + _finished()
    )
    facts: list[Any] = []
    for i in range(0, len(stream), 7):  # frames cut anywhere across chunks
        facts += reader.feed(stream[i : i + 7])
    assert facts[:-1] == ["Hel", None, "lo", "\n\nDone."]
    assert facts[-1] == reader.finished and reader.finished is not None
    assert reader.finished.outcome == "stop" and reader.finished.usage["input_tokens"] == 12


def test_a_turn_streamed_again_is_not_sent_twice() -> None:
    reader = RunText(RUN)
    facts = reader.feed(
        _frame("text_delta", turn=1, text="abc", offset=0)
        + _frame("text_delta", turn=1, text="abcdef", attempt=2, offset=0)  # taken over
        + _frame("text_delta", turn=1, text="g", attempt=2)
    )
    assert "".join(f for f in facts if isinstance(f, str)) == "abcdefg"


@pytest.mark.parametrize(
    ("status", "reason", "expected"),
    [
        ("completed", "completed", "stop"),
        ("completed", "max_turns", "length"),
        ("completed", "max_output_tokens_recovery", "length"),
        ("failed", "failed", "failed"),
        ("aborted", "aborted_streaming", "failed"),
        ("cancelled", None, "cancelled"),
    ],
)
def test_outcomes(status: str, reason: str | None, expected: str) -> None:
    assert outcome(status, reason) == expected


# ------------------------------------------------------------------------------ OpenAI's shapes


def _sse_data(raw: bytes) -> list[tuple[str | None, str]]:
    out = []
    for frame in raw.decode().split("\n\n"):
        if not frame:
            continue
        fields = dict(line.split(": ", 1) for line in frame.split("\n"))
        out.append((fields.get("event"), fields["data"]))
    return out


def test_chat_stream_chunks_parse_as_the_sdks_and_end_with_done() -> None:
    encoder = ChatStream(completion_id="chatcmpl-1", model="helper", created=1, include_usage=True)
    finished = Finished.of(json.loads(_finished().split(b"data: ")[1]))
    raw = encoder.start() + encoder.text('he said "hi"\u2028\n') + encoder.end(finished)
    data = [d for _, d in _sse_data(raw)]
    assert data[-1] == "[DONE]"
    chunks = [ChatCompletionChunk.model_validate(json.loads(d)) for d in data[:-1]]
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[1].choices[0].delta.content == 'he said "hi"\u2028\n'
    assert chunks[2].choices[0].finish_reason == "stop"
    assert chunks[3].choices == [] and chunks[3].usage is not None
    assert (chunks[3].usage.prompt_tokens, chunks[3].usage.total_tokens) == (12, 17)
    assert "\u2028" not in raw.decode()  # escaped: no client splits the line there


def test_a_failed_run_ends_the_chat_stream_with_an_error_and_no_done() -> None:
    encoder = ChatStream(completion_id="c", model="m", created=1, include_usage=False)
    failed = Finished("failed", {}, "provider_error", "the model failed")
    data = [json.loads(d) for _, d in _sse_data(encoder.end(failed))]
    assert data == [
        {
            "error": {
                "message": "the model failed",
                "type": "server_error",
                "param": None,
                "code": "provider_error",
            }
        }
    ]
    assert b"error" in encoder.end(None) and b"[DONE]" not in encoder.end(None)


def test_a_chat_completion_and_its_errors() -> None:
    done = Finished("length", {"input_tokens": 3, "output_tokens": 4})
    status, body = chat_completion(
        completion_id="c", model="m", created=1, text="partial", finished=done
    )
    parsed = ChatCompletion.model_validate(body)
    assert status == 200 and parsed.choices[0].message.content == "partial"
    assert parsed.choices[0].finish_reason == "length" and parsed.usage is not None
    assert parsed.usage.total_tokens == 7
    status, body = chat_completion(
        completion_id="c", model="m", created=1, text="", finished=Finished("cancelled", {})
    )
    assert status == 500 and body["error"]["code"] == "run_cancelled"
    status, _ = chat_completion(completion_id="c", model="m", created=1, text="", finished=None)
    assert status == 503


def test_responses_events_in_order_parse_as_the_sdks() -> None:
    body = ResponsesRequest.model_validate({"model": "m", "input": "x", "metadata": {"k": "v"}})
    encoder = ResponsesStream(rid="resp_1", model="m", created_at=1, body=body)
    finished = Finished("stop", {"input_tokens": 1, "output_tokens": 2})
    raw = encoder.start() + encoder.text("Hel") + encoder.text("lo") + encoder.end(finished)
    frames = _sse_data(raw)
    events = [STREAM_EVENT.validate_python(json.loads(d)) for _, d in frames]
    assert [e.type for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [name for name, _ in frames] == [e.type for e in events]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    final = events[-1]
    assert final.type == "response.completed"
    assert final.response.output_text == "Hello" and final.response.metadata == {"k": "v"}
    assert final.response.usage is not None and final.response.usage.total_tokens == 3


def test_a_failed_or_cut_response() -> None:
    body = ResponsesRequest.model_validate({"model": "m", "input": "x"})
    failed = response_object(
        rid="resp_1",
        model="m",
        created_at=1,
        text=None,
        finished=Finished("failed", {}, "provider_error", "down"),
        body=body,
    )
    parsed = Response.model_validate(failed)
    assert parsed.status == "failed" and parsed.error is not None and parsed.output == []
    cut = Response.model_validate(
        response_object(
            rid="resp_1",
            model="m",
            created_at=1,
            text="part",
            finished=Finished("length", {}),
            body=body,
        )
    )
    assert cut.status == "incomplete" and cut.incomplete_details is not None
    assert cut.output_text == "part"
    encoder = ResponsesStream(rid="resp_1", model="m", created_at=1, body=body)
    kinds = [json.loads(d)["type"] for _, d in _sse_data(encoder.start() + encoder.end(None))]
    assert kinds[-1] == "error"


def test_gateway_errors_in_openais_shape() -> None:
    status, body = openai_error_of(
        401, {"error": {"code": "unauthorized", "message": "invalid API key", "details": {}}}
    )
    assert status == 401 and body["error"]["code"] == "invalid_api_key"
    assert set(body["error"]) == {"message", "type", "param", "code"}
    errors = [{"field": "body.messages.0.content", "message": "bad", "type": "string_type"}]
    status, body = openai_error_of(
        422, {"error": {"code": "validation_error", "message": "x", "details": {"errors": errors}}}
    )
    assert status == 400
    assert (body["error"]["param"], body["error"]["code"]) == (
        "messages[0].content",
        "invalid_type",
    )
    status, body = openai_error_of(
        429, {"error": {"code": "too_many_streams", "message": "at most 6", "details": {}}}
    )
    assert (status, body["error"]["type"]) == (429, "requests")
    status, body = openai_error_of(
        500, {"error": {"code": "internal_error", "message": "internal error", "details": {}}}
    )
    assert body["error"]["type"] == "server_error"
