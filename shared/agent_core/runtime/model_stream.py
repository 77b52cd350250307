"""One model call of the agent loop, streamed into a :class:`ModelResponse`.

:func:`stream_response` consumes the model's stream for one turn: each text delta is emitted as a
``RunTextDelta`` (with its offset in the turn's text) and kept as the loop's partial text
(``StepContext.set_partial_text``) until a stored node holds it; finished tool calls, usage and the
stop reason are collected; a call the model got wrong (arguments that are not a JSON object, or cut
off by the output limit) is kept in the answer and answered with an error result instead of being
run (:func:`rejected_call`). A provider error — in the stream or before its first event — becomes
the response's ``error``, never an exception. The stream is always closed, cancellation included.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent_core.errors import AgentCoreError, ErrorPayload
from agent_core.provider.errors import ProviderErrorCode
from agent_core.runtime.steps import StepContext
from agent_core.types.enums import InvalidToolCallReason, StopReason
from agent_core.types.protocol import (
    RAW_ARGUMENTS_MAX,
    ContentBlock,
    ErrorEvent,
    MessageEndEvent,
    ModelRequest,
    TextBlock,
    TextDeltaEvent,
    ToolCall,
    ToolCallBlock,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallInvalidEvent,
    ToolCallStartEvent,
    ToolResult,
    Usage,
    UsageEvent,
)
from agent_core.types.runtime import RunTextDelta

__all__ = ["ModelResponse", "assistant_blocks", "rejected_call", "stream_response"]

# How much of a parser's complaint the model is shown (it names the position, not the text).
_PARSER_ERROR_CHARS = 300
# Model events that mean the answer has begun to arrive (the model phase becomes ``streaming``).
_ARRIVING = (TextDeltaEvent, ToolCallStartEvent, ToolCallDeltaEvent, ToolCallEndEvent)


def rejected_call(event: ToolCallInvalidEvent) -> tuple[ToolCall, ToolResult]:
    """A streamed call the model must fix, and the error result that tells it how.

    The call stays in the model's answer (without arguments: they were not a JSON object) so the
    next request pairs it with its result; it is never executed. A call the output limit cut off
    is asked for again the same way, in smaller pieces."""
    name = event.name or "unnamed_tool"
    if event.reason is InvalidToolCallReason.TRUNCATED:
        code = ProviderErrorCode.TOOL_CALL_TRUNCATED.value
        text = (
            f"Your call to {name!r} was cut off by the output limit before its arguments were "
            "complete, so it was not run. Call it again with shorter arguments (split large "
            "content over several calls)."
        )
    else:
        code = ProviderErrorCode.INVALID_TOOL_ARGUMENTS.value
        text = (
            f"Your call to {name!r} was not run: its arguments are not a valid JSON object "
            f"({event.error[:_PARSER_ERROR_CHARS]}). Call it again with the arguments as one "
            "JSON object."
        )
    result = ToolResult(
        tool_call_id=event.id,
        content=[TextBlock(text=text)],
        is_error=True,
        metadata={"error_code": code},
    )
    return ToolCall(id=event.id, name=name), result


@dataclass
class ModelResponse:
    """What one model call answered: its text and tool calls, usage, stop reason or error."""

    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    usage_reported: bool = False  # whether the provider sent any usage at all
    stop: StopReason = StopReason.END_TURN
    error: ErrorPayload | None = None
    # Calls the model got wrong, by id, answered without running (see ``rejected_call``).
    rejected: dict[str, ToolResult] = field(default_factory=dict)
    # The raw text of the calls whose arguments were not JSON, by id (kept on their blocks).
    raw_arguments: dict[str, str] = field(default_factory=dict)


async def stream_response(ctx: StepContext, request: ModelRequest, *, turn: int) -> ModelResponse:
    """Stream one model call on ``request`` into a response (see the module docstring).
    ``turn``: the turn being streamed, counted from 1 as its phase events are."""
    response = ModelResponse()
    arriving = False
    try:
        stream = ctx.model.stream(request)
        try:
            async for event in stream:
                if not arriving and isinstance(event, _ARRIVING):
                    arriving = True
                    ctx.announce_phase("streaming")
                if isinstance(event, TextDeltaEvent):
                    delta = ctx.event(
                        RunTextDelta,
                        turn=turn,
                        text=event.text,
                        attempt=ctx.handle.attempt,
                        offset=len(response.text),
                    )
                    response.text += event.text
                    ctx.set_partial_text(response.text)
                    ctx.events.emit(delta)
                elif isinstance(event, ToolCallEndEvent):
                    response.calls.append(
                        ToolCall(id=event.id, name=event.name, arguments=event.arguments)
                    )
                elif isinstance(event, UsageEvent):
                    response.usage = response.usage + event.usage
                    response.usage_reported = True
                elif isinstance(event, MessageEndEvent):
                    response.stop = event.stop_reason
                elif isinstance(event, ToolCallInvalidEvent):
                    # The model's to fix: answered with an error result, never executed.
                    call, result = rejected_call(event)
                    response.calls.append(call)
                    response.rejected[call.id] = result
                    if event.reason is InvalidToolCallReason.INVALID_ARGUMENTS:
                        # Kept for memory: the invalid call, then the fixed one, is a lesson. A
                        # call the output limit cut off teaches nothing about JSON.
                        raw = event.raw_arguments[:RAW_ARGUMENTS_MAX]
                        response.raw_arguments[call.id] = raw
                elif isinstance(event, ErrorEvent):
                    response.error = event.error
        finally:
            # Closing the generator closes the HTTP stream (cancellation included).
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()
    except AgentCoreError as exc:  # ProviderError before the first event, capability errors
        response.error = exc.to_payload()
    return response


def assistant_blocks(response: ModelResponse) -> list[ContentBlock]:
    """The assistant node's content: its text, then its tool calls (an empty text when neither)."""
    blocks: list[ContentBlock] = []
    if response.text:
        blocks.append(TextBlock(text=response.text))
    raw = response.raw_arguments
    blocks += [
        ToolCallBlock(id=c.id, name=c.name, arguments=c.arguments, raw_arguments=raw.get(c.id))
        for c in response.calls
    ]
    return blocks or [TextBlock(text="")]
