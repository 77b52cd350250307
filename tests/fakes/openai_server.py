"""A wire-faithful fake of OpenAI Chat Completions streaming (``POST /v1/chat/completions``).

Frames are SSE ``data: <chunk>`` lines ending in ``data: [DONE]``; text arrives as
``delta.content``, tool calls as ``delta.tool_calls`` entries keyed by ``index`` (id and name in
the first, argument fragments after), the stop reason as ``finish_reason`` on a chunk with an empty
delta, and — only when the request sets ``stream_options.include_usage`` — a last chunk with
``choices: []`` and ``usage`` (every earlier chunk then carries ``"usage": null``). An error
mid-stream is a ``data: {"error": {...}}`` line, as the API sends it. A refusal arrives as
``delta.refusal`` pieces and ends with ``finish_reason: "stop"``; the output limit ends a response
with ``finish_reason: "length"`` (inside a tool call too). A prompt over the context window is a
400 with ``code: "context_length_exceeded"``.

Usable by ``soong-agent up --fake-provider``: ``FakeOpenAIServer(default=default_demo_turn)``.
"""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.http_server import Action, FakeHTTPServer
from tests.fakes.script import (
    ContextOverflow,
    Cut,
    Delay,
    Drop,
    ErrorEvent,
    Finish,
    Malformed,
    Raw,
    Refusal,
    ScriptedStatus,
    ScriptedTurn,
    Text,
    ToolCallArgs,
    ToolCallStart,
    Usage,
)

__all__ = ["FINISH_REASONS", "FakeOpenAIServer"]

FINISH_REASONS = {
    "end_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "stop_sequence": "stop",
    "refusal": "stop",
}


def _data(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


class FakeOpenAIServer(FakeHTTPServer):
    """Fake OpenAI-compatible server; ``base_url`` for the SDK is ``server.base_url + "/v1"``."""

    stream_paths = ("/v1/chat/completions", "/chat/completions")

    @property
    def sdk_base_url(self) -> str:
        """The ``base_url`` an OpenAI client takes (includes ``/v1``)."""
        return self.base_url + "/v1"

    def context_overflow(self, overflow: ContextOverflow, request: Any) -> ScriptedStatus:
        """OpenAI's 400 for a prompt over the context window."""
        message = (
            f"This model's maximum context length is {overflow.limit} tokens. However, your "
            f"messages resulted in {overflow.prompt_tokens} tokens. Please reduce the length of "
            "the messages."
        )
        err = {
            "message": message,
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
        return ScriptedStatus(status=400, body={"error": err})

    def error_body(self, status: ScriptedStatus) -> bytes:
        """OpenAI's error shape: ``{"error": {"message", "type", "param", "code"}}``."""
        if status.body is not None:
            return json.dumps(status.body).encode()
        kind = "rate_limit_exceeded" if status.status == 429 else "server_error"
        err = {"message": f"fake error {status.status}", "type": kind, "param": None, "code": kind}
        return json.dumps({"error": err}).encode()

    def render(self, turn: ScriptedTurn, request: Any) -> list[Action]:
        """Render the turn as Chat Completions SSE chunks."""
        req = request if isinstance(request, dict) else {}
        include_usage = turn.report_usage and bool(
            (req.get("stream_options") or {}).get("include_usage")
        )
        model = req.get("model") or turn.model

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            body: dict[str, Any] = {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": 1_700_000_000,
                "model": model,
                "system_fingerprint": None,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
            }
            if include_usage:
                body["usage"] = None
            return _data(body)

        out: list[Action] = [chunk({"role": "assistant", "content": "", "refusal": None})]
        usage = Usage(input_tokens=0, output_tokens=0)
        for step in turn.steps:
            match step:
                case Text(text=text):
                    out.append(chunk({"content": text}))
                case Refusal(text=text):
                    out.append(chunk({"refusal": text}))
                case ToolCallStart(index=i, id=call_id, name=name):
                    fn = {"name": name, "arguments": ""}
                    tc = {"index": i, "id": call_id, "type": "function", "function": fn}
                    out.append(chunk({"tool_calls": [tc]}))
                case ToolCallArgs(index=i, fragment=frag):
                    out.append(
                        chunk({"tool_calls": [{"index": i, "function": {"arguments": frag}}]})
                    )
                case Usage():
                    usage = step
                case Finish(reason=reason):
                    out.append(chunk({}, FINISH_REASONS[reason]))
                    if include_usage:
                        out.append(_usage_chunk(model, usage))
                    out.append(b"data: [DONE]\n\n")
                case ErrorEvent(error_type=kind, message=message):
                    err = {"message": message, "type": kind, "param": None, "code": None}
                    out.append(_data({"error": err}))
                case Malformed(payload=payload):
                    out.append(b"data: " + payload.encode() + b"\n\n")
                case Raw(data=data):
                    out.append(data)
                case Delay() | Drop() | Cut():
                    out.append(step)
                case _:
                    pass  # ToolCallEnd and Ping have no frame of their own in this format
        return out


def _usage_chunk(model: str, usage: Usage) -> bytes:
    return _data(
        {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": model,
            "system_fingerprint": None,
            "choices": [],
            "usage": {
                "prompt_tokens": usage.input_tokens,
                "completion_tokens": usage.output_tokens,
                "total_tokens": usage.input_tokens + usage.output_tokens,
            },
        }
    )
