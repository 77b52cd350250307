"""A wire-faithful fake of Anthropic Messages streaming (``POST /v1/messages``).

Frames are SSE ``event: <type>`` + ``data: <json>`` pairs: ``message_start`` (input usage),
``ping``, then per content block ``content_block_start`` / ``content_block_delta``
(``text_delta`` or ``input_json_delta``) / ``content_block_stop``, then ``message_delta``
(stop_reason and output usage) and ``message_stop``. Errors mid-stream are ``event: error`` with
``{"type": "error", "error": {"type", "message"}}``. Blocks are sequential in this format, so a
script that interleaves two tool calls' fragments is rejected. The output limit closes the open
block (``content_block_stop``, even inside a tool call's arguments) and says ``stop_reason:
"max_tokens"`` in ``message_delta``. A prompt over the context window is a 400
``invalid_request_error`` "prompt is too long: N tokens > M maximum".
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
    Ping,
    Raw,
    Refusal,
    ScriptedStatus,
    ScriptedTurn,
    Text,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)

__all__ = ["FakeAnthropicServer"]


def _event(name: str, obj: Any) -> bytes:
    data = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return f"event: {name}\ndata: {data}\n\n".encode()


class _Blocks:
    """Tracks the open content block, so frames name the right block index."""

    def __init__(self, out: list[Action]) -> None:
        self.out = out
        self.next_index = 0
        self.open: tuple[str, int] | None = None  # ("text", -1) or ("tool", script index)

    def close(self) -> None:
        if self.open is not None:
            idx = self.next_index - 1
            self.out.append(
                _event("content_block_stop", {"type": "content_block_stop", "index": idx})
            )
            self.open = None

    def start(self, key: tuple[str, int], block: dict[str, Any]) -> None:
        self.close()
        frame = {"type": "content_block_start", "index": self.next_index, "content_block": block}
        self.out.append(_event("content_block_start", frame))
        self.open = key
        self.next_index += 1

    def delta(self, key: tuple[str, int], delta: dict[str, Any]) -> None:
        if self.open != key:
            raise ValueError(f"Anthropic streams blocks one after another; {key} is not open")
        frame = {"type": "content_block_delta", "index": self.next_index - 1, "delta": delta}
        self.out.append(_event("content_block_delta", frame))


class FakeAnthropicServer(FakeHTTPServer):
    """Fake Anthropic server; ``base_url`` for the SDK is ``server.base_url``."""

    stream_paths = ("/v1/messages",)

    @property
    def sdk_base_url(self) -> str:
        """The ``base_url`` an Anthropic client takes."""
        return self.base_url

    def context_overflow(self, overflow: ContextOverflow, request: Any) -> ScriptedStatus:
        """Anthropic's 400 for a prompt over the context window."""
        message = f"prompt is too long: {overflow.prompt_tokens} tokens > {overflow.limit} maximum"
        err = {"type": "invalid_request_error", "message": message}
        return ScriptedStatus(
            status=400, body={"type": "error", "error": err, "request_id": "req_fake"}
        )

    def error_body(self, status: ScriptedStatus) -> bytes:
        """Anthropic's error shape: ``{"type": "error", "error": {"type", "message"}}``."""
        if status.body is not None:
            return json.dumps(status.body).encode()
        kind = {429: "rate_limit_error", 529: "overloaded_error"}.get(status.status, "api_error")
        err = {"type": kind, "message": f"fake error {status.status}"}
        return json.dumps({"type": "error", "error": err}).encode()

    def render(self, turn: ScriptedTurn, request: Any) -> list[Action]:
        """Render the turn as Messages SSE events."""
        req = request if isinstance(request, dict) else {}
        model = req.get("model") or turn.model
        usage = next((s for s in turn.steps if isinstance(s, Usage)), None)
        in_tokens = usage.input_tokens if usage else 0
        out: list[Action] = [_message_start(model, in_tokens), _event("ping", {"type": "ping"})]
        blocks = _Blocks(out)
        for step in turn.steps:
            match step:
                case Text(text=text) | Refusal(text=text):
                    if blocks.open != ("text", -1):
                        blocks.start(("text", -1), {"type": "text", "text": ""})
                    blocks.delta(("text", -1), {"type": "text_delta", "text": text})
                case ToolCallStart(index=i, id=call_id, name=name):
                    block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
                    blocks.start(("tool", i), block)
                case ToolCallArgs(index=i, fragment=frag):
                    blocks.delta(("tool", i), {"type": "input_json_delta", "partial_json": frag})
                case ToolCallEnd():
                    blocks.close()
                case Finish(reason=reason):
                    blocks.close()
                    out.append(_message_delta(reason, usage))
                    out.append(_event("message_stop", {"type": "message_stop"}))
                case ErrorEvent(error_type=kind, message=message):
                    err = {"type": "error", "error": {"type": kind, "message": message}}
                    out.append(_event("error", err))
                case Malformed(payload=payload):
                    out.append(f"event: content_block_delta\ndata: {payload}\n\n".encode())
                case Ping():
                    out.append(_event("ping", {"type": "ping"}))
                case Raw(data=data):
                    out.append(data)
                case Delay() | Drop() | Cut():
                    out.append(step)
                case _:
                    pass  # Usage is rendered in message_start / message_delta
        return out


def _message_start(model: str, input_tokens: int) -> bytes:
    message = {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1},
    }
    return _event("message_start", {"type": "message_start", "message": message})


def _message_delta(reason: str, usage: Usage | None) -> bytes:
    frame = {
        "type": "message_delta",
        "delta": {"stop_reason": reason, "stop_sequence": None},
        "usage": {"output_tokens": usage.output_tokens if usage else 0},
    }
    return _event("message_delta", frame)
