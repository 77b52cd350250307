"""Provider-neutral scripts for the wire-faithful fake provider servers.

A fake server answers each request with the next :class:`ScriptedResponse` of its script: either
a :class:`ScriptedStatus` (an HTTP error with headers, e.g. 429 + Retry-After) or a
:class:`ScriptedTurn` (a streamed answer made of steps). Each server renders the same steps into
its own wire format (OpenAI SSE, Anthropic SSE, Ollama NDJSON), so one script exercises all three
adapters. When the script is exhausted, the server's ``default`` factory answers (the demo mode
uses :func:`default_demo_turn`); without a default the server answers 500 and records the miss.

Scripted limits, each rendered in the provider's real shape so the loop can be tested through them:
:class:`ContextOverflow` (the prompt does not fit the context window), a ``Finish(reason=
"max_tokens")`` (the output limit cut the answer; :func:`cut_tool_call_turn` cuts it inside a tool
call) and :func:`invalid_tool_call_turn` (the model wrote arguments that are not JSON).

THESE ARE FAKES: no model runs behind them. Demo output is labelled as such.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ContextOverflow",
    "Cut",
    "Delay",
    "Drop",
    "ErrorEvent",
    "Finish",
    "Malformed",
    "Ping",
    "Raw",
    "Refusal",
    "ScriptedResponse",
    "ScriptedStatus",
    "ScriptedTurn",
    "Step",
    "Text",
    "ToolCallArgs",
    "ToolCallEnd",
    "ToolCallStart",
    "TurnFactory",
    "Usage",
    "cut_tool_call_turn",
    "default_demo_turn",
    "fail_first",
    "invalid_tool_call_turn",
    "text_turn",
    "tool_call",
]

StopKind = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal"]


class _Step(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Text(_Step):
    """One text delta frame."""

    type: Literal["text"] = "text"
    text: str


class Refusal(_Step):
    """Refusal text: OpenAI ``delta.refusal``; the other formats stream it as text."""

    type: Literal["refusal"] = "refusal"
    text: str


class ToolCallStart(_Step):
    """The first frame of a tool call: id and name (OpenAI ``index`` / Anthropic block).

    An empty ``id`` is sent as no id at all where the format allows it (Ollama before 0.12).
    """

    type: Literal["tool_call_start"] = "tool_call_start"
    index: int
    id: str
    name: str


class ToolCallArgs(_Step):
    """One fragment of a tool call's JSON arguments (may split JSON and unicode anywhere)."""

    type: Literal["tool_call_args"] = "tool_call_args"
    index: int
    fragment: str


class ToolCallEnd(_Step):
    """End of a tool call (Anthropic ``content_block_stop``; Ollama emits the whole call here)."""

    type: Literal["tool_call_end"] = "tool_call_end"
    index: int


class Usage(_Step):
    """Token usage, rendered where the wire format puts it (final chunk / message_delta)."""

    type: Literal["usage"] = "usage"
    input_tokens: int
    output_tokens: int


class Finish(_Step):
    """The stop reason; renders the final frames (finish_reason / message_delta / done line)."""

    type: Literal["finish"] = "finish"
    reason: StopKind = "end_turn"


class ErrorEvent(_Step):
    """An error reported inside a 200 stream (OpenAI ``error`` chunk, Anthropic ``event: error``)."""

    type: Literal["error"] = "error"
    error_type: str = "overloaded_error"
    message: str = "Overloaded"


class Delay(_Step):
    """Sleep before the next frame (the server notices a client disconnect while waiting)."""

    type: Literal["delay"] = "delay"
    seconds: float


class Drop(_Step):
    """Close the connection abruptly, without finishing the chunked body."""

    type: Literal["drop"] = "drop"


class Cut(_Step):
    """Write only the first ``keep`` bytes of the next frame, then end the response there.

    The body ends cleanly (chunked terminator), as a proxy does when its upstream dies, or with a
    dropped connection when ``drop`` is set. Steps after it are never sent.
    """

    type: Literal["cut"] = "cut"
    keep: int = Field(ge=0)
    drop: bool = False


class Malformed(_Step):
    """A frame whose JSON payload is broken."""

    type: Literal["malformed"] = "malformed"
    payload: str = '{"broken": '


class Ping(_Step):
    """Anthropic ``event: ping``; other formats ignore it."""

    type: Literal["ping"] = "ping"


class Raw(_Step):
    """Literal bytes written as one frame, for cases no other step covers."""

    type: Literal["raw"] = "raw"
    data: bytes


Step = Annotated[
    Text
    | Refusal
    | ToolCallStart
    | ToolCallArgs
    | ToolCallEnd
    | Usage
    | Finish
    | ErrorEvent
    | Delay
    | Drop
    | Cut
    | Malformed
    | Ping
    | Raw,
    Field(discriminator="type"),
]


class ScriptedTurn(BaseModel):
    """A streamed 200 answer: steps rendered in order into the server's wire format.

    ``split_multibyte`` writes every frame that contains a multi-byte UTF-8 character in two
    writes split inside that character's bytes (with ``split_pause`` between them), so a client
    decoder sees half a character. ``write_size`` instead slices every frame into writes of at
    most that many bytes. ``gzip`` sends the body with ``content-encoding: gzip``, each frame
    flushed through the compressor as it is written (a proxy compressing a stream).
    """

    model_config = ConfigDict(extra="forbid")

    steps: list[Step] = Field(default_factory=list)
    model: str = "fake-model"
    # A 200 stream with no data at all, not even the opening frame: how llama.cpp's server
    # answers an error it meets while streaming (a prompt over its window).
    silent: bool = False
    # False: no usage anywhere on the wire, as many local servers answer (llama.cpp's among them).
    report_usage: bool = True
    split_multibyte: bool = False
    write_size: int | None = None
    split_pause: float = 0.005
    gzip: bool = False


class ScriptedStatus(BaseModel):
    """An HTTP error answer (status, headers such as Retry-After, JSON body) before any stream."""

    model_config = ConfigDict(extra="forbid")

    status: int
    headers: dict[str, str] = Field(default_factory=dict)
    body: Any = None


class ContextOverflow(BaseModel):
    """The prompt does not fit the model's context window, answered in each provider's shape.

    OpenAI: 400 ``context_length_exceeded``; Anthropic: 400 ``invalid_request_error`` "prompt is
    too long: N tokens > M maximum"; Ollama: 400 "the input length exceeds the context length"
    when the request says ``truncate: false`` — otherwise Ollama silently drops the oldest messages
    and answers ``then`` with ``prompt_eval_count`` equal to the window.
    """

    model_config = ConfigDict(extra="forbid")

    prompt_tokens: int = 210_000
    limit: int = 200_000
    then: ScriptedTurn | None = None


ScriptedResponse = ScriptedTurn | ScriptedStatus | ContextOverflow
TurnFactory = Callable[[Any], ScriptedResponse]
"""Builds an answer from the recorded request body (a parsed JSON value) when the script is empty."""


def tool_call(index: int, call_id: str, name: str, fragments: Sequence[str]) -> list[Step]:
    """The steps of one complete tool call whose arguments arrive in ``fragments``."""
    steps: list[Step] = [ToolCallStart(index=index, id=call_id, name=name)]
    steps.extend(ToolCallArgs(index=index, fragment=f) for f in fragments)
    steps.append(ToolCallEnd(index=index))
    return steps


def text_turn(
    *pieces: str, usage: tuple[int, int] | None = (3, 5), reason: StopKind = "end_turn"
) -> ScriptedTurn:
    """A turn that streams ``pieces`` as text deltas, then usage and the stop reason
    (``usage=None``: a server that reports none)."""
    steps: list[Step] = [Text(text=p) for p in pieces]
    if usage is not None:
        steps.append(Usage(input_tokens=usage[0], output_tokens=usage[1]))
    steps.append(Finish(reason=reason))
    return ScriptedTurn(steps=steps, report_usage=usage is not None)


def cut_tool_call_turn(
    text: str, call_id: str, name: str, fragments: Sequence[str], *, usage: tuple[int, int] = (9, 7)
) -> ScriptedTurn:
    """Text, then a tool call whose arguments the output limit cut off (no end, ``max_tokens``)."""
    steps: list[Step] = [Text(text=text)] if text else []
    steps.append(ToolCallStart(index=0, id=call_id, name=name))
    steps.extend(ToolCallArgs(index=0, fragment=f) for f in fragments)
    steps += [Usage(input_tokens=usage[0], output_tokens=usage[1]), Finish(reason="max_tokens")]
    return ScriptedTurn(steps=steps)


def invalid_tool_call_turn(call_id: str, name: str, raw_arguments: str) -> ScriptedTurn:
    """A complete tool call whose arguments are not valid JSON (common with local models)."""
    steps: list[Step] = [
        *tool_call(0, call_id, name, [raw_arguments]),
        Usage(input_tokens=9, output_tokens=7),
        Finish(reason="tool_use"),
    ]
    return ScriptedTurn(steps=steps)


def fail_first(
    n: int, status: int = 429, *, retry_after: str | None = "0", body: Any = None
) -> list[ScriptedStatus]:
    """``n`` identical error answers, e.g. 429 with ``Retry-After`` for the first N requests."""
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    # body=None lets each server answer in its own error format.
    return [ScriptedStatus(status=status, headers=headers, body=body) for _ in range(n)]


def default_demo_turn(_request: Any) -> ScriptedResponse:
    """The demo answer to any request: a short text that says it comes from a fake provider."""
    return text_turn("[fake provider] ", "Hello! ", "This reply comes from a scripted fake server.")
