"""The skills in effect for a session: ``GET /v1/sessions/{id}/skills``.

The same scan the run-worker does at a run's start (``agent_core.skills.session_skills``: the
operator's folders, the account's, the session's project, filtered by the session's
``enabled_skills``), with every skipped ``SKILL.md`` and why. Another account's session is 404.
With the ``s3`` file store the account's skills are first brought from the store to this host's
copy (``agent_core.skills.store``): a skill installed through any host is listed.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter

from agent_core.skills import SkillList, session_skills
from agent_core.skills.store import hydrate_account_skills
from agent_core.tools import Workspace
from agent_core.types.api import stored_overrides
from services.gateway.errors import responses
from services.gateway.state import CallerDep, GatewayDep, get_session

__all__ = ["router"]

router = APIRouter(prefix="/v1/sessions/{session_id}", tags=["skills"])


@router.get("/skills", response_model=SkillList, responses=responses(404))
async def list_skills(session_id: str, gw: GatewayDep, caller: CallerDep) -> SkillList:
    """The session's skills in precedence order (name, description, source, whether the model
    may load it, allowed tools) and the problems of the skill files that were skipped."""
    session = await get_session(gw, caller, session_id)
    settings = gw.ctx.settings
    if settings.skills.enabled:
        await hydrate_account_skills(gw.files, settings.home, session.account_id)
    enabled = stored_overrides(session.metadata).get("enabled_skills")
    root = Workspace(settings.home, session.account_id, session.session_id).root
    catalog = await asyncio.to_thread(
        session_skills,
        settings,
        account_id=session.account_id,
        cwd=session.cwd,
        workspace_root=root,
        enabled=enabled,
    )
    return catalog.view()
