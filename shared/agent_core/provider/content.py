"""Rendering provider-neutral content blocks as text, for wire formats that only take text.

JSON blocks become compact JSON; artifact references and attachments become a short bracketed
note (their bytes stay in the workspace; a tool reads them when the model asks).
"""

from __future__ import annotations

import json

from agent_core.types.protocol import (
    ArtifactRefBlock,
    AttachmentBlock,
    ContentBlock,
    JsonBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolResultContent,
)

__all__ = ["block_text", "tool_result_text"]


def block_text(block: ContentBlock | ToolResultContent) -> str:
    """The text a model sees for a non-tool block."""
    match block:
        case TextBlock(text=text):
            return text
        case JsonBlock(data=data, summary=summary, artifact_id=artifact_id):
            if artifact_id is not None:
                return f"[artifact {artifact_id}: {summary or 'JSON'}]"
            return json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        case ArtifactRefBlock(artifact_id=artifact_id, summary=summary, filename=filename):
            label = summary or filename or ""
            return f"[artifact {artifact_id}{': ' + label if label else ''}]"
        case AttachmentBlock(path=path, filename=filename):
            return f"[attachment: {filename or path} at {path}]"
        case ToolCallBlock(name=name):
            return f"[tool call {name}]"
        case ToolResultBlock():
            return tool_result_text(block)
    raise TypeError(f"unknown block {type(block).__name__}")  # pragma: no cover


def tool_result_text(block: ToolResultBlock) -> str:
    """A tool result's content as one text (blocks joined by blank lines)."""
    return "\n\n".join(block_text(part) for part in block.content)
