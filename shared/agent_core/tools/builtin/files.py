"""read_file, write_file and edit_file: text files inside the session workspace."""

from __future__ import annotations

import asyncio
from typing import Final

from pydantic import Field, model_validator

from agent_core.errors import ToolError
from agent_core.tools.artifacts import guess_mime
from agent_core.tools.base import Tool, ToolArgs, ToolContext, ToolOutput
from agent_core.tools.paths import SessionPath
from agent_core.tools.workspace import Workspace

__all__ = [
    "EditFileArgs",
    "EditFileTool",
    "ReadFileArgs",
    "ReadFileTool",
    "WriteFileArgs",
    "WriteFileTool",
    "is_binary",
]

MAX_READ_BYTES: Final = 8 * 1024 * 1024
MAX_WRITE_BYTES: Final = 32 * 1024 * 1024
_SNIFF: Final = 8192


def is_binary(data: bytes) -> bool:
    """Heuristic: a NUL byte in the first 8 KiB, or bytes that are not UTF-8."""
    if b"\x00" in data[:_SNIFF]:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut at the read limit is still text.
        return exc.start < len(data) - 4
    return False


def _read_text(ws: Workspace, path: SessionPath) -> tuple[str, SessionPath]:
    data, real = ws.fs.read_bytes(path, limit=MAX_READ_BYTES + 1)
    if len(data) > MAX_READ_BYTES:
        raise ToolError("file_too_large", f"{real} is larger than {MAX_READ_BYTES} bytes")
    if is_binary(data):
        raise ToolError(
            "binary_file", f"{real} is a binary file ({guess_mime(real.name)}); it cannot be edited"
        )
    return data.decode("utf-8"), real


class ReadFileArgs(ToolArgs):
    """Arguments of read_file."""

    path: str = Field(description="File path, e.g. input/data.csv or output/report.md")
    start_line: int = Field(default=1, ge=1, description="First line to show (1-based)")
    end_line: int | None = Field(default=None, ge=1, description="Last line to show (inclusive)")

    @model_validator(mode="after")
    def _ordered(self) -> ReadFileArgs:
        if self.end_line is not None and self.end_line < self.start_line:
            raise ValueError("end_line must not be smaller than start_line")
        return self


class ReadFileTool(Tool[ReadFileArgs]):
    """Show a text file's lines, numbered; binary files are described, not dumped."""

    name = "read_file"
    repeatable = True  # read-only
    description = (
        "Read a text file from the session workspace (input/, scratchpad/, output/) or its "
        "project folder (project/, where other relative paths start when the session has one). "
        "Lines are numbered; use start_line/end_line for a range."
    )
    input_model = ReadFileArgs

    async def run(self, args: ReadFileArgs, ctx: ToolContext) -> ToolOutput:
        """Read and number the requested lines."""
        ws = ctx.workspace
        path = ws.resolve(args.path)
        data, real = await asyncio.to_thread(ws.fs.read_bytes, path, limit=MAX_READ_BYTES)
        if is_binary(data):
            return ToolOutput(
                f"{real} is a binary file ({guess_mime(real.name)}, at least {len(data)} bytes); "
                "not shown. Use run_python to inspect it.",
                metadata={"path": str(real), "binary": True},
            )
        lines = data.decode("utf-8", errors="replace").splitlines()
        end = min(args.end_line or len(lines), len(lines))
        if args.start_line > max(len(lines), 1):
            raise ToolError(
                "line_out_of_range",
                f"{real} has {len(lines)} lines; start_line is {args.start_line}",
            )
        shown = [f"{n:>6}\t{lines[n - 1]}" for n in range(args.start_line, end + 1)]
        header = f"{real} (lines {args.start_line}-{end} of {len(lines)})"
        return ToolOutput("\n".join([header, *shown]), metadata={"path": str(real)})


class WriteFileArgs(ToolArgs):
    """Arguments of write_file."""

    path: str = Field(description="Where to write, e.g. output/report.md or scratchpad/tmp.txt")
    content: str = Field(description="The whole new content of the file")


class WriteFileTool(Tool[WriteFileArgs]):
    """Create or replace a text file (atomically); parent folders are created."""

    name = "write_file"
    description = (
        "Create or overwrite a text file. Deliverables go to output/, temporary files to "
        "scratchpad/; input/ and the project folder (project/) are read-only."
    )
    input_model = WriteFileArgs
    writes = True

    async def run(self, args: WriteFileArgs, ctx: ToolContext) -> ToolOutput:
        """Write the file."""
        ws = ctx.workspace
        path = ws.resolve(args.path)
        data = args.content.encode("utf-8")
        if len(data) > MAX_WRITE_BYTES:
            raise ToolError("content_too_large", f"content is larger than {MAX_WRITE_BYTES} bytes")
        real = await asyncio.to_thread(ws.fs.write_bytes, path, data, check=ws.check_write)
        return ToolOutput(f"Wrote {len(data)} bytes to {real}", metadata={"path": str(real)})


class EditFileArgs(ToolArgs):
    """Arguments of edit_file."""

    path: str = Field(description="The file to edit")
    old_text: str = Field(min_length=1, description="Exact text to replace; must occur once")
    new_text: str = Field(description="Replacement text")


class EditFileTool(Tool[EditFileArgs]):
    """Replace one exact, unique occurrence of a text in a file."""

    name = "edit_file"
    description = (
        "Replace old_text with new_text in a file. old_text must match exactly (whitespace "
        "included) and occur exactly once; add surrounding lines to make it unique."
    )
    input_model = EditFileArgs
    writes = True

    async def run(self, args: EditFileArgs, ctx: ToolContext) -> ToolOutput:
        """Check uniqueness, replace, write back atomically."""
        ws = ctx.workspace
        path = ws.resolve(args.path)
        ws.check_write(path)
        text, real = await asyncio.to_thread(_read_text, ws, path)
        count = text.count(args.old_text)
        if count == 0:
            raise ToolError(
                "edit_no_match",
                f"old_text was not found in {real}; read the file and copy the text exactly "
                "(whitespace and line breaks included)",
            )
        if count > 1:
            raise ToolError(
                "edit_not_unique",
                f"old_text occurs {count} times in {real}; include more surrounding text so "
                "that it matches exactly once",
            )
        updated = text.replace(args.old_text, args.new_text, 1).encode("utf-8")
        await asyncio.to_thread(ws.fs.write_bytes, real, updated, check=ws.check_write)
        line = text[: text.index(args.old_text)].count("\n")
        return ToolOutput(
            f"Edited {real} at line {line + 1}", metadata={"path": str(real), "line": line + 1}
        )
