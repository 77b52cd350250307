"""Mapping a ``ModelRequest`` onto OpenAI Chat Completions parameters (plain dicts, no SDK types).

- System blocks → one ``system`` message.
- User text / JSON / artifact / attachment blocks → the user message's text; when the request
  carries an attachment's media (``provider/media.py``), the content is a list of parts: an image
  is an ``image_url`` part with a ``data:`` URL, a PDF a ``file`` part (``file_data``, a ``data:``
  URL, and ``filename``), a text document text.
- Assistant text → ``content`` (``""``, never ``null``, beside tool calls alone); ``tool_call``
  blocks → ``tool_calls`` with JSON-encoded ``arguments``.
- ``tool_result`` blocks → one ``tool`` message each (``tool_call_id``); the format has no error
  flag, so a failed result's text is prefixed with ``ERROR:``.
- Tools → ``{"type": "function", "function": {name, description, parameters}}``;
  ``tool_choice`` auto/none/required or ``{"type": "function", "function": {"name"}}``.
"""

from __future__ import annotations

import json
from typing import Any

from agent_core.provider.base import ProviderSettings
from agent_core.provider.content import block_text, tool_result_text
from agent_core.provider.media import user_parts
from agent_core.types.enums import Role
from agent_core.types.protocol import (
    MediaPart,
    ModelMessage,
    ModelRequest,
    NamedToolChoice,
    ToolCallBlock,
    ToolResultBlock,
)

__all__ = ["build_messages", "build_params"]

_OFFICIAL_HOSTS = ("api.openai.com",)


def _part(part: str | MediaPart) -> dict[str, Any]:
    if isinstance(part, str):
        return {"type": "text", "text": part}
    url = f"data:{part.mime_type};base64,{part.data}"
    if part.kind == "image":
        return {"type": "image_url", "image_url": {"url": url}}
    return {"type": "file", "file": {"filename": part.filename or "document.pdf", "file_data": url}}


def _user_content(msg: ModelMessage, media: dict[str, MediaPart]) -> str | list[dict[str, Any]]:
    """A plain string unless the message carries an image or a PDF (most servers that speak the
    format take a string; only media needs the list of parts)."""
    parts = user_parts(msg.content, media)
    if all(isinstance(p, str) for p in parts):
        return "\n\n".join(p for p in parts if isinstance(p, str))
    return [_part(p) for p in parts if p != ""]


def _message(msg: ModelMessage, media: dict[str, MediaPart]) -> list[dict[str, Any]]:
    texts = [
        block_text(b) for b in msg.content if not isinstance(b, ToolCallBlock | ToolResultBlock)
    ]
    results = [b for b in msg.content if isinstance(b, ToolResultBlock)]
    out: list[dict[str, Any]] = [
        {
            "role": "tool",
            "tool_call_id": r.tool_call_id,
            "content": ("ERROR: " if r.is_error else "") + tool_result_text(r),
        }
        for r in results
    ]
    if msg.role == Role.ASSISTANT:
        calls = [b for b in msg.content if isinstance(b, ToolCallBlock)]
        # Always a string, "" for a message of tool calls only: OpenAI accepts ``null`` there, but
        # OpenAI-compatible servers that validate against a string schema (llama.cpp's server)
        # answer 500, and the session's every later request carries the same history.
        assistant: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(texts)}
        if calls:
            assistant["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                }
                for c in calls
            ]
        out.append(assistant)
    elif texts:
        # Text in a tool message (rare) is kept as user text after the results.
        out.append({"role": "user", "content": _user_content(msg, media)})
    return out


def build_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The ``messages`` array of a request."""
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": "\n\n".join(b.text for b in request.system)})
    for msg in request.messages:
        messages.extend(_message(msg, request.media))
    return messages


def _max_tokens_field(settings: ProviderSettings) -> str:
    if settings.max_tokens_field is not None:
        return settings.max_tokens_field
    official = settings.base_url is None or any(h in settings.base_url for h in _OFFICIAL_HOSTS)
    return "max_completion_tokens" if official else "max_tokens"


def build_params(request: ModelRequest, settings: ProviderSettings) -> dict[str, Any]:
    """The JSON body of a streamed Chat Completions request (with usage)."""
    params: dict[str, Any] = {
        "model": request.model,
        "messages": build_messages(request),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        params["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.input_schema,
                },
            }
            for t in request.tools
        ]
        if isinstance(request.tool_choice, NamedToolChoice):
            params["tool_choice"] = {
                "type": "function",
                "function": {"name": request.tool_choice.name},
            }
        elif request.tool_choice is not None:
            params["tool_choice"] = request.tool_choice
    if request.max_tokens is not None:
        params[_max_tokens_field(settings)] = request.max_tokens
    if request.temperature is not None:
        params["temperature"] = request.temperature
    if request.stop:
        params["stop"] = request.stop
    # Provider-specific fields (e.g. reasoning_effort, seed) go into the body as given.
    params.update(settings.provider_options)
    params.update(request.provider_options)
    return params
