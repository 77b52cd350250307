"""The files of a skill's folder: listed (bounded) for its ``skill_context`` node, read one at a
time on request, never outside the folder.

A requested path is relative, has no empty, ``.`` or ``..`` part, and must still lie inside the
skill's folder once every link is resolved; it is opened without following a final link, must be
a regular file within :data:`MAX_FILE_BYTES`, and UTF-8 text.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Final

from agent_core.errors import ToolError

__all__ = ["MAX_FILE_BYTES", "list_skill_files", "read_skill_file"]

MAX_FILE_BYTES: Final = 256 * 1024
_MAX_LISTED: Final = 50
_MAX_DEPTH: Final = 3
_MAX_PATH_CHARS: Final = 512


def list_skill_files(folder: Path) -> list[str]:
    """Up to 50 files of ``folder`` (``SKILL.md`` and hidden entries left out), relative, sorted
    breadth first; links are not followed."""
    found: list[str] = []
    level = [(folder, "")]
    for _ in range(_MAX_DEPTH):
        below: list[tuple[Path, str]] = []
        for path, prefix in level:
            try:
                with os.scandir(path) as it:
                    entries = sorted(it, key=lambda e: e.name)[:500]
            except OSError:
                continue
            for entry in entries:
                if entry.name.startswith(".") or entry.is_symlink():
                    continue
                rel = f"{prefix}{entry.name}"
                if entry.is_dir(follow_symlinks=False):
                    below.append((Path(entry.path), rel + "/"))
                elif rel != "SKILL.md":
                    found.append(rel)
                    if len(found) == _MAX_LISTED:
                        return found
        level = below
    return found


def read_skill_file(folder: Path, raw: str) -> str:
    """The text of ``raw`` inside the skill's ``folder`` (see the module docstring); raises
    :class:`ToolError` with a reason the model can act on."""
    parts = raw.replace("\\", "/").split("/")
    if (
        not raw
        or len(raw) > _MAX_PATH_CHARS
        or "\x00" in raw
        or raw.startswith("/")
        or any(p in ("", ".", "..") for p in parts)
    ):
        raise ToolError(
            "invalid_path",
            "file must be a relative path inside the skill's folder, e.g. 'reference.md'",
        )
    base = os.path.realpath(folder)
    target = os.path.realpath(os.path.join(base, *parts))
    if not target.startswith(base.rstrip("/") + "/"):
        raise ToolError("path_escape", f"{raw!r} leads out of the skill's folder")
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ToolError("not_found", f"the skill has no file {raw!r}") from None
    except OSError as exc:
        raise ToolError("unreadable", f"{raw!r} cannot be read ({type(exc).__name__})") from None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ToolError("not_a_file", f"{raw!r} is not a file")
        data = fh.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise ToolError("file_too_large", f"{raw!r} is over {MAX_FILE_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError("binary_file", f"{raw!r} is not UTF-8 text") from None
