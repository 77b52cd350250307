"""Mapping a ``ModelRequest`` onto Anthropic Messages parameters (plain dicts, no SDK types).

- System blocks → ``system`` text blocks (``cache`` → ``cache_control: ephemeral``).
- ``user`` and ``tool`` messages → ``user`` turns; consecutive turns of one role are merged,
  because the API wants user and assistant to alternate, and ``tool_result`` blocks go first in
  their turn, as the API requires.
- ``tool_call`` → ``tool_use``; ``tool_result`` → ``tool_result`` with ``is_error``.
- An attachment whose media the request carries (``provider/media.py``): an image → an
  ``image`` block, a PDF → a ``document`` block (both a ``base64`` source), each after its note;
  a text document → text.
- Tools → ``{name, description, input_schema}``; ``tool_choice`` auto/none/required→any/named→tool.
"""

from __future__ import annotations

from typing import Any

from agent_core.provider.base import ProviderSettings
from agent_core.provider.content import block_text, tool_result_text
from agent_core.provider.media import user_parts
from agent_core.types.enums import Role
from agent_core.types.protocol import (
    ContentBlock,
    MediaPart,
    ModelMessage,
    ModelRequest,
    NamedToolChoice,
    ToolCallBlock,
    ToolResultBlock,
)

__all__ = ["build_messages", "build_params"]


def _block(block: ContentBlock) -> dict[str, Any] | None:
    if isinstance(block, ToolCallBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.arguments}
    if isinstance(block, ToolResultBlock):
        text = tool_result_text(block)
        return {
            "type": "tool_result",
            "tool_use_id": block.tool_call_id,
            "content": [{"type": "text", "text": text}] if text else [],
            "is_error": block.is_error,
        }
    text = block_text(block)
    return {"type": "text", "text": text} if text else None  # the API rejects empty text blocks


def _media_block(part: MediaPart) -> dict[str, Any]:
    source = {"type": "base64", "media_type": part.mime_type, "data": part.data}
    if part.kind == "image":
        return {"type": "image", "source": source}
    block: dict[str, Any] = {"type": "document", "source": source}
    if part.filename:
        block["title"] = part.filename
    return block


def _user_blocks(msg: ModelMessage, media: dict[str, MediaPart]) -> list[dict[str, Any]]:
    """A user message with media: its tool results, then its parts in order."""
    blocks = [b for b in (_block(c) for c in msg.content if isinstance(c, ToolResultBlock)) if b]
    for part in user_parts(msg.content, media):
        if isinstance(part, MediaPart):
            blocks.append(_media_block(part))
        elif part:  # the API rejects empty text blocks
            blocks.append({"type": "text", "text": part})
    return blocks


def build_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The ``messages`` array: alternating user/assistant turns."""
    turns: list[dict[str, Any]] = []
    for msg in request.messages:
        role = "assistant" if msg.role == Role.ASSISTANT else "user"
        if role == "user" and request.media:
            blocks = _user_blocks(msg, request.media)
        else:
            blocks = [b for b in (_block(c) for c in msg.content) if b is not None]
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        if turn["role"] == "user":
            # Stable sort: tool results first, everything else after, each in its order.
            turn["content"].sort(key=lambda b: b["type"] != "tool_result")
    return turns


def build_params(request: ModelRequest, settings: ProviderSettings) -> dict[str, Any]:
    """The JSON body of a streamed Messages request."""
    params: dict[str, Any] = {
        "model": request.model,
        "messages": build_messages(request),
        "max_tokens": request.max_tokens or settings.default_max_tokens,
        "stream": True,
    }
    if request.system:
        params["system"] = [
            {
                "type": "text",
                "text": b.text,
                **({"cache_control": {"type": "ephemeral"}} if b.cache else {}),
            }
            for b in request.system
        ]
    if request.tools:
        params["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
        choice = request.tool_choice
        if isinstance(choice, NamedToolChoice):
            params["tool_choice"] = {"type": "tool", "name": choice.name}
        elif choice is not None:
            params["tool_choice"] = {"type": "any" if choice == "required" else choice}
    if request.temperature is not None:
        params["temperature"] = request.temperature
    if request.stop:
        params["stop_sequences"] = request.stop
    # Provider-specific fields (e.g. thinking, metadata) go into the body as given.
    params.update(settings.provider_options)
    params.update(request.provider_options)
    return params
