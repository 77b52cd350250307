"""A wire-faithful fake of Ollama's ``POST /api/chat`` NDJSON streaming, plus ``/api/show``.

Each line is one JSON object: ``{"model", "created_at", "message": {"role", "content"},
"done": false}`` for text; tool calls arrive whole (Ollama does not stream argument fragments) as
``message.tool_calls: [{"id", "function": {"index", "name", "arguments": {...}}}]``; the last line
has ``"done": true`` with ``done_reason`` and the token counts (``prompt_eval_count``,
``eval_count``). Errors are ``{"error": "..."}`` — as a line mid-stream or as an HTTP body.
``/api/show`` answers the model's ``capabilities`` (``tools`` among them or not).
"""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.http_server import Action, FakeHTTPServer, RecordedRequest
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
    ToolCallEnd,
    ToolCallStart,
    TurnFactory,
    Usage,
)

__all__ = ["FakeOllamaServer"]

_CREATED_AT = "2024-01-01T00:00:00.000000Z"


def _line(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


class FakeOllamaServer(FakeHTTPServer):
    """Fake Ollama server; ``capabilities`` maps model name → its capability list."""

    stream_paths = ("/api/chat",)
    content_type = "application/x-ndjson"

    def __init__(
        self,
        script: Any = (),
        *,
        default: TurnFactory | None = None,
        capabilities: dict[str, list[str]] | None = None,
    ) -> None:
        super().__init__(script, default=default)
        self.capabilities = capabilities

    @property
    def sdk_base_url(self) -> str:
        """The base URL the Ollama adapter takes."""
        return self.base_url

    def context_overflow(
        self, overflow: ContextOverflow, request: Any
    ) -> ScriptedStatus | ScriptedTurn:
        """A 400 when truncation is off; else the answer to a silently shortened prompt."""
        if isinstance(request, dict) and request.get("truncate") is False:
            body = {"error": "the input length exceeds the context length"}
            return ScriptedStatus(status=400, body=body)
        turn = overflow.then or ScriptedTurn(steps=[Text(text="[fake] shortened"), Finish()])
        usage = next((st for st in turn.steps if isinstance(st, Usage)), None)
        out_tokens = usage.output_tokens if usage else 0
        steps = [st for st in turn.steps if not isinstance(st, Usage)]
        return turn.model_copy(
            update={"steps": [Usage(input_tokens=overflow.limit, output_tokens=out_tokens), *steps]}
        )

    def error_body(self, status: ScriptedStatus) -> bytes:
        """Ollama's error shape: ``{"error": "<message>"}``."""
        if status.body is not None:
            return json.dumps(status.body).encode()
        return json.dumps({"error": f"fake error {status.status}"}).encode()

    async def handle_other(self, req: RecordedRequest) -> tuple[int, Any] | None:
        """``/api/show`` (capabilities) and ``/api/version``."""
        if req.method == "POST" and req.path == "/api/show":
            model = (req.json or {}).get("model", "")
            if self.capabilities is None:
                return 200, {"capabilities": ["completion", "tools"], "details": {}}
            if model not in self.capabilities:
                return 404, {"error": f"model '{model}' not found"}
            return 200, {"capabilities": self.capabilities[model], "details": {}}
        if req.method == "GET" and req.path == "/api/version":
            return 200, {"version": "0.12.0-fake"}
        return None

    def render(self, turn: ScriptedTurn, request: Any) -> list[Action]:
        """Render the turn as NDJSON lines."""
        req = request if isinstance(request, dict) else {}
        model = req.get("model") or turn.model
        out: list[Action] = []
        calls: dict[int, tuple[str, str, list[str]]] = {}
        usage = Usage(input_tokens=0, output_tokens=0)

        def message(msg: dict[str, Any]) -> bytes:
            full = {"role": "assistant", "content": "", **msg}
            return _line(
                {"model": model, "created_at": _CREATED_AT, "message": full, "done": False}
            )

        for step in turn.steps:
            match step:
                case Text(text=text) | Refusal(text=text):
                    out.append(message({"content": text}))
                case ToolCallStart(index=i, id=call_id, name=name):
                    calls[i] = (call_id, name, [])
                case ToolCallArgs(index=i, fragment=frag):
                    calls[i][2].append(frag)
                case ToolCallEnd(index=i):
                    call_id, name, frags = calls.pop(i)
                    raw = "".join(frags)
                    if (error := _parse_error(raw)) is not None:
                        out.append(error)
                        return out  # Ollama ends the response with its parser's error
                    fn = {"index": i, "name": name, "arguments": json.loads(raw)}
                    call = {"id": call_id, "function": fn} if call_id else {"function": fn}
                    out.append(message({"tool_calls": [call]}))
                case Usage():
                    usage = step
                case Finish(reason=reason):
                    for _id, _name, frags in calls.values():  # a call the output limit cut off
                        if (error := _parse_error("".join(frags))) is not None:
                            out.append(error)
                            return out
                    reason_text = "length" if reason == "max_tokens" else "stop"
                    out.append(_done_line(model, reason_text, usage if turn.report_usage else None))
                case ErrorEvent(message=msg):
                    out.append(_line({"error": msg}))
                case Malformed(payload=payload):
                    out.append(payload.encode() + b"\n")
                case Raw(data=data):
                    out.append(data)
                case Delay() | Drop() | Cut():
                    out.append(step)
                case _:
                    pass  # Ping has no Ollama frame
        return out


def _parse_error(raw: str) -> bytes | None:
    """The error line Ollama's harmony parser ends a stream with, when ``raw`` is not JSON."""
    try:
        json.loads(raw)
    except json.JSONDecodeError as err:
        pos = err.pos
        if err.msg.startswith("Unterminated string") or pos >= len(raw.rstrip()):
            why = "unexpected end of JSON input"  # Go's words for a value cut short
        else:
            why = f"invalid character {raw[pos]!r} looking for beginning of value"
        return _line({"error": f"error parsing tool call: raw='{raw}', err={why}"})
    return None


def _done_line(model: str, reason: str, usage: Usage | None) -> bytes:
    """The last line; without ``usage`` it carries no counts (as servers that keep none)."""
    line: dict[str, object] = {
        "model": model,
        "created_at": _CREATED_AT,
        "message": {"role": "assistant", "content": ""},
        "done": True,
        "done_reason": reason,
        "total_duration": 1_000_000,
        "load_duration": 100_000,
    }
    if usage is not None:
        line |= {
            "prompt_eval_count": usage.input_tokens,
            "prompt_eval_duration": 200_000,
            "eval_count": usage.output_tokens,
            "eval_duration": 700_000,
        }
    return _line(line)
