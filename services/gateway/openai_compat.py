"""The OpenAI-compatible surface's pure parts: request models, the message mapping, response ids,
and the translation of a run's event stream into OpenAI's shapes. No I/O here (the routes are
:mod:`services.gateway.routes_openai`), so all of it is unit-tested alone.

What a request becomes (see the README's "OpenAI-compatible endpoint" and docs/architecture.md):

- ``model`` names one of the account's assistants; a conversation is a session made from it.
- Chat Completions: without ``X-Soong-Session-Id`` a new session is made and the client's whole
  message list is its first user turn — earlier messages as one context block (a transcript),
  the last message (which must be the user's) as it is. With the header the session already
  holds the history, so only the last message (the user's) is posted.
- Responses: ``input`` is the new turn (a string, or message items: the last one the user's,
  earlier ones as a transcript block); ``instructions`` go first as a block of their own;
  ``previous_response_id`` continues after that response's answer.

The answer's text is every text delta of the run (not of its child runs), in order; text of a
turn that ended in tool calls is kept apart from the next turn's by a blank line. Tool calls stay
server-side: they are never OpenAI ``tool_calls``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_core.errors import redact

__all__ = [
    "ChatCompletionRequest",
    "ChatStream",
    "Finished",
    "MappingError",
    "ResponsesRequest",
    "ResponsesStream",
    "RunText",
    "chat_completion",
    "chat_turn",
    "error_body",
    "openai_error_of",
    "parse_response_id",
    "response_id",
    "response_object",
    "responses_turn",
]


# ------------------------------------------------------------------------------ request bodies


class _Forbid(BaseModel):
    # OpenAI refuses a field it does not know ("Unrecognized request argument"): so do these.
    model_config = ConfigDict(extra="forbid")


class TextPart(_Forbid):
    """A text part of a chat message's content (image, audio and file parts are refused)."""

    type: Literal["text"]
    text: str = Field(max_length=1_000_000)


_Content = str | Annotated[list[TextPart], Field(max_length=256)]


class ChatMessage(_Forbid):
    """A message of ``messages``; ``tool`` messages and ``tool_calls`` (client-side tools) are
    refused: the assistant's tools run on the server."""

    role: Literal["system", "developer", "user", "assistant"]
    content: _Content | None = Field(default=None)
    name: str | None = Field(default=None, max_length=64)
    refusal: str | None = Field(default=None, max_length=100_000)


class StreamOptions(_Forbid):
    """``include_usage`` is honoured; ``include_obfuscation`` is accepted and ignored."""

    include_usage: bool | None = None
    include_obfuscation: bool | None = None


class TextFormat(_Forbid):
    """Only plain text answers (``json_object`` / ``json_schema`` are refused)."""

    type: Literal["text"]


_Model = Annotated[str, Field(min_length=1, max_length=64, description="an assistant's name/id")]
_Ignored = Field(default=None, description="accepted and ignored: the assistant decides")
_NoTools = Annotated[list[Any], Field(max_length=0, description="client-side tools: refused")]


class _Common(_Forbid):
    """Fields both APIs take. Sampling and limits belong to the assistant's definition, so they
    are accepted and ignored; ``store`` is ignored (a session is always stored)."""

    model: _Model
    stream: bool | None = False
    temperature: float | None = _Ignored
    top_p: float | None = _Ignored
    user: str | None = Field(default=None, max_length=512)
    safety_identifier: str | None = Field(default=None, max_length=512)
    prompt_cache_key: str | None = Field(default=None, max_length=512)
    metadata: dict[str, str] | None = Field(default=None, max_length=16)
    store: bool | None = None
    service_tier: str | None = Field(default=None, max_length=32)
    parallel_tool_calls: bool | None = None
    tools: _NoTools | None = None
    tool_choice: Literal["none", "auto"] | None = None


class ChatCompletionRequest(_Common):
    """``POST /v1/openai/chat/completions``: honoured are ``model``, ``messages``, ``stream``,
    ``stream_options.include_usage`` and ``n`` (1 only)."""

    messages: list[ChatMessage] = Field(min_length=1, max_length=1000)
    stream_options: StreamOptions | None = None
    n: int | None = Field(default=None, ge=1, le=1)
    max_tokens: int | None = _Ignored
    max_completion_tokens: int | None = _Ignored
    presence_penalty: float | None = _Ignored
    frequency_penalty: float | None = _Ignored
    stop: str | Annotated[list[str], Field(max_length=4)] | None = _Ignored
    seed: int | None = _Ignored
    reasoning_effort: str | None = Field(default=None, max_length=32)
    verbosity: str | None = Field(default=None, max_length=32)
    logprobs: Literal[False] | None = None
    response_format: TextFormat | None = None
    modalities: list[Literal["text"]] | None = None


class InputText(_Forbid):
    type: Literal["input_text", "output_text"]
    text: str = Field(max_length=1_000_000)
    # An output item sent back as input carries these.
    annotations: list[Any] | None = None
    logprobs: list[Any] | None = None


class InputMessage(_Forbid):
    """A message item of ``input`` (other item types — function call outputs, … — are refused)."""

    type: Literal["message"] | None = None
    role: Literal["system", "developer", "user", "assistant"]
    content: str | Annotated[list[InputText], Field(max_length=256)]
    id: str | None = Field(default=None, max_length=128)
    status: str | None = Field(default=None, max_length=32)


class TextConfig(_Forbid):
    format: TextFormat | None = None
    verbosity: str | None = Field(default=None, max_length=32)


class ResponsesStreamOptions(_Forbid):
    include_obfuscation: bool | None = None


class ResponsesRequest(_Common):
    """``POST /v1/openai/responses``: honoured are ``model``, ``input``, ``instructions``,
    ``previous_response_id``, ``stream`` and ``metadata`` (echoed back)."""

    input: str | Annotated[list[InputMessage], Field(min_length=1, max_length=1000)]
    instructions: str | None = Field(default=None, max_length=1_000_000)
    previous_response_id: str | None = Field(default=None, max_length=128)
    stream_options: ResponsesStreamOptions | None = None
    max_output_tokens: int | None = _Ignored
    reasoning: dict[str, str | None] | None = _Ignored
    text: TextConfig | None = None
    truncation: Literal["auto", "disabled"] | None = None
    include: list[str] | None = Field(default=None, max_length=16)
    background: Literal[False] | None = None


# ------------------------------------------------------------------------------ the turn posted


class MappingError(ValueError):
    """A body that validates but cannot be mapped onto a turn (a 400 naming ``param``)."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param
        self.message = message


def _text(content: str | list[TextPart] | list[InputText] | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(part.text for part in content)


def _transcript(messages: list[ChatMessage] | list[InputMessage]) -> str:
    """Earlier messages as one context block: each under its role."""
    lines = ["Earlier in this conversation (as the client sent it):"]
    lines += [f"[{m.role}]\n{_text(m.content)}" for m in messages]
    return "\n\n".join(lines)


def _last_user(messages: list[ChatMessage] | list[InputMessage], param: str) -> str:
    last = messages[-1]
    if last.role != "user":
        raise MappingError(param, "the last message must be the user's (role `user`)")
    text = _text(last.content)
    if not text.strip():
        raise MappingError(param, "the last user message has no text")
    return text


def chat_turn(messages: list[ChatMessage], *, continuing: bool) -> list[str]:
    """The text blocks posted for a chat request: the last (user) message, with the earlier
    messages as a transcript block before it when the session is new."""
    last = _last_user(messages, f"messages[{len(messages) - 1}]")
    if continuing or len(messages) == 1:
        return [last]
    return [_transcript(messages[:-1]), last]


def responses_turn(body: ResponsesRequest) -> list[str]:
    """The text blocks posted for a Responses request: ``instructions``, earlier input items as
    a transcript, then the last (user) item."""
    items = (
        [InputMessage(role="user", content=body.input)]
        if isinstance(body.input, str)
        else body.input
    )
    last = _last_user(items, "input")
    blocks = [f"Instructions:\n{body.instructions}"] if body.instructions else []
    if len(items) > 1:
        blocks.append(_transcript(items[:-1]))
    return [*blocks, last]


# ------------------------------------------------------------------------------ response ids

_RESP: Final = "resp_"
_HEX16: Final = re.compile("[0-9a-f]{16}")  # a run id's body (agent_core.ids.new_id)


def response_id(session_id: str, run_id: str) -> str:
    """A response's id: its session and run (``resp_<session suffix>_<run hex>``), so that
    ``previous_response_id`` needs no table of its own."""
    return f"{_RESP}{session_id.removeprefix('sess_')}_{run_id.removeprefix('run_')}"


def parse_response_id(value: str) -> tuple[str, str] | None:
    """The session and run a response id names, or ``None`` for anything else."""
    if not value.startswith(_RESP):
        return None
    session_part, _, run_hex = value[len(_RESP) :].rpartition("_")
    session_id, run_id = f"sess_{session_part}", f"run_{run_hex}"
    if not _HEX16.fullmatch(run_hex) or not session_part or len(session_id) > 64:
        return None
    if not set(session_part) <= set("abcdefghijklmnopqrstuvwxyz0123456789_"):
        return None
    return session_id, run_id


# ------------------------------------------------------------------------------ a run's stream


@dataclass(frozen=True, slots=True)
class Finished:
    """How the run ended (its ``run_finished``): an OpenAI outcome, the usage and any error."""

    outcome: Literal["stop", "length", "cancelled", "failed"]
    usage: dict[str, Any]
    error_code: str | None = None
    error_message: str | None = None

    @classmethod
    def of(cls, event: dict[str, Any]) -> Finished:
        """From a ``run_finished`` event's JSON."""
        error = event.get("error") or {}
        return cls(
            outcome=outcome(str(event.get("status")), event.get("end_reason")),
            usage=event.get("usage") or {},
            error_code=error.get("code"),
            error_message=error.get("message"),
        )


def outcome(
    status: str, end_reason: str | None
) -> Literal["stop", "length", "cancelled", "failed"]:
    """A run's terminal status and end reason as OpenAI tells an answer's end: ``length`` for
    an answer cut by a limit (``max_turns``, the output limit past its continuations)."""
    if status == "completed":
        return "length" if end_reason in ("max_turns", "max_output_tokens_recovery") else "stop"
    return "cancelled" if status == "cancelled" else "failed"


# A fact of the run: a piece of the answer's text, a keep-alive (None) or the end.
Fact = str | Finished | None
_KEEPALIVE: Final = b": keep-alive\n\n"


@dataclass
class RunText:
    """Reads one run's SSE frames (our own stream, as :mod:`services.gateway.sse` writes it)
    and tells the facts an OpenAI answer is made of.

    Only the run's own events count (a parent's stream carries its child runs' too). A turn
    streamed again by a new attempt (a run taken over after its worker was lost) says where its
    text restarts (``offset``): what was already sent of that turn is not sent twice.
    """

    run_id: str
    finished: Finished | None = None
    _buffer: bytes = b""
    _turn: int = -1
    _sent_in_turn: int = 0
    _any_text: bool = False
    _tools_since_text: bool = False

    def feed(self, chunk: bytes) -> list[Fact]:
        """The facts in ``chunk`` (frames may span chunks)."""
        self._buffer += chunk
        if b"\n\n" not in self._buffer:
            return []
        *frames, self._buffer = self._buffer.split(b"\n\n")
        facts: list[Fact] = []
        for frame in frames:
            if frame.startswith(b":"):
                facts.append(None)
                continue
            kind, data = _event_of(frame)
            if kind not in _READ:
                continue  # retry:, or an event that says nothing here
            event = json.loads(data)
            if event.get("run_id") != self.run_id:
                continue  # a child run's
            if kind == b"text_delta":
                piece = self._piece(event)
                if piece:
                    facts.append(piece)
            elif kind == b"tool_started":
                self._tools_since_text = self._any_text
            else:
                self.finished = Finished.of(event)
                facts.append(self.finished)
        return facts

    def _piece(self, event: dict[str, Any]) -> str:
        turn, text, offset = int(event.get("turn") or 0), str(event.get("text") or ""), None
        if event.get("offset") is not None:
            offset = int(event["offset"])
        if turn != self._turn:
            self._turn, self._sent_in_turn = turn, 0
        start = self._sent_in_turn if offset is None else offset
        skip = max(0, self._sent_in_turn - start)
        piece = text[skip:]
        self._sent_in_turn = max(self._sent_in_turn, start + len(text))
        if not piece:
            return ""
        if self._tools_since_text:
            piece = "\n\n" + piece
            self._tools_since_text = False
        self._any_text = True
        return piece


_READ: Final = frozenset({b"text_delta", b"tool_started", b"run_finished"})
_EVENT: Final = b"event: "
_DATA: Final = b"data: "


def _event_of(frame: bytes) -> tuple[bytes | None, bytes]:
    kind: bytes | None = None
    data = b""
    for line in frame.split(b"\n"):
        if line.startswith(_EVENT):
            kind = line[len(_EVENT) :]
        elif line.startswith(_DATA):
            data = line[len(_DATA) :]
    return kind, data


# ------------------------------------------------------------------------------ OpenAI's shapes

# JSON escapes CR and LF, not these, which many clients split lines on (see sse.py).
_LINE_BREAKS: Final = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).translate(_LINE_BREAKS)


def error_body(
    message: str, *, type: str, code: str | None, param: str | None = None
) -> dict[str, Any]:
    """OpenAI's error body (the message redacted)."""
    return {"error": {"message": redact(message), "type": type, "param": param, "code": code}}


def _error_of(finished: Finished) -> tuple[str, str]:
    """The code and message of a run that did not answer."""
    if finished.outcome == "cancelled":
        return "run_cancelled", "the run was cancelled"
    return (
        finished.error_code or "run_failed",
        finished.error_message or "the run failed",
    )


def chat_usage(usage: dict[str, Any]) -> dict[str, Any]:
    """A run's usage as Chat Completions reports it."""
    prompt, completion = int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": int(usage.get("cache_read_tokens", 0))},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def responses_usage(usage: dict[str, Any]) -> dict[str, Any]:
    """A run's usage as the Responses API reports it."""
    prompt, completion = int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
    return {
        "input_tokens": prompt,
        "input_tokens_details": {
            "cached_tokens": int(usage.get("cache_read_tokens", 0)),
            "cache_write_tokens": int(usage.get("cache_write_tokens", 0)),
        },
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + completion,
    }


def chat_completion(
    *, completion_id: str, model: str, created: int, text: str, finished: Finished | None
) -> tuple[int, dict[str, Any]]:
    """The status and body of a non-streamed chat completion: 200 with the answer, or 500 in
    the error shape for a run that failed, was cancelled or whose end was not seen."""
    if finished is None:
        return 503, error_body(
            "the run's event stream ended before the run did; it goes on in its session",
            type="server_error",
            code="stream_interrupted",
        )
    if finished.outcome in ("cancelled", "failed"):
        code, message = _error_of(finished)
        return 500, error_body(message, type="server_error", code=code)
    return 200, {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": finished.outcome,
            }
        ],
        "usage": chat_usage(finished.usage),
        "system_fingerprint": None,
    }


class ChatStream:
    """A run as ``chat.completion.chunk`` events: the role first, the text, the chunk with
    ``finish_reason``, the usage chunk (``stream_options.include_usage``), ``data: [DONE]``. A
    run that did not answer ends with an error event (``data: {"error": …}``) and no
    ``[DONE]``, which the openai SDK raises as ``APIError``."""

    def __init__(self, *, completion_id: str, model: str, created: int, include_usage: bool):
        head = {"id": completion_id, "object": "chat.completion.chunk", "created": created}
        head |= {"model": model, "system_fingerprint": None}
        self._head = head
        self._usage = include_usage
        # Every content chunk but its text, serialised once: the text goes in between.
        before, after = _json(self._chunk({"content": "\x00"})).split('"\\u0000"')
        self._before, self._after = f"data: {before}".encode(), f"{after}\n\n".encode()

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        chunk = {**self._head, "choices": [choice]}
        if self._usage:
            chunk["usage"] = None
        return chunk

    def _data(self, value: Any) -> bytes:
        return f"data: {_json(value)}\n\n".encode()

    def start(self) -> bytes:
        """The first chunk: the assistant's role."""
        return self._data(self._chunk({"role": "assistant", "content": "", "refusal": None}))

    def text(self, piece: str) -> bytes:
        """A chunk of text."""
        return self._before + _json(piece).encode() + self._after

    def end(self, finished: Finished | None) -> bytes:
        """The last chunks of the stream."""
        if finished is None or finished.outcome in ("cancelled", "failed"):
            if finished is None:
                code, message = "stream_interrupted", "the run's stream ended before the run did"
            else:
                code, message = _error_of(finished)
            return self._data(error_body(message, type="server_error", code=code))
        out = self._data(self._chunk({}, finished.outcome))
        if self._usage:
            out += self._data({**self._head, "choices": [], "usage": chat_usage(finished.usage)})
        return out + b"data: [DONE]\n\n"


_INCOMPLETE: Final = {"length": "max_output_tokens"}


def response_object(
    *,
    rid: str,
    model: str,
    created_at: int,
    text: str | None,
    finished: Finished | None,
    body: ResponsesRequest,
) -> dict[str, Any]:
    """A Responses API ``response`` object: in progress (``finished`` is ``None`` and ``text``
    too) or as the run ended, its one message item holding ``text``."""
    status, error, incomplete = "in_progress", None, None
    if finished is not None:
        status = {"stop": "completed", "length": "incomplete"}.get(finished.outcome, "")
        status = status or finished.outcome
        if finished.outcome == "length":
            incomplete = {"reason": _INCOMPLETE["length"]}
        if finished.outcome == "failed":
            code, message = _error_of(finished)
            error = {"code": "server_error", "message": redact(f"{code}: {message}")}
    output = []
    if text is not None:
        output.append(_message_item(rid, text, "completed" if status == "completed" else status))
    return {
        "id": rid,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "background": False,
        "error": error,
        "incomplete_details": incomplete,
        "instructions": body.instructions,
        "max_output_tokens": None,
        "model": model,
        "output": output,
        "parallel_tool_calls": False,
        "previous_response_id": body.previous_response_id,
        "store": True,
        "temperature": None,
        "text": {"format": {"type": "text"}},
        "tool_choice": "none",
        "tools": [],
        "top_p": None,
        "truncation": "disabled",
        "usage": None if finished is None else responses_usage(finished.usage),
        "user": None,
        "metadata": body.metadata or {},
    }


def _item_id(rid: str) -> str:
    return "msg_" + rid.removeprefix(_RESP)


def _message_item(rid: str, text: str, status: str) -> dict[str, Any]:
    item_status = status if status in ("in_progress", "completed") else "incomplete"
    content = [] if status == "in_progress" else [_output_text(text)]
    return {
        "id": _item_id(rid),
        "type": "message",
        "status": item_status,
        "role": "assistant",
        "content": content,
    }


def _output_text(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


class ResponsesStream:
    """A run as Responses API events, as OpenAI sends them for one message: ``response.created``,
    ``response.in_progress``; with the first text ``response.output_item.added`` and
    ``response.content_part.added``; ``response.output_text.delta`` per piece; then
    ``…output_text.done``, ``…content_part.done``, ``…output_item.done`` and
    ``response.completed`` (``…incomplete`` for a cut answer, ``…failed`` for a failed run,
    ``error`` when the stream ended before the run)."""

    def __init__(self, *, rid: str, model: str, created_at: int, body: ResponsesRequest) -> None:
        self._rid, self._model, self._created_at, self._body = rid, model, created_at, body
        self._seq = 0
        self._text: list[str] | None = None  # None until the message item is opened
        self._item = _item_id(rid)
        delta = {"type": "response.output_text.delta", "sequence_number": 0}
        delta |= {"item_id": self._item, "output_index": 0, "content_index": 0}
        delta |= {"delta": "\x00", "logprobs": []}
        head, tail = _json(delta).split('"\\u0000"')
        seq_at = head.index('"sequence_number":0') + len('"sequence_number":')
        self._delta_parts = (
            b"event: response.output_text.delta\ndata: " + head[:seq_at].encode(),
            head[seq_at + 1 :].encode(),
            f"{tail}\n\n".encode(),
        )

    def _event(self, kind: str, **fields: Any) -> bytes:
        data = {"type": kind, "sequence_number": self._seq, **fields}
        self._seq += 1
        return f"event: {kind}\ndata: {_json(data)}\n\n".encode()

    def _response(self, finished: Finished | None) -> dict[str, Any]:
        text = None if self._text is None else "".join(self._text)
        return response_object(
            rid=self._rid,
            model=self._model,
            created_at=self._created_at,
            text=text,
            finished=finished,
            body=self._body,
        )

    def start(self) -> bytes:
        """``response.created`` and ``response.in_progress``."""
        response = self._response(None)
        return self._event("response.created", response=response) + self._event(
            "response.in_progress", response=response
        )

    def text(self, piece: str) -> bytes:
        """A ``response.output_text.delta`` (the message item opened first)."""
        out = b""
        if self._text is None:
            self._text = []
            item = _message_item(self._rid, "", "in_progress")
            out = self._event("response.output_item.added", output_index=0, item=item)
            out += self._event(
                "response.content_part.added",
                item_id=self._item,
                output_index=0,
                content_index=0,
                part=_output_text(""),
            )
        self._text.append(piece)
        head, middle, tail = self._delta_parts
        seq = str(self._seq).encode()
        self._seq += 1
        return out + head + seq + middle + _json(piece).encode() + tail

    def end(self, finished: Finished | None) -> bytes:
        """The closing events."""
        out = b""
        if self._text is not None and finished is not None:
            text = "".join(self._text)
            where = {"item_id": self._item, "output_index": 0, "content_index": 0}
            out += self._event("response.output_text.done", **where, text=text, logprobs=[])
            out += self._event("response.content_part.done", **where, part=_output_text(text))
            item = self._response(finished)["output"][0]
            out += self._event("response.output_item.done", output_index=0, item=item)
        if finished is None:
            return out + self._event(
                "error",
                code="stream_interrupted",
                message="the run's stream ended before the run did",
                param=None,
            )
        kind = {"stop": "response.completed", "length": "response.incomplete"}.get(
            finished.outcome, "response.failed"
        )
        return out + self._event(kind, response=self._response(finished))


# ------------------------------------------------------------------------------ errors

_TYPES: Final = {401: "invalid_request_error", 403: "permission_error", 429: "requests"}
_CODES: Final = {
    "unauthorized": "invalid_api_key",
    "rate_limited": "rate_limit_exceeded",
    "validation_error": "invalid_request_error",
}
_FIELD_CODES: Final = {
    "extra_forbidden": "unknown_parameter",
    "missing": "missing_required_parameter",
    "json_invalid": "invalid_json",
}


def _param(loc: str) -> str | None:
    """``body.messages.0.content`` as OpenAI names a parameter: ``messages[0].content``."""
    parts = loc.split(".")
    if parts[0] == "header" and len(parts) > 1:
        return "-".join(p.capitalize() for p in parts[1].split("-"))
    out = ""
    for part in parts[1:] if parts[0] in ("body", "query") else parts:
        if part.isdigit():
            out += f"[{part}]"
        elif not part.startswith(("list[", "str", "literal[", "function-")):
            out += f".{part}" if out else part
    return out or None


def openai_error_of(status: int, gateway_error: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """Our error body (``{"error": {"code", "message", "details"}}``) in OpenAI's shape; a body
    that failed validation is a 400 as OpenAI answers it, naming the parameter."""
    error = gateway_error.get("error") or {}
    code = str(error.get("code") or "error")
    message = str(error.get("message") or "error")
    param = None
    if code == "validation_error":
        status = 400
        fields = (error.get("details") or {}).get("errors") or [{}]
        first = fields[0]
        param = _param(str(first.get("field", "")))
        kind = str(first.get("type", ""))
        code = _FIELD_CODES.get(kind) or ("invalid_type" if kind.endswith("_type") else "")
        code = code or "invalid_value"
        if kind == "extra_forbidden":
            message = f"Unrecognized request argument supplied: {param}"
        elif kind == "json_invalid":
            param, message = None, "the body is not valid JSON"
        else:
            message = f"Invalid value for {param or 'the body'}: {first.get('message', '')}"
    kind = _TYPES.get(status) or ("server_error" if status >= 500 else "invalid_request_error")
    return status, error_body(message, type=kind, code=_CODES.get(code, code), param=param)
