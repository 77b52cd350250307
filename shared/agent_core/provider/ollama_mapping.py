"""Mapping a ``ModelRequest`` onto an Ollama ``/api/chat`` body.

- System blocks → one ``system`` message; user text → ``user`` messages; an image attachment
  whose media the request carries (``provider/media.py``) → the message's ``images`` (base64),
  a text document → text (Ollama takes no PDF).
- Assistant ``tool_call`` blocks → ``tool_calls: [{"function": {name, arguments: {...}}}]``
  (Ollama takes arguments as an object, not a JSON string).
- ``tool_result`` → a ``tool`` message with ``tool_name`` (looked up from the call's id); the
  format has no error flag, so a failed result's text is prefixed with ``ERROR:``.
- ``max_tokens`` → ``options.num_predict``; ``temperature`` and ``stop`` → ``options``.
- ``tool_choice="none"`` sends no tools; Ollama cannot force a tool, so ``required`` and named
  choices are sent as plain tools (never emulated with prompt text).
- ``truncate: false`` and ``shift: false``: by default Ollama silently drops the oldest messages
  of a prompt over its context window, and shifts the window while it generates. Off, a prompt
  that does not fit is a 400 (``context_length_exceeded``, for the loop to compact) and an answer
  that fills the window stops with ``done_reason: "length"``. Servers before these fields ignore
  them; ``provider_options`` can turn them back on.
"""

from __future__ import annotations

from typing import Any

from agent_core.provider.base import ProviderSettings
from agent_core.provider.content import block_text, tool_result_text
from agent_core.provider.media import user_parts
from agent_core.types.enums import Role
from agent_core.types.protocol import MediaPart, ModelRequest, ToolCallBlock, ToolResultBlock

__all__ = ["build_body", "needs_tools"]


def needs_tools(request: ModelRequest) -> bool:
    """Whether the request would send tools to the model."""
    return bool(request.tools) and request.tool_choice != "none"


def _messages(request: ModelRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": "\n\n".join(b.text for b in request.system)})
    call_names: dict[str, str] = {}
    for msg in request.messages:
        texts = [
            block_text(b) for b in msg.content if not isinstance(b, ToolCallBlock | ToolResultBlock)
        ]
        for r in (b for b in msg.content if isinstance(b, ToolResultBlock)):
            tool_msg = {
                "role": "tool",
                "content": ("ERROR: " if r.is_error else "") + tool_result_text(r),
            }
            if r.tool_call_id in call_names:
                tool_msg["tool_name"] = call_names[r.tool_call_id]
            out.append(tool_msg)
        if msg.role == Role.ASSISTANT:
            calls = [b for b in msg.content if isinstance(b, ToolCallBlock)]
            call_names.update((c.id, c.name) for c in calls)
            assistant: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(texts)}
            if calls:
                assistant["tool_calls"] = [
                    {"function": {"name": c.name, "arguments": c.arguments}} for c in calls
                ]
            out.append(assistant)
        elif texts:
            parts = user_parts(msg.content, request.media)
            user: dict[str, Any] = {
                "role": "user",
                "content": "\n\n".join(p for p in parts if isinstance(p, str)),
            }
            images = [p.data for p in parts if isinstance(p, MediaPart) and p.kind == "image"]
            if images:
                user["images"] = images
            out.append(user)
    return out


def build_body(request: ModelRequest, settings: ProviderSettings) -> dict[str, Any]:
    """The JSON body of a streamed ``/api/chat`` request."""
    body: dict[str, Any] = {
        "model": request.model,
        "messages": _messages(request),
        "stream": True,
        "truncate": False,
        "shift": False,
    }
    if needs_tools(request):
        body["tools"] = [
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
    options: dict[str, Any] = {}
    if request.max_tokens is not None:
        options["num_predict"] = request.max_tokens
    if request.temperature is not None:
        options["temperature"] = request.temperature
    if request.stop:
        options["stop"] = request.stop
    if options:
        body["options"] = options
    body.update(settings.provider_options)
    body.update(request.provider_options)
    return body
