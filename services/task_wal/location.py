"""Where a task list lives on disk, checked before anything touches the file system.

``<project>/.soong-agent/tasks/<session_id>/<stem>.wal.jsonl`` with its request log beside it
(``<stem>.requests.jsonl``). Messages name the project logically (a :class:`TaskScope`: account and
``workspace`` / ``<root>`` / ``<root>/<folder>``); :class:`Projects` resolves that name against
this host's home and ``[projects] roots`` (resolved, so one directory reached by two paths is still
one writer's file). The session id passes :func:`agent_core.ids.validate_session_id` and the list
name goes through the domain's name sanitizer.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agent_core.bus.contracts.tasks import TaskScope
from agent_core.errors import SchemaError
from agent_core.ids import validate_session_id
from agent_core.tasks import list_file_stem
from agent_core.tasks.names import WAL_SUFFIX
from agent_core.tools.projects import normalize_project, project_dir

__all__ = [
    "REQUESTS_SUFFIX",
    "STORE_ROOT",
    "ListLocation",
    "ProjectGuard",
    "Projects",
    "list_location",
    "project_guard",
    "session_dir",
]

REQUESTS_SUFFIX: Final = ".requests.jsonl"
STORE_ROOT: Final = (
    "task-wal"  # where the lists are in the file store (services/task_wal/objectwal)
)


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


class Projects:
    """This host's folders of logical projects: a session's workspace under ``home`` or a folder
    below a configured root (the guard re-checks the result: task-wal writes nowhere else)."""

    def __init__(self, home: Path, roots: Mapping[str, Path], *, in_store: bool = False) -> None:
        self.home = home
        self.roots = dict(roots)
        # Lists kept in the file store (the s3 engine) depend on no folder of this host.
        self.in_store = in_store
        self._guard = project_guard(home, roots.values())

    def folder(self, session_id: str, scope: TaskScope) -> Path:
        """The existing folder of ``scope``'s project (``SchemaError`` ``invalid_cwd`` if none;
        errors name no host path: they reach answers)."""
        workspace = self.home / "accounts" / scope.account_id / "sessions" / session_id
        logical = normalize_project(scope.project, self.roots)
        root = Path(
            os.path.realpath(project_dir(logical, roots=self.roots, workspace_root=workspace))
        )
        if not root.is_dir():
            raise SchemaError("invalid_cwd", f"the session's project {logical!r} does not exist")
        if not self._guard(session_id, root):
            raise SchemaError("invalid_cwd", "the session's project is not one this server owns")
        return root


def session_dir(session_id: str, scope: TaskScope, projects: Projects) -> Path:
    """The checked directory of a session's task lists (it may not exist yet).

    Raises :class:`SchemaError` for an invalid session id or a project this host cannot use. With
    the lists in the file store, the project's name is checked but no folder is needed.
    """
    validate_session_id(session_id)
    if projects.in_store:
        normalize_project(scope.project, projects.roots)  # an unknown root is refused all the same
        # Not a folder: the lists' identity, a relative path never opened (objectwal's keys).
        return Path(STORE_ROOT) / session_id
    return projects.folder(session_id, scope) / ".soong-agent" / "tasks" / session_id


def list_location(
    session_id: str, scope: TaskScope, list_name: str, projects: Projects
) -> ListLocation:
    """The checked location of task list ``list_name`` (see :func:`session_dir` for errors)."""
    directory = session_dir(session_id, scope, projects)
    return ListLocation.at(session_id, directory, list_file_stem(list_name))
