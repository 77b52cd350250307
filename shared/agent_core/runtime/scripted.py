"""A scripted model and a lookup tool: deterministic stand-ins for tests, benchmarks and demos.

:class:`ScriptedModel` is a real :class:`~agent_core.provider.base.ProviderAdapter` that answers
each request with a pure function of it — stateless, so any number of concurrent runs can share
it. It is registered through the provider registry like any adapter (key ``fake``), and
``soong-agent up --fake-provider`` labels itself a demo when it is in use.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from agent_core.types.enums import Role, StopReason
from agent_core.types.protocol import (
    MessageEndEvent,
    MessageStartEvent,
    ModelEvent,
    ModelRequest,
    TextDeltaEvent,
    ToolCall,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolResultBlock,
    Usage,
    UsageEvent,
)

__all__ = ["ScriptedModel", "ScriptedReply", "tool_then_answer"]


@dataclass(frozen=True)
class ScriptedReply:
    """One response: text (streamed in ``chunk_chars`` pieces, or as the given ``pieces``)
    and/or tool calls; ``delay_s`` before each piece of text, or once before the tool calls of a
    reply without text."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    chunk_chars: int = 64
    delay_s: float = 0.0
    pieces: tuple[str, ...] = ()
    # ``None``: no usage at all, as many local servers answer.
    usage: Usage | None = field(default_factory=lambda: Usage(input_tokens=10, output_tokens=10))


class ScriptedModel:
    """A provider adapter whose responses come from ``reply(request)``."""

    def __init__(self, reply: Callable[[ModelRequest], ScriptedReply]) -> None:
        self._reply = reply

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream the scripted response as normalized model events."""
        reply = self._reply(request)
        yield MessageStartEvent(model=request.model, response_id="scripted")
        text, size = reply.text, reply.chunk_chars
        pieces = reply.pieces or tuple(text[i : i + size] for i in range(0, len(text), size))
        for piece in pieces:
            if reply.delay_s:
                await asyncio.sleep(reply.delay_s)
            yield TextDeltaEvent(text=piece)
        if reply.delay_s and not pieces and reply.tool_calls:
            await asyncio.sleep(reply.delay_s)
        for index, call in enumerate(reply.tool_calls):
            yield ToolCallStartEvent(index=index, id=call.id, name=call.name)
            yield ToolCallDeltaEvent(index=index, arguments_delta="{}")
            yield ToolCallEndEvent(
                index=index, id=call.id, name=call.name, arguments=call.arguments
            )
        if reply.usage is not None:
            yield UsageEvent(usage=reply.usage)
        stop = StopReason.TOOL_USE if reply.tool_calls else StopReason.END_TURN
        yield MessageEndEvent(stop_reason=stop, raw_stop_reason=stop.value)


# About 1 KB (the benchmarks' answer size), whole sentences.
DEMO_ANSWER = (
    "[fake model] This answer comes from the scripted demo model of soong-agent, not from an "
    "LLM. It looked your message up with the lookup tool, a demo tool that always returns the "
    "same short text, and answers with this fixed paragraph, streamed in pieces as a real "
    "model's answer would be. The demo can show more than one tool: send the word help to see "
    "the steps it can walk you through, from files written and read back, Python run in a "
    "sandbox and a task list, to a worker agent, a tool that asks you for permission first, a "
    "long answer streamed word by word and a model call that fails on request. Every one of "
    "them leaves its trace in the session: nodes in the conversation tree, events on the "
    "timeline, files in the workspace. To talk to a real model instead, set the key of your "
    "provider (OPENAI_API_KEY, ANTHROPIC_API_KEY, or a server of your own) and start the stack "
    "with make run; docs/providers.md shows a tested configuration for each kind of provider."
)
DEMO_SUMMARY = "[fake model] A summary of the earlier conversation (scripted, not an LLM's)."


def tool_then_answer(
    tool_name: str = "lookup", answer: str = DEMO_ANSWER
) -> Callable[[ModelRequest], ScriptedReply]:
    """The peers' workload: a user message → one tool call; a tool result → a ~1 KB answer."""

    def reply(request: ModelRequest) -> ScriptedReply:
        if request.metadata.get("purpose") == "compact":  # the summarizer of a compaction
            return ScriptedReply(text=DEMO_SUMMARY)
        last = request.messages[-1]
        answered = last.role is Role.TOOL or any(
            isinstance(b, ToolResultBlock) for b in last.content
        )
        if answered:
            return ScriptedReply(text=answer, chunk_chars=256)
        query = next((getattr(b, "text", "") for b in last.content), "")[:32]
        call = ToolCall(id="call_" + secrets.token_hex(6), name=tool_name, arguments={"q": query})
        return ScriptedReply(tool_calls=[call])

    return reply
