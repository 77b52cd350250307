"""list_dir, glob and grep: finding things in the session workspace (symlinks not descended).

Patterns (grep's regular expression, globs) come from the model and run on the worker, so they are
matched by RE2 in linear time (:mod:`agent_core.tools.regex`); a search also stops at a byte
budget and a deadline of its own, since a thread cannot be killed once it runs.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from typing import Final

from pydantic import Field

from agent_core.tools.base import Tool, ToolArgs, ToolContext, ToolOutput
from agent_core.tools.builtin.files import is_binary
from agent_core.tools.fsaccess import DirEntry
from agent_core.tools.paths import InvalidPathError, PathErrorCode, PathEscapeError, SessionPath
from agent_core.tools.regex import LinearRegex, compile_linear
from agent_core.tools.workspace import Workspace

__all__ = [
    "GlobArgs",
    "GlobTool",
    "GrepArgs",
    "GrepTool",
    "ListDirArgs",
    "ListDirTool",
    "glob_to_regex",
]

MAX_WALK: Final = 20_000
MAX_LIST: Final = 1000
MAX_GREP_FILE_BYTES: Final = 4 * 1024 * 1024
MAX_LINE_CHARS: Final = 300
MAX_GREP_TOTAL_BYTES: Final = 256 * 1024 * 1024
GREP_DEADLINE_S: Final = 20.0  # below the tool's timeout: the thread stops on its own


def glob_to_regex(pattern: str) -> LinearRegex:
    """Compile a glob over ``/``-separated paths: ``**`` spans folders, ``*`` and ``?`` do not."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and (close := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : close].replace("\\", "\\\\")
            out.append("[^" + body[1:] + "]" if body.startswith("!") else "[" + body + "]")
            i = close + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return compile_linear("".join(out) + r"\z", dot_all=True)


def _relative(entry: SessionPath, base: SessionPath) -> str:
    return "/".join(entry.parts[len(base.parts) :])


class ListDirArgs(ToolArgs):
    """Arguments of list_dir."""

    path: str = Field(default=".", description="Folder to list; '.' is the scratchpad")


class ListDirTool(Tool[ListDirArgs]):
    """List a folder's entries with kind and size."""

    name = "list_dir"
    repeatable = True  # read-only
    description = (
        "List the files and folders in a workspace folder (input/, output/, scratchpad/, and "
        "project/ when the session has a project folder)."
    )
    input_model = ListDirArgs

    async def run(self, args: ListDirArgs, ctx: ToolContext) -> ToolOutput:
        """List one folder."""
        ws = ctx.workspace
        real, entries = await asyncio.to_thread(ws.fs.list_dir, ws.resolve(args.path))
        if not entries:
            return ToolOutput(f"{real}/ is empty")
        lines = [f"{real}/ ({len(entries)} entries)"]
        for entry in entries[:MAX_LIST]:
            if entry.kind == "dir":
                lines.append(f"{entry.path.name}/")
            elif entry.kind == "file":
                lines.append(f"{entry.path.name}  {entry.size} bytes")
            else:
                lines.append(f"{entry.path.name}  ({entry.kind})")
        if len(entries) > MAX_LIST:
            lines.append(f"… and {len(entries) - MAX_LIST} more")
        return ToolOutput("\n".join(lines))


class GlobArgs(ToolArgs):
    """Arguments of glob."""

    pattern: str = Field(min_length=1, description="Glob relative to path, e.g. **/*.csv")
    path: str = Field(default=".", description="Folder to search from")
    max_results: int = Field(default=500, ge=1, le=5000)


class GlobTool(Tool[GlobArgs]):
    """Find files by name pattern below a folder."""

    name = "glob"
    repeatable = True  # read-only
    description = "Find files whose path (relative to `path`) matches a glob such as **/*.py."
    input_model = GlobArgs

    async def run(self, args: GlobArgs, ctx: ToolContext) -> ToolOutput:
        """Walk and match."""
        ws = ctx.workspace
        regex = glob_to_regex(args.pattern)
        base = await asyncio.to_thread(ws.fs.real_path, ws.resolve(args.path))

        def find() -> list[str]:
            hits = []
            for entry in ws.fs.walk(base, max_entries=MAX_WALK):
                if regex.match(_relative(entry.path, base)):
                    hits.append(str(entry.path) + ("/" if entry.kind == "dir" else ""))
                    if len(hits) >= args.max_results:
                        break
            return sorted(hits)

        hits = await asyncio.to_thread(find)
        if not hits:
            return ToolOutput(f"No paths under {base}/ match {args.pattern!r}")
        return ToolOutput("\n".join(hits), metadata={"matches": len(hits)})


class GrepArgs(ToolArgs):
    """Arguments of grep."""

    pattern: str = Field(
        min_length=1,
        max_length=4096,
        description="Regular expression (RE2 syntax: no backreferences, no look-around)",
    )
    path: str = Field(default=".", description="File or folder to search")
    glob: str | None = Field(default=None, description="Only files matching this glob, e.g. *.py")
    ignore_case: bool = False
    max_results: int = Field(default=200, ge=1, le=5000)


class _Budget:
    """What one search may still read, and until when."""

    def __init__(self) -> None:
        self.bytes_left = MAX_GREP_TOTAL_BYTES
        self.deadline = time.monotonic() + GREP_DEADLINE_S
        self.stopped: str | None = None

    def spend(self, size: int) -> bool:
        """Account for ``size`` bytes; ``False`` (and why) once the budget or the time is out."""
        self.bytes_left -= size
        if self.bytes_left < 0:
            self.stopped = f"stopped after reading {MAX_GREP_TOTAL_BYTES // (1024 * 1024)} MiB"
        elif time.monotonic() > self.deadline:
            self.stopped = f"stopped after {GREP_DEADLINE_S:g} s"
        return self.stopped is None


def _grep_file(
    ws: Workspace,
    path: SessionPath,
    regex: LinearRegex,
    hits: list[str],
    limit: int,
    budget: _Budget,
) -> None:
    try:
        data, real = ws.fs.read_bytes(path, limit=MAX_GREP_FILE_BYTES)
    except (InvalidPathError, PathEscapeError, OSError):
        return  # vanished, special or linked out: not searchable, not an error of the search
    if not budget.spend(len(data)) or is_binary(data):
        return
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if regex.search(line):
            hits.append(f"{real}:{number}: {line[:MAX_LINE_CHARS]}")
            if len(hits) >= limit:
                return
        if number % 4096 == 0 and not budget.spend(0):
            return


class GrepTool(Tool[GrepArgs]):
    """Search file contents with a regular expression."""

    name = "grep"
    repeatable = True  # read-only
    description = "Search text files for a regular expression (RE2 syntax); prints path:line: text."
    input_model = GrepArgs

    async def run(self, args: GrepArgs, ctx: ToolContext) -> ToolOutput:
        """Search one file or every text file below a folder."""
        ws = ctx.workspace
        regex = compile_linear(args.pattern, ignore_case=args.ignore_case)
        name_filter = glob_to_regex(args.glob) if args.glob else None
        target = await asyncio.to_thread(ws.fs.real_path, ws.resolve(args.path))

        budget = _Budget()

        def search() -> list[str]:
            hits: list[str] = []
            try:
                files: list[DirEntry | SessionPath] = list(ws.fs.walk(target, max_entries=MAX_WALK))
            except InvalidPathError as exc:
                if exc.code != PathErrorCode.NOT_A_DIRECTORY:
                    raise
                files = [target]  # a single file
            for item in files:
                if isinstance(item, DirEntry):
                    if item.kind != "file":
                        continue
                    rel = _relative(item.path, target)
                    if name_filter and not (
                        name_filter.match(rel) or name_filter.match(os.path.basename(rel))
                    ):
                        continue
                    item = item.path
                _grep_file(ws, item, regex, hits, args.max_results, budget)
                if len(hits) >= args.max_results or budget.stopped:
                    break
            return hits

        hits = await asyncio.to_thread(search)
        note = f"\n[search {budget.stopped}; narrow the path or the glob]" if budget.stopped else ""
        if not hits:
            return ToolOutput(f"No matches for {args.pattern!r} under {target}{note}")
        return ToolOutput("\n".join(hits) + note, metadata={"matches": len(hits)})
