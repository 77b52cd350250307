"""The skills in effect for one session: its account's, its project's and the operator's folders,
filtered by the agent config's ``enabled_skills`` (the run-worker and the gateway share this)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from agent_core.config import Settings
from agent_core.skills.scan import SkillCatalog, scan_skills, skill_folders
from agent_core.tools.projects import InvalidProjectError, project_dir

__all__ = ["session_skills"]


def session_skills(
    settings: Settings,
    *,
    account_id: str,
    cwd: str,
    workspace_root: Path,
    enabled: Iterable[str] | None = None,
) -> SkillCatalog:
    """The catalogue of a session of ``account_id`` working in project ``cwd``; empty when
    ``[skills] enabled = false``. A project that is no longer usable contributes no skills."""
    if not settings.skills.enabled:
        return SkillCatalog()
    try:
        project: Path | None = project_dir(
            cwd, roots=settings.projects.roots, workspace_root=workspace_root
        )
    except InvalidProjectError:
        project = None
    folders = skill_folders(
        home=settings.home,
        account_id=account_id,
        project=project,
        operator_dirs=settings.skills.dirs,
    )
    return scan_skills(folders).enabled(None if enabled is None else list(enabled))
