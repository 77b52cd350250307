"""The hooks in effect for a session: the operator's and, when the session's project lies under
a trusted root, its project's ``.soong-agent/hooks.toml`` (README, "Hooks").

Read-only and account-scoped like every session route: another account's session answers 404.
The operator's hooks are listed without their commands (their scripts and paths are the
deployment's); a project's are shown redacted (a token in an argv is not shown back). The project
file is named by its logical path (``<cwd>/.soong-agent/hooks.toml``), never a host path.
"""

from __future__ import annotations

import asyncio
from functools import lru_cache
from pathlib import Path

from fastapi import APIRouter

from agent_core.errors import ConfigError
from agent_core.hooks import HookList, HooksInEffect, HooksSettings, describe
from agent_core.tools import Workspace
from agent_core.tools.projects import WORKSPACE_PROJECT, InvalidProjectError, project_dir
from services.gateway.errors import responses
from services.gateway.state import CallerDep, GatewayDep, get_session

__all__ = ["router"]

router = APIRouter(tags=["hooks"])


@lru_cache(maxsize=4)
def _in_effect(settings: HooksSettings) -> HooksInEffect:
    """One reader per configuration (it caches parsed project files)."""
    return HooksInEffect(settings)


@router.get("/v1/sessions/{session_id}/hooks", response_model=HookList, responses=responses(404))
async def list_hooks(session_id: str, gw: GatewayDep, caller: CallerDep) -> HookList:
    """The hooks that run for this session's agents (main, orchestrator, worker, fork), in the
    order they run per event; ``problem`` says why a project file cannot be used."""
    session = await get_session(gw, caller, session_id)
    settings = gw.ctx.settings
    effective = _in_effect(settings.hooks)
    project: Path | None = None
    if session.cwd not in ("", WORKSPACE_PROJECT):
        workspace = Workspace(settings.home, session.account_id, session.session_id)
        try:
            project = project_dir(
                session.cwd, roots=settings.projects.roots, workspace_root=workspace.root
            )
        except InvalidProjectError:
            project = None  # its runs cannot start either; the operator's hooks still apply
    file = effective.project_file(project)
    logical = None
    if file is not None and project is not None:
        logical = f"{session.cwd}/{file.relative_to(project).as_posix()}"
    try:
        hooks = await asyncio.to_thread(effective.for_project, project)
    except ConfigError as exc:
        problem = exc.message if file is None else exc.message.replace(str(file), str(logical))
        return HookList(items=describe(effective.operator), project_file=logical, problem=problem)
    shown = logical if any(h.source == "project" for h in hooks.hooks) else None
    return HookList(items=describe(hooks.hooks), project_file=shown)
