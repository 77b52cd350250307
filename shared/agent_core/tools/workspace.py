"""The session workspace: ``<home>/accounts/<account_id>/sessions/<session_id>/`` (docs/architecture.md, "Server-owned paths").

Three areas: ``input/`` (what users upload; read-only to agents), ``scratchpad/`` (temporary
scripts and caches; the working directory of code execution) and ``output/`` (deliverables, which
become artifacts). A :class:`Workspace` is cheap to build and does no I/O until :meth:`ensure`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path

from agent_core.ids import sanitize_identifier
from agent_core.tools.fsaccess import SessionFS
from agent_core.tools.mounts import MountedFS
from agent_core.tools.paths import (
    DEFAULT_PLATFORM_DIRS,
    PROJECT,
    Area,
    SessionPath,
    ensure_writable,
    resolve_logical,
)

__all__ = ["Workspace"]


class Workspace:
    """One session's directory and the rules for reaching into it.

    ``allow_platform_work`` comes from the agent config: without it, agent tools write only into
    ``scratchpad/`` and ``output/``. ``cwd`` is where plain relative paths start (the
    scratchpad, so stray files never land in a project root; the project folder once
    :meth:`use_project` mounted one, which agents then read but do not write).
    """

    def __init__(
        self,
        home: str | os.PathLike[str],
        account_id: str,
        session_id: str,
        *,
        platform_dirs: Iterable[str] = DEFAULT_PLATFORM_DIRS,
        allow_platform_work: bool = False,
        cwd: Area = Area.SCRATCHPAD,
    ) -> None:
        # Both ids become directory names: only [A-Za-z0-9_]+ may pass, so neither can be
        # '..', contain '/', or alias another account's or session's folder.
        self.account_id = sanitize_identifier(account_id)
        self.session_id = sanitize_identifier(session_id)
        self.root = Path(os.path.abspath(home)) / "accounts" / account_id / "sessions" / session_id
        self.platform_dirs = frozenset(platform_dirs)
        self.allow_platform_work = allow_platform_work
        self.cwd = SessionPath((cwd.value,))
        self.fs: SessionFS = SessionFS(str(self.root))
        self.project: Path | None = None

    def use_project(self, folder: str | os.PathLike[str]) -> None:
        """Make the session's project folder (an existing folder the server resolved, see
        ``projects.project_dir``) the agent's working folder: it appears as ``project/…``, plain
        relative paths start there, and writes into it follow :func:`ensure_writable`.
        ``input/``, ``scratchpad/`` and ``output/`` stay where they are. A project that is the
        workspace itself changes nothing."""
        real = os.path.realpath(folder)
        if real in self._roots or not os.path.isdir(real):
            return
        self.project = Path(real)
        self.cwd = SessionPath((PROJECT,))
        self.fs = MountedFS(str(self.root), {PROJECT: real})

    @cached_property
    def _roots(self) -> tuple[str, ...]:
        # The configured and the resolved form: agents may quote either as an absolute path.
        return tuple(dict.fromkeys((str(self.root), os.path.realpath(self.root))))

    def area_dir(self, area: Area) -> Path:
        """The host directory of one area (for a subprocess cwd, not for agent-supplied paths)."""
        return self.root / area.value

    @property
    def scratchpad(self) -> Path:
        """The host directory where code execution runs."""
        return self.area_dir(Area.SCRATCHPAD)

    def ensure(self) -> None:
        """Create the session directory and its three areas (idempotent)."""
        for area in Area:
            self.area_dir(area).mkdir(parents=True, exist_ok=True)

    def remove(self) -> None:
        """Remove the session's directory and everything in it (the session was deleted);
        nothing to do if it is gone already."""
        shutil.rmtree(self.root, ignore_errors=True)

    def resolve(self, raw: object) -> SessionPath:
        """Route an agent-supplied path into this session, or raise a path error."""
        projects = () if self.project is None else (str(self.project),)
        return resolve_logical(raw, session_roots=self._roots, cwd=self.cwd, project_roots=projects)

    def check_write(self, path: SessionPath) -> None:
        """Raise ``WriteProtectedError`` unless agent tools may write ``path``."""
        ensure_writable(
            path, platform_dirs=self.platform_dirs, allow_platform_work=self.allow_platform_work
        )

    def host_path(self, path: SessionPath) -> Path:
        """The host path of a session path, for display and logs; access goes through ``fs``."""
        if self.project is not None and path.parts[:1] == (PROJECT,):
            return self.project.joinpath(*path.parts[1:])
        return self.root.joinpath(*path.parts)
