"""Protocol types: strict discriminated unions and exact JSON round trips."""

from __future__ import annotations

import typing
from typing import Any

import pytest
from hypothesis import given, settings
from pydantic import BaseModel, ValidationError

from agent_core.errors import ProviderErrorPayload
from agent_core.types.enums import (
    ContentBlockType,
    InvalidToolCallReason,
    PermissionBehavior,
    Role,
    StopReason,
)
from agent_core.types.protocol import (
    CONTENT_BLOCKS,
    MODEL_EVENT,
    ArtifactRefBlock,
    AttachmentBlock,
    ContentBlock,
    ErrorEvent,
    JsonBlock,
    MessageEndEvent,
    MessageStartEvent,
    ModelEvent,
    ModelMessage,
    ModelRequest,
    PermissionDecision,
    TextBlock,
    TextDeltaEvent,
    ToolCall,
    ToolCallBlock,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallInvalidEvent,
    ToolCallStartEvent,
    ToolResult,
    ToolResultBlock,
    Usage,
    UsageEvent,
)
from tests.unit.types import strategies as S


def _members(union: Any) -> set[type[BaseModel]]:
    inner = typing.get_args(union)[0]  # Annotated[Union[...], Field(...)]
    return set(typing.get_args(inner))


BLOCKS: list[BaseModel] = [
    TextBlock(text="hello"),
    JsonBlock(data={"a": [1, 2.5, None, True]}, summary="small"),
    JsonBlock(summary="big table", artifact_id="artifact_00000000000000aa"),
    ToolCallBlock(id="call_1", name="read_file", arguments={"path": "a.txt"}),
    ToolResultBlock(
        tool_call_id="call_1",
        content=[TextBlock(text="x"), ArtifactRefBlock(artifact_id="artifact_1")],
        is_error=True,
    ),
    ArtifactRefBlock(artifact_id="artifact_1", summary="s", mime_type="text/csv", filename="a.csv"),
    AttachmentBlock(
        path="input/a.pdf", filename="a.pdf", mime_type="application/pdf", size_bytes=9
    ),
]

EVENTS: list[BaseModel] = [
    MessageStartEvent(model="m", response_id="r1"),
    TextDeltaEvent(text="你"),
    ToolCallStartEvent(index=0, id="call_1", name="t"),
    ToolCallDeltaEvent(index=0, arguments_delta='{"a":'),
    ToolCallEndEvent(index=0, id="call_1", name="t", arguments={"a": 1}),
    ToolCallInvalidEvent(
        index=1,
        id="call_2",
        name="t",
        reason=InvalidToolCallReason.TRUNCATED,
        raw_arguments='{"a": "cut',
        error="Unterminated string starting at: line 1 column 7 (char 6)",
    ),
    UsageEvent(usage=Usage(input_tokens=3, output_tokens=4)),
    MessageEndEvent(stop_reason=StopReason.TOOL_USE, raw_stop_reason="tool_calls"),
    ErrorEvent(
        error=ProviderErrorPayload(
            type="provider_error", code="overloaded", message="m", provider="anthropic"
        )
    ),
]


def test_examples_cover_every_union_member() -> None:
    # A new block or event type must get an example here (and so a round-trip test).
    assert {type(b) for b in BLOCKS} == _members(ContentBlock)
    assert {type(e) for e in EVENTS} == _members(ModelEvent)
    assert {b.type for b in BLOCKS} == set(ContentBlockType)  # type: ignore[attr-defined]


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.type)  # type: ignore[attr-defined]
def test_every_block_round_trips_through_json(block: BaseModel) -> None:
    text = CONTENT_BLOCKS.dump_json([block])  # type: ignore[list-item]
    (back,) = CONTENT_BLOCKS.validate_json(text)
    assert back == block and type(back) is type(block)
    assert CONTENT_BLOCKS.validate_python(CONTENT_BLOCKS.dump_python([back], mode="json")) == [
        block
    ]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: e.type)  # type: ignore[attr-defined]
def test_every_model_event_round_trips_through_json(event: BaseModel) -> None:
    back = MODEL_EVENT.validate_json(event.model_dump_json())
    assert back == event and type(back) is type(event)


@settings(max_examples=300, deadline=None)
@given(block=S.content_blocks)
def test_generated_blocks_round_trip(block: Any) -> None:
    (back,) = CONTENT_BLOCKS.validate_json(CONTENT_BLOCKS.dump_json([block]))
    assert back == block


@pytest.mark.parametrize(
    "raw",
    [
        {"type": "image", "url": "x"},
        {"type": "TEXT", "text": "x"},
        {"text": "no type"},
        {"type": "text", "text": "x", "extra": 1},
        {"type": "tool_call", "id": "c", "name": "n", "arguments": {}, "raw": {}},
        {"type": "tool_call", "id": "", "name": "n"},
        {"type": "json", "data": {"a": 1}, "artifact_id": "artifact_1"},
        {
            "type": "tool_result",
            "tool_call_id": "c",
            "content": [{"type": "tool_call", "id": "c", "name": "n"}],
        },
        {"type": "attachment", "path": "p", "size_bytes": -1},
        {"type": "text", "text": 5},
    ],
)
def test_content_blocks_reject_unknown_types_and_fields(raw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        CONTENT_BLOCKS.validate_python([raw])


@pytest.mark.parametrize(
    "raw",
    [
        {"type": "thinking_delta", "text": "x"},
        {"type": "text_delta", "text": "x", "index": 0},
        {"type": "message_end", "stop_reason": "finished"},
        {"type": "usage", "usage": {"input_tokens": 1, "reasoning_tokens": 2}},
        {"type": "error", "error": {"type": "t", "code": "c", "message": "m", "traceback": "..."}},
    ],
)
def test_model_events_reject_unknown_types_and_fields(raw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        MODEL_EVENT.validate_python(raw)


def test_request_extension_points_accept_anything_and_nothing_else() -> None:
    request = ModelRequest(
        model="m",
        messages=[ModelMessage(role=Role.USER, content=[TextBlock(text="hi")])],
        provider_options={"top_k": 5, "anything": {"nested": [1]}},
        metadata={"trace": "x"},
    )
    assert ModelRequest.model_validate_json(request.model_dump_json()) == request
    with pytest.raises(ValidationError):
        ModelRequest.model_validate({**request.model_dump(), "top_k": 5})
    with pytest.raises(ValidationError):
        ModelMessage(role=Role.SYSTEM, content=[])  # type: ignore[arg-type]


def test_tool_result_to_block_keeps_content_and_error_flag() -> None:
    result = ToolResult(tool_call_id="c", content=[TextBlock(text="boom")], is_error=True)
    block = result.to_block()
    assert block == ToolResultBlock(
        tool_call_id="c", content=[TextBlock(text="boom")], is_error=True
    )
    assert ToolCall(id="c", name="n").arguments == {}
    assert PermissionDecision(request_id="r", behavior="deny").behavior is PermissionBehavior.DENY


def test_usage_adds_fieldwise() -> None:
    a = Usage(input_tokens=1, output_tokens=2, cache_read_tokens=3, cache_write_tokens=4)
    b = Usage(input_tokens=10, output_tokens=20, cache_read_tokens=30, cache_write_tokens=40)
    assert a + b == Usage(
        input_tokens=11, output_tokens=22, cache_read_tokens=33, cache_write_tokens=44
    )
    assert (a + b).total_tokens == 33
    assert not (a + b).estimated
    guessed = Usage(input_tokens=5, estimated=True)
    assert (a + guessed).estimated and (guessed + a).estimated  # a sum with an estimate in it
