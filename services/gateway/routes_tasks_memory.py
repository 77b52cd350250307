"""Task lists of a session (read-only) and the account's memory files: list, read, replace with
ETag, history (from the change log) and restore of an earlier version."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Path, Response
from pydantic import BaseModel, ConfigDict, Field

from agent_core.bus.contracts.tasks import TaskDagView, TaskListsView, TaskScope
from agent_core.errors import AgentCoreError
from agent_core.memory.client import (
    MemoryClient,
    MemoryFile,
    MemoryFiles,
    MemoryHistoryView,
)
from agent_core.memory.document import MAX_FILE_CHARS
from agent_core.tasks.client import TaskClient
from agent_core.tools import Workspace
from agent_core.tools.projects import InvalidProjectError, normalize_project, project_dir
from agent_core.types.runtime import SessionState
from services.gateway.errors import ApiError, not_found, responses
from services.gateway.state import CallerDep, GatewayDep, get_session

__all__ = ["router"]

router = APIRouter(tags=["tasks", "memory"])

_SKILL = r"^[A-Za-z0-9_\-]{1,64}$"


def _tasks(gw: GatewayDep) -> TaskClient:
    return TaskClient(gw.ctx.rpc, gw.ctx.names, timeout_s=gw.ctx.settings.bus.request_timeout_s)


def _project(gw: GatewayDep, session: SessionState) -> TaskScope:
    """The session's task scope (409 when its stored project name is no longer usable: checked
    here so the answer says so; task-wal resolves the name again against its own home)."""
    workspace = Workspace(gw.ctx.settings.home, session.account_id, session.session_id)
    roots = gw.ctx.settings.projects.roots
    try:
        project_dir(session.cwd, roots=roots, workspace_root=workspace.root)
        project = normalize_project(session.cwd, roots)
    except InvalidProjectError as exc:
        raise ApiError(409, exc.code, exc.message) from exc
    return TaskScope(account_id=session.account_id, project=project)


def _memory(gw: GatewayDep) -> MemoryClient:
    return MemoryClient(gw.ctx.rpc, gw.ctx.names, timeout_s=gw.ctx.settings.bus.request_timeout_s)


@router.get(
    "/v1/sessions/{session_id}/tasks",
    response_model=TaskListsView,
    responses=responses(404, 409, 503),
)
async def list_task_lists(session_id: str, gw: GatewayDep, caller: CallerDep) -> TaskListsView:
    """The session's task lists; a corrupt list is listed as unavailable with its error."""
    session = await get_session(gw, caller, session_id)
    return await _tasks(gw).list_dags(session_id, _project(gw, session))


@router.get(
    "/v1/sessions/{session_id}/tasks/{list_name}",
    response_model=TaskDagView,
    responses=responses(404, 409, 503),
)
async def read_task_list(
    session_id: str, list_name: str, gw: GatewayDep, caller: CallerDep
) -> TaskDagView:
    """One task DAG with its ready and blocked tasks."""
    session = await get_session(gw, caller, session_id)
    try:
        return await _tasks(gw).get_dag(session_id, _project(gw, session), list_name)
    except AgentCoreError as exc:
        if "not_found" in exc.code or exc.code in {"unknown_list", "list_not_found"}:
            raise not_found("task list") from exc
        raise


class MemoryUpdate(BaseModel):
    """The new Markdown of a memory file (frontmatter and one bullet per entry)."""

    model_config = ConfigDict(extra="forbid")

    content: str = Field(max_length=MAX_FILE_CHARS)


class MemoryRestore(BaseModel):
    """The version (a past ETag, as listed by the history) to write back."""

    model_config = ConfigDict(extra="forbid")

    version: str = Field(pattern=r"^[0-9a-f]{32}$")


def _scope(skill: str | None) -> str:
    return "user" if skill is None else f"skill:{skill}"


async def _read(gw: GatewayDep, account: str, scope: str, response: Response) -> MemoryFile:
    memory = await _memory(gw).read(account, scope)
    if memory.etag:
        response.headers["ETag"] = f'"{memory.etag}"'
    return memory


def _precondition(if_match: str | None) -> str | None:
    if not if_match:
        # Without a precondition an API write could silently replace a concurrent edit.
        raise ApiError(
            428, "precondition_required", "send If-Match with the ETag you read ('*' if none)"
        )
    return None if if_match.strip() == "*" else if_match.strip().removeprefix("W/").strip('"')


async def _write(
    gw: GatewayDep,
    account: str,
    scope: str,
    body: MemoryUpdate | MemoryRestore,
    if_match: str | None,
    response: Response,
) -> MemoryFile:
    etag = _precondition(if_match)
    client = _memory(gw)
    try:
        if isinstance(body, MemoryRestore):
            memory = await client.restore(account, scope, body.version, if_match=etag)
        else:
            memory = await client.write(account, scope, body.content, if_match=etag)
    except AgentCoreError as exc:
        if exc.code == "precondition_failed":
            raise ApiError(
                412, exc.code, "the file changed since you read it; read it again"
            ) from exc
        raise
    if memory.etag:
        response.headers["ETag"] = f'"{memory.etag}"'
    return memory


@router.get("/v1/memory/user", response_model=MemoryFile, responses=responses(503))
async def read_user_memory(gw: GatewayDep, caller: CallerDep, response: Response) -> MemoryFile:
    """The account's ``user.md`` with its ETag."""
    return await _read(gw, caller.account_id, _scope(None), response)


@router.put("/v1/memory/user", response_model=MemoryFile, responses=responses(400, 409, 412, 428))
async def write_user_memory(
    body: MemoryUpdate,
    gw: GatewayDep,
    caller: CallerDep,
    response: Response,
    if_match: Annotated[str | None, Header()] = None,
) -> MemoryFile:
    """Replace ``user.md`` if it still has the ETag given in If-Match."""
    return await _write(gw, caller.account_id, _scope(None), body, if_match, response)


@router.get("/v1/memory/skills/{skill}", response_model=MemoryFile, responses=responses(400, 503))
async def read_skill_memory(
    skill: Annotated[str, Path(pattern=_SKILL)],
    gw: GatewayDep,
    caller: CallerDep,
    response: Response,
) -> MemoryFile:
    """``skills/<skill>.md`` with its ETag."""
    return await _read(gw, caller.account_id, _scope(skill), response)


@router.put(
    "/v1/memory/skills/{skill}", response_model=MemoryFile, responses=responses(400, 409, 412, 428)
)
async def write_skill_memory(
    skill: Annotated[str, Path(pattern=_SKILL)],
    body: MemoryUpdate,
    gw: GatewayDep,
    caller: CallerDep,
    response: Response,
    if_match: Annotated[str | None, Header()] = None,
) -> MemoryFile:
    """Replace ``skills/<skill>.md`` if it still has the ETag given in If-Match."""
    return await _write(gw, caller.account_id, _scope(skill), body, if_match, response)


@router.get("/v1/memory", response_model=MemoryFiles, responses=responses(503))
async def list_memory(gw: GatewayDep, caller: CallerDep) -> MemoryFiles:
    """The account's memory files (``user`` and every skill) with their size and ETag."""
    return await _memory(gw).list(caller.account_id)


@router.get("/v1/memory/user/history", response_model=MemoryHistoryView, responses=responses(503))
async def user_memory_history(gw: GatewayDep, caller: CallerDep) -> MemoryHistoryView:
    """The versions of ``user.md``, newest first, each with the changes that made it."""
    return await _memory(gw).history(caller.account_id, _scope(None))


@router.get(
    "/v1/memory/skills/{skill}/history",
    response_model=MemoryHistoryView,
    responses=responses(400, 503),
)
async def skill_memory_history(
    skill: Annotated[str, Path(pattern=_SKILL)], gw: GatewayDep, caller: CallerDep
) -> MemoryHistoryView:
    """The versions of ``skills/<skill>.md``, newest first."""
    return await _memory(gw).history(caller.account_id, _scope(skill))


@router.post(
    "/v1/memory/user/restore",
    response_model=MemoryFile,
    responses=responses(400, 404, 409, 412, 428),
)
async def restore_user_memory(
    body: MemoryRestore,
    gw: GatewayDep,
    caller: CallerDep,
    response: Response,
    if_match: Annotated[str | None, Header()] = None,
) -> MemoryFile:
    """Write an earlier version of ``user.md`` back (If-Match: the current ETag)."""
    return await _write(gw, caller.account_id, _scope(None), body, if_match, response)


@router.post(
    "/v1/memory/skills/{skill}/restore",
    response_model=MemoryFile,
    responses=responses(400, 404, 409, 412, 428),
)
async def restore_skill_memory(
    skill: Annotated[str, Path(pattern=_SKILL)],
    body: MemoryRestore,
    gw: GatewayDep,
    caller: CallerDep,
    response: Response,
    if_match: Annotated[str | None, Header()] = None,
) -> MemoryFile:
    """Write an earlier version of ``skills/<skill>.md`` back."""
    return await _write(gw, caller.account_id, _scope(skill), body, if_match, response)
