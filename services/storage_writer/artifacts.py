"""Large ``json`` content blocks become artifact files under the data directory.

The block keeps a summary and the ``artifact_id``; path, size and provenance go to the
``artifacts`` row. Artifact ids are derived from the node id and the block's position, so a
redelivered command writes the same file and the same row again (idempotent), and the file is
written (tmp + fsync + rename) before the transaction that registers it commits.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_core.types.protocol import ContentBlock, JsonBlock, ToolResultBlock

__all__ = ["OffloadedJson", "offload_large_json"]

_SUMMARY_CHARS = 200


@dataclass(frozen=True, slots=True)
class OffloadedJson:
    """One block moved to a file: what the ``artifacts`` row records."""

    artifact_id: str
    path: str
    size_bytes: int
    summary: str
    tool_call_id: str | None


def offload_large_json(
    blocks: list[ContentBlock],
    *,
    node_id: str,
    session_dir: Path,
    threshold_bytes: int,
) -> tuple[list[ContentBlock], list[OffloadedJson]]:
    """Return ``blocks`` with every inline json block above the threshold moved to a file."""
    out: list[ContentBlock] = []
    moved: list[OffloadedJson] = []
    for i, block in enumerate(blocks):
        if isinstance(block, JsonBlock):
            block = _maybe_move(block, f"{node_id}_{i}", None, session_dir, threshold_bytes, moved)
        elif isinstance(block, ToolResultBlock):
            inner: list[Any] = []
            for j, part in enumerate(block.content):
                if isinstance(part, JsonBlock):
                    key = f"{node_id}_{i}_{j}"
                    part = _maybe_move(
                        part, key, block.tool_call_id, session_dir, threshold_bytes, moved
                    )
                inner.append(part)
            block = block.model_copy(update={"content": inner})
        out.append(block)
    return out, moved


def _maybe_move(
    block: JsonBlock,
    key: str,
    tool_call_id: str | None,
    session_dir: Path,
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
    path = session_dir / f"{artifact_id}.json"
    _write_atomically(path, data)
    summary = block.summary or _summary(text, len(data))
    moved.append(OffloadedJson(artifact_id, str(path), len(data), summary, tool_call_id))
    return JsonBlock(summary=summary, artifact_id=artifact_id)


def _summary(text: str, size: int) -> str:
    head = text[:_SUMMARY_CHARS]
    return f"JSON, {size} bytes: {head}{'…' if len(text) > _SUMMARY_CHARS else ''}"


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
