"""Large ``json`` content blocks become artifact objects of the file store.

The block keeps a summary and the ``artifact_id``; the object's store key
(``artifacts/<session>/<artifact_id>.json``, never a host path), size and provenance go to the
``artifacts`` row. Artifact ids are derived from the node id and the block's position, so a
redelivered command writes the same object and the same row again (idempotent), and the object
is written (durably, see ``FileStore.put_blocking``) before the transaction that registers it
commits.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent_core.files.port import artifact_key
from agent_core.types.protocol import ContentBlock, JsonBlock, ToolResultBlock

__all__ = ["OffloadedJson", "offload_large_json"]

_SUMMARY_CHARS = 200

# Writes ``data`` at a store key, durable when it returns (the writer's thread calls it).
Write = Callable[[str, bytes], None]


@dataclass(frozen=True, slots=True)
class OffloadedJson:
    """One block moved to the store: what the ``artifacts`` row records (``path`` is its key)."""

    artifact_id: str
    path: str
    size_bytes: int
    summary: str
    tool_call_id: str | None


def offload_large_json(
    blocks: list[ContentBlock],
    *,
    node_id: str,
    session_id: str,
    write: Write,
    threshold_bytes: int,
) -> tuple[list[ContentBlock], list[OffloadedJson]]:
    """Return ``blocks`` with every inline json block above the threshold moved to the store."""
    out: list[ContentBlock] = []
    moved: list[OffloadedJson] = []
    for i, block in enumerate(blocks):
        if isinstance(block, JsonBlock):
            block = _maybe_move(
                block, f"{node_id}_{i}", None, session_id, write, threshold_bytes, moved
            )
        elif isinstance(block, ToolResultBlock):
            inner: list[Any] = []
            for j, part in enumerate(block.content):
                if isinstance(part, JsonBlock):
                    key = f"{node_id}_{i}_{j}"
                    part = _maybe_move(
                        part, key, block.tool_call_id, session_id, write, threshold_bytes, moved
                    )
                inner.append(part)
            block = block.model_copy(update={"content": inner})
        out.append(block)
    return out, moved


def _maybe_move(
    block: JsonBlock,
    key: str,
    tool_call_id: str | None,
    session_id: str,
    write: Write,
    threshold: int,
    moved: list[OffloadedJson],
) -> JsonBlock:
    if block.artifact_id is not None or block.data is None:
        return block
    text = json.dumps(block.data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    data = text.encode()
    if len(data) <= threshold:
        return block
    # node ids are "node_<body>"; the artifact id reuses the body so it is stable and unique.
    artifact_id = "artifact_" + key.removeprefix("node_")
    store_key = artifact_key(session_id, f"{artifact_id}.json")
    write(store_key, data)
    summary = block.summary or _summary(text, len(data))
    moved.append(OffloadedJson(artifact_id, store_key, len(data), summary, tool_call_id))
    return JsonBlock(summary=summary, artifact_id=artifact_id)


def _summary(text: str, size: int) -> str:
    head = text[:_SUMMARY_CHARS]
    return f"JSON, {size} bytes: {head}{'…' if len(text) > _SUMMARY_CHARS else ''}"
