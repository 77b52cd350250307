"""Where tool output goes when it is a deliverable or too big to inline: the artifact sink.

The run-worker implements :class:`ArtifactSink` with storage-writer commands (rows in the
``artifacts`` table); :class:`MemoryArtifactSink` is the in-memory fake for tests and local use.
"""

from __future__ import annotations

import mimetypes
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["ArtifactSink", "MemoryArtifactSink", "OutputFile", "SavedToolOutput", "guess_mime"]


def guess_mime(name: str) -> str:
    """The mime type of a file name (``application/octet-stream`` when unknown)."""
    return mimetypes.guess_type(name, strict=False)[0] or "application/octet-stream"


@dataclass(frozen=True, slots=True)
class OutputFile:
    """A file a tool call created or changed in ``output/``."""

    path: str  # session-relative, e.g. "output/report.md"
    size_bytes: int
    mime_type: str
    tool_call_id: str
    node_id: str | None = None


@dataclass(frozen=True, slots=True)
class SavedToolOutput:
    """The whole output of a tool call whose inline result was truncated."""

    tool_call_id: str
    tool_name: str
    text: str


class ArtifactSink(Protocol):
    """Receives deliverables and oversized outputs; both calls must be idempotent per input."""

    async def register_output_file(self, file: OutputFile) -> str | None:
        """Record a file in ``output/`` as an artifact; returns its artifact id if known."""
        ...

    async def save_tool_output(self, output: SavedToolOutput) -> str | None:
        """Store a tool's whole output; returns its artifact id if known."""
        ...


@dataclass(slots=True)
class MemoryArtifactSink:
    """An :class:`ArtifactSink` that keeps everything in lists (ids ``artifact_mem_<n>``)."""

    files: list[OutputFile] = field(default_factory=list)
    outputs: list[SavedToolOutput] = field(default_factory=list)

    async def register_output_file(self, file: OutputFile) -> str | None:
        """Append the file record."""
        self.files.append(file)
        return f"artifact_mem_{len(self.files) + len(self.outputs)}"

    async def save_tool_output(self, output: SavedToolOutput) -> str | None:
        """Append the output."""
        self.outputs.append(output)
        return f"artifact_mem_{len(self.files) + len(self.outputs)}"
