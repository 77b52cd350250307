"""Where a task list lives on disk, checked before anything touches the file system.

``<cwd>/.soong-agent/tasks/<session_id>/<stem>.wal.jsonl`` with its request log beside it
(``<stem>.requests.jsonl``). The session id passes :func:`agent_core.ids.validate_session_id`,
``cwd`` must be an absolute, existing directory (resolved, so one directory reached by two paths
is still one writer's file), and the list name goes through the domain's name sanitizer.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agent_core.errors import SchemaError
from agent_core.ids import validate_session_id
from agent_core.tasks import list_file_stem
from agent_core.tasks.names import WAL_SUFFIX

__all__ = [
    "REQUESTS_SUFFIX",
    "ListLocation",
    "ProjectGuard",
    "list_location",
    "project_guard",
    "session_dir",
]

REQUESTS_SUFFIX: Final = ".requests.jsonl"
_MAX_CWD = 4096


@dataclass(frozen=True, slots=True)
class ListLocation:
    """The files of one task list; ``wal`` is also the list's identity in memory.

    Build it with :meth:`at` (paths computed once: they are looked up on every command).
    """

    session_id: str
    directory: Path
    stem: str
    wal: Path
    requests: Path  # the log of applied request ids (for safe retries across restarts)

    @classmethod
    def at(cls, session_id: str, directory: Path, stem: str) -> ListLocation:
        """The location of the list with file stem ``stem`` in a session's directory."""
        wal = directory / (stem + WAL_SUFFIX)
        return cls(session_id, directory, stem, wal, directory / (stem + REQUESTS_SUFFIX))


ProjectGuard = Callable[[str, Path], bool]
"""Whether a session (by id) may keep task lists in a folder (resolved): the server's own
folders only — the session's workspace or a configured project root."""


def project_guard(home: Path, roots: Iterable[Path]) -> ProjectGuard:
    """The guard of a deployment: ``<home>/accounts/*/sessions/<session>`` or below a root."""
    accounts = os.path.realpath(home / "accounts")
    allowed = [os.path.realpath(r) for r in roots]

    def guard(session_id: str, folder: Path) -> bool:
        text = str(folder)
        rel = os.path.relpath(text, accounts).split(os.sep)
        if len(rel) == 3 and rel[0] != ".." and rel[1] == "sessions" and rel[2] == session_id:
            return True
        return any(text == r or text.startswith(r.rstrip("/") + "/") for r in allowed)

    return guard


def session_dir(session_id: str, cwd: str, guard: ProjectGuard | None = None) -> Path:
    """The checked directory of a session's task lists (it may not exist yet).

    Raises :class:`SchemaError` for an invalid session id or a ``cwd`` that is not an absolute,
    existing directory the ``guard`` admits (task-wal never creates files anywhere else).
    Errors name no path: they reach answers.
    """
    validate_session_id(session_id)
    if not cwd or len(cwd) > _MAX_CWD or "\x00" in cwd or not os.path.isabs(cwd):
        raise SchemaError(
            "invalid_cwd",
            "the session's project folder is not an absolute path",
        )
    root = Path(os.path.realpath(cwd))
    if not root.is_dir():
        raise SchemaError("invalid_cwd", "the session's project folder does not exist")
    if guard is not None and not guard(session_id, root):
        raise SchemaError("invalid_cwd", "the session's project folder is not one this server owns")
    return root / ".soong-agent" / "tasks" / session_id


def list_location(
    session_id: str, cwd: str, list_name: str, guard: ProjectGuard | None = None
) -> ListLocation:
    """The checked location of task list ``list_name`` (see :func:`session_dir` for errors)."""
    directory = session_dir(session_id, cwd, guard)
    return ListLocation.at(session_id, directory, list_file_stem(list_name))
