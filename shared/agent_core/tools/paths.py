"""Logical path routing inside one session workspace (docs/architecture.md, "Server-owned paths"), lexical part.

An agent names files with *logical* paths: ``output/…`` (or ``outputs/…``), ``scratchpad/…`` (or
``scratch/…``) and ``input/…`` (or ``inputs/…``) route to the session's areas; any other relative
path resolves against the session's working directory (``scratchpad/`` by default). The result is a
:class:`SessionPath`: components relative to the session root, never containing ``..``.

This module is pure string work. It refuses NUL bytes, overlong names and paths, ``..`` that climbs
out of the session, and absolute paths outside it. Symlinks are the business of
:mod:`agent_core.tools.fsaccess`, which walks the resolved components with directory fds and checks
where each link really points; the write rules of :func:`ensure_writable` are applied again there to
the *real* location, so a link from ``scratchpad/`` into ``input/`` cannot be used to write input.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from agent_core.errors import PermissionDeniedError, ToolError

__all__ = [
    "DEFAULT_PLATFORM_DIRS",
    "LOGICAL_ROOTS",
    "NAME_MAX",
    "PATH_MAX",
    "PROJECT",
    "Area",
    "InvalidPathError",
    "PathErrorCode",
    "PathEscapeError",
    "SessionPath",
    "WriteProtectedError",
    "ensure_writable",
    "resolve_logical",
]

# Linux limits (bytes, file-system encoding): one component, and a whole path.
NAME_MAX: Final = 255
PATH_MAX: Final = 4095


class Area(StrEnum):
    """The top-level folders of a session workspace."""

    INPUT = "input"
    SCRATCHPAD = "scratchpad"
    OUTPUT = "output"


# Each logical root and its alias map to one area.
LOGICAL_ROOTS: Final[dict[str, Area]] = {
    "input": Area.INPUT,
    "inputs": Area.INPUT,
    "scratchpad": Area.SCRATCHPAD,
    "scratch": Area.SCRATCHPAD,
    "output": Area.OUTPUT,
    "outputs": Area.OUTPUT,
}

# Where a session's project folder appears among its paths (``project/…``), when the session
# names one (``cwd``): plain relative paths then start there (see ``workspace.Workspace``).
PROJECT: Final = "project"

# Platform code folders, read-only unless the agent config allows platform work.
DEFAULT_PLATFORM_DIRS: Final[frozenset[str]] = frozenset({"src", "backend", "frontend", "scripts"})


class PathErrorCode(StrEnum):
    """Stable ``code`` values of the path errors."""

    EMPTY = "path_empty"
    INVALID = "path_invalid"
    TOO_LONG = "path_too_long"
    NAME_TOO_LONG = "path_name_too_long"
    ESCAPE = "path_escape"
    ABSOLUTE_OUTSIDE = "path_absolute_outside"
    SYMLINK_ESCAPE = "path_symlink_escape"
    SYMLINK_LOOP = "path_symlink_loop"
    SYMLINK_RACE = "path_symlink_race"
    NOT_FOUND = "path_not_found"
    NOT_A_DIRECTORY = "path_not_a_directory"
    IS_A_DIRECTORY = "path_is_a_directory"
    NOT_REGULAR = "path_not_regular_file"
    INPUT_READ_ONLY = "path_input_read_only"
    PLATFORM_READ_ONLY = "path_platform_read_only"
    PROJECT_READ_ONLY = "path_project_read_only"
    OUTSIDE_WORK_AREAS = "path_outside_work_areas"


class InvalidPathError(ToolError):
    """A path the tools cannot use: empty, NUL bytes, overlong, missing, wrong kind of file."""


class PathEscapeError(PermissionDeniedError):
    """A path that would leave the session directory (``..``, absolute path, symlink)."""


class WriteProtectedError(PermissionDeniedError):
    """A write into ``input/``, a platform folder or the session root itself."""


@dataclass(frozen=True, slots=True)
class SessionPath:
    """A location inside a session: components relative to the session root.

    Invariant: no component is empty, ``.`` or ``..``, none contains ``/`` or NUL. ``parts == ()``
    is the session root itself.
    """

    parts: tuple[str, ...]

    @property
    def area(self) -> Area | None:
        """The area this path lies in, or None for the session root and other top-level names."""
        if not self.parts:
            return None
        try:
            return Area(self.parts[0])
        except ValueError:
            return None

    @property
    def name(self) -> str:
        """The last component ('' for the session root)."""
        return self.parts[-1] if self.parts else ""

    def child(self, name: str) -> SessionPath:
        """This path extended by one component (which the caller got from the file system)."""
        return SessionPath((*self.parts, name))

    def __str__(self) -> str:
        return "/".join(self.parts) if self.parts else "."


def _encoded_length(text: str) -> int:
    try:
        return len(os.fsencode(text))
    except UnicodeEncodeError as exc:
        raise InvalidPathError(
            PathErrorCode.INVALID, "path is not valid in the file-system encoding", cause=exc
        ) from exc


def _check_shape(raw: object) -> str:
    if not isinstance(raw, str):
        raise InvalidPathError(PathErrorCode.INVALID, "path must be a string")
    if raw == "":
        raise InvalidPathError(PathErrorCode.EMPTY, "path is empty")
    if "\x00" in raw:
        raise InvalidPathError(PathErrorCode.INVALID, "path contains a NUL byte")
    if _encoded_length(raw) > PATH_MAX:
        raise InvalidPathError(
            PathErrorCode.TOO_LONG,
            f"path is longer than {PATH_MAX} bytes",
            details={"max": PATH_MAX},
        )
    for part in raw.split("/"):
        if _encoded_length(part) > NAME_MAX:
            raise InvalidPathError(
                PathErrorCode.NAME_TOO_LONG,
                f"a path component is longer than {NAME_MAX} bytes",
                details={"max": NAME_MAX},
            )
    return raw


def _below_root(raw: str, root: str) -> list[str] | None:
    """Components of absolute ``raw`` below ``root`` (after lexical ``..``), or None if outside."""
    normalized = posixpath.normpath(raw)
    root = posixpath.normpath(root)
    if normalized == root:
        return []
    if normalized.startswith(root.rstrip("/") + "/"):
        return normalized[len(root.rstrip("/")) + 1 :].split("/")
    return None


def _normalize(base: Iterable[str], components: Iterable[str]) -> tuple[str, ...]:
    """Apply ``components`` to ``base`` lexically; ``..`` may not climb above the session root."""
    stack = list(base)
    for part in components:
        if part in ("", "."):
            continue
        if part == "..":
            if not stack:
                raise PathEscapeError(
                    PathErrorCode.ESCAPE, "'..' would leave the session workspace"
                )
            stack.pop()
        else:
            stack.append(part)
    return tuple(stack)


def _in_project(components: Iterable[str]) -> SessionPath:
    """``project/`` and ``components`` below it; ``..`` may not climb out of the project."""
    parts = _normalize((PROJECT,), components)
    if not parts or parts[0] != PROJECT:
        raise PathEscapeError(PathErrorCode.ESCAPE, "'..' would leave the project folder")
    return SessionPath(parts)


def resolve_logical(
    raw: object,
    *,
    session_roots: Sequence[str],
    cwd: SessionPath,
    project_roots: Sequence[str] = (),
) -> SessionPath:
    """Route ``raw`` to a :class:`SessionPath`, or raise a path error saying what is wrong.

    ``session_roots`` are the session directory as absolute host paths (as configured and as
    resolved); an absolute ``raw`` is accepted only below one of them, or below one of
    ``project_roots`` (the session's project folder, when it has one: then ``project/…`` names
    it). ``cwd`` is where plain relative paths start.
    """
    text = _check_shape(raw)
    if text.startswith("/"):
        for root in project_roots:
            below = _below_root(text, root)
            if below is not None:
                return _in_project(below)
        for root in session_roots:
            below = _below_root(text, root)
            if below is not None:
                return SessionPath(_normalize((), below))
        raise PathEscapeError(
            PathErrorCode.ABSOLUTE_OUTSIDE,
            "absolute paths must point inside this session's workspace"
            f"{' or project folder' if project_roots else ''}; "
            "use output/…, scratchpad/… or input/…",
        )
    components = [p for p in text.split("/") if p not in ("", ".")]
    if components and components[0] in LOGICAL_ROOTS:
        area = LOGICAL_ROOTS[components[0]]
        return SessionPath(_normalize((area.value,), components[1:]))
    if project_roots and components and components[0] == PROJECT:
        return _in_project(components[1:])
    if project_roots and cwd.parts[:1] == (PROJECT,):
        return _in_project([*cwd.parts[1:], *components])
    return SessionPath(_normalize(cwd.parts, components))


def ensure_writable(
    path: SessionPath, *, platform_dirs: frozenset[str], allow_platform_work: bool
) -> None:
    """Raise :class:`WriteProtectedError` unless agent tools may write ``path``.

    ``input/`` is always read-only. ``scratchpad/`` and ``output/`` are writable. Platform folders
    (compared case-insensitively, so ``SRC/`` is no way around them) and any other top-level name
    (``session.json``, …) are writable only when the agent config allows platform work. So is the
    session's project folder (``project/…``): agents read it, and write their results to
    ``output/`` and their work files to ``scratchpad/``, unless the session asked for work on the
    project itself.
    """
    if not path.parts:
        raise WriteProtectedError(
            PathErrorCode.OUTSIDE_WORK_AREAS, "cannot write the session directory itself"
        )
    if path.parts[0] == PROJECT and not allow_platform_work:
        raise WriteProtectedError(
            PathErrorCode.PROJECT_READ_ONLY,
            f"{path} is in the session's project folder, which agents only read here; write "
            "results to output/ and work files to scratchpad/ (the session's agent_config "
            "allow_platform_writes lets agents change the project itself)",
        )
    area = path.area
    if area is Area.INPUT:
        raise WriteProtectedError(
            PathErrorCode.INPUT_READ_ONLY,
            f"{path} is in input/, which is read-only; write to output/ or scratchpad/ instead",
        )
    if area in (Area.SCRATCHPAD, Area.OUTPUT) or allow_platform_work:
        return
    top = path.parts[0].casefold()
    if top in {d.casefold() for d in platform_dirs}:
        raise WriteProtectedError(
            PathErrorCode.PLATFORM_READ_ONLY,
            f"{path} is in the platform code folder {path.parts[0]}/, which is read-only here",
        )
    raise WriteProtectedError(
        PathErrorCode.OUTSIDE_WORK_AREAS,
        f"{path} is outside output/ and scratchpad/; agents write only there",
    )
