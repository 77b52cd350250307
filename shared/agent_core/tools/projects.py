"""A session's project: a folder the server owns, named logically, never a client's path.

The operator lists project roots in ``[projects] roots`` (name → absolute folder). A session
names its project as ``workspace`` (the default: its own workspace), a root's name (``data``) or a
folder below a root (``data/reports/2026``). That logical name is what is stored and shown; the
absolute folder is found on the server, from the configuration, each time it is used, and must
lie inside its root once links are resolved. Task lists live in the project's
``.soong-agent/tasks/`` (``docs/architecture.md``, "Walls").
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from agent_core.errors import SchemaError

__all__ = ["WORKSPACE_PROJECT", "InvalidProjectError", "normalize_project", "project_dir"]

WORKSPACE_PROJECT: Final = "workspace"
_MAX_CHARS: Final = 1024


class InvalidProjectError(SchemaError):
    """A project a session cannot use: unknown root, a path leaving it, not a folder."""

    def __init__(self, message: str) -> None:
        super().__init__("invalid_cwd", message)


def normalize_project(raw: str | None, roots: Mapping[str, Path]) -> str:
    """The logical project ``raw`` names (``workspace`` when empty); raises when it is no name
    of a configured root or a plain relative folder below one."""
    if raw is None or raw in ("", WORKSPACE_PROJECT):
        return WORKSPACE_PROJECT
    if len(raw) > _MAX_CHARS or "\x00" in raw or raw.startswith("/"):
        raise InvalidProjectError(
            "a project is `workspace`, a project root's name, or `<root>/<folder>` "
            "(never an absolute path)"
        )
    parts = raw.strip("/").split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise InvalidProjectError("a project folder has no empty, '.' or '..' parts")
    if parts[0] not in roots:
        known = ", ".join(sorted(roots)) or "none configured"
        raise InvalidProjectError(f"no project root named {parts[0]!r} (roots: {known})")
    return "/".join(parts)


def project_dir(raw: str | None, *, roots: Mapping[str, Path], workspace_root: Path) -> Path:
    """The existing folder of a session's project (see the module docstring)."""
    logical = normalize_project(raw, roots)
    if logical == WORKSPACE_PROJECT:
        return workspace_root
    name, _, below = logical.partition("/")
    root = os.path.realpath(roots[name])
    target = os.path.realpath(os.path.join(root, below)) if below else root
    if target != root and not target.startswith(root.rstrip("/") + "/"):
        raise InvalidProjectError(f"project {logical} leads out of its root")
    if not os.path.isdir(target):
        raise InvalidProjectError(f"project {logical} is not an existing folder")
    return Path(target)
