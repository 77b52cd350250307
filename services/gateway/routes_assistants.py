"""Named agents (assistants): reusable, versioned agent definitions of the caller's account.

``/v1/assistants`` (the name LangGraph's API uses for the same thing): create, list, read (the
latest version or ``?version=N``), list versions, update (``PATCH`` some fields / ``PUT`` the whole
definition: each makes a new version, the old ones stay readable; ``If-Match`` with the ETag read
makes it conditional, 412 when another update came first), archive (``DELETE``). An assistant
is addressed by its name or its id. Everything is scoped by the caller's account: another
account's assistant answers the same 404 as a missing one.

A definition's config must make a working agent config with the deployment's defaults — the
same check as a session's ``agent_config`` (422 ``unknown_provider`` / ``unknown_model`` /
``invalid_config``). :func:`session_config` turns one into a new session's stored config.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Response

from agent_core.bus.contracts.assistants import (
    ArchiveAssistant,
    CreateAssistant,
    GetAssistant,
    ListAssistants,
    ListAssistantVersions,
    UpdateAssistant,
)
from agent_core.bus.contracts.refusals import RefusalCode
from agent_core.errors import StorageError
from agent_core.ids import new_id
from agent_core.storage_client import raise_for_receipt
from agent_core.types.api import (
    Assistant,
    AssistantDefinition,
    AssistantList,
    AssistantPin,
    AssistantVersions,
    CreateAssistantRequest,
    OverridableField,
    PatchAssistantRequest,
    refused_overrides,
    session_overrides,
)
from agent_core.types.runtime import AgentConfigOverrides, merge_overrides
from services.gateway.auth import Caller
from services.gateway.errors import ApiError, not_found, responses
from services.gateway.state import (
    CallerDep,
    Gateway,
    GatewayDep,
    agent_overrides,
    fetch,
    fetch_optional,
)

__all__ = ["check_overridable", "get_assistant", "router", "session_config"]

router = APIRouter(prefix="/v1/assistants", tags=["assistants"])

_MAX_KEY = 64


def _key(name_or_id: str) -> dict[str, str]:
    """The lookup an address stands for: an id (``asst_…``) or a name."""
    if len(name_or_id) > _MAX_KEY:
        raise not_found("assistant")
    if name_or_id.startswith("asst_"):
        return {"assistant_id": name_or_id}
    return {"name": name_or_id}


async def get_assistant(
    gw: Gateway, caller: Caller, name_or_id: str, version: int | None = None
) -> Assistant:
    """The caller's assistant (by name: an active one) at ``version`` (the latest) or 404."""
    query = GetAssistant(account_id=caller.account_id, version=version, **_key(name_or_id))
    return await fetch(gw, query, "assistant")


def _checked(gw: Gateway, definition: AssistantDefinition) -> None:
    """422 unless the definition makes a working agent config on this deployment."""
    agent_overrides(gw, AgentConfigOverrides.model_validate(session_overrides(definition)))


def _etag(assistant: Assistant, response: Response) -> Assistant:
    response.headers["ETag"] = f'"v{assistant.latest_version}"'
    return assistant


def _expected(if_match: str | None) -> int | None:
    """The version an ``If-Match`` asks for (``None``: unconditional, or ``*``)."""
    if if_match is None or if_match.strip() == "*":
        return None
    tag = if_match.strip().removeprefix("W/").strip('"')
    if not (tag.startswith("v") and tag[1:].isdigit() and len(tag) < 20):
        raise ApiError(412, "precondition_failed", "If-Match is not an ETag of this assistant")
    return int(tag[1:])


@router.post("", status_code=201, response_model=Assistant, responses=responses(400, 409, 413, 422))
async def create_assistant(
    body: CreateAssistantRequest, gw: GatewayDep, caller: CallerDep, response: Response
) -> Assistant:
    """Create a named agent (version 1); 409 when the account has an active one of that name."""
    definition = AssistantDefinition.model_validate(body.model_dump(exclude={"name"}))
    _checked(gw, definition)
    assistant_id = new_id("asst")
    command = CreateAssistant(
        command_id=new_id("cmd"),
        account_id=caller.account_id,
        assistant_id=assistant_id,
        name=body.name,
        definition=definition,
    )
    raise_for_receipt(await gw.storage.send(command))
    response.headers["Location"] = f"/v1/assistants/{assistant_id}"
    return _etag(await get_assistant(gw, caller, assistant_id), response)


@router.get("", response_model=AssistantList, responses=responses())
async def list_assistants(
    gw: GatewayDep, caller: CallerDep, include_archived: bool = False
) -> AssistantList:
    """The account's assistants by name, each at its latest version."""
    query = ListAssistants(account_id=caller.account_id, include_archived=include_archived)
    return AssistantList(items=await fetch_optional(gw, query))


@router.get("/{name_or_id}", response_model=Assistant, responses=responses(404))
async def read_assistant(
    name_or_id: str,
    gw: GatewayDep,
    caller: CallerDep,
    response: Response,
    version: Annotated[int | None, Query(ge=1, le=2**62)] = None,  # SQLite holds 64 bits
) -> Assistant:
    """One assistant (by name or id) at its latest version, or at ``version``."""
    return _etag(await get_assistant(gw, caller, name_or_id, version), response)


@router.get("/{name_or_id}/versions", response_model=AssistantVersions, responses=responses(404))
async def list_versions(name_or_id: str, gw: GatewayDep, caller: CallerDep) -> AssistantVersions:
    """Every version of an assistant, oldest first."""
    current = await get_assistant(gw, caller, name_or_id)
    query = ListAssistantVersions(account_id=caller.account_id, assistant_id=current.assistant_id)
    return await fetch(gw, query, "assistant")


async def _update(
    gw: Gateway,
    caller: Caller,
    current: Assistant,
    definition: AssistantDefinition,
    if_match: str | None,
    response: Response,
) -> Assistant:
    _checked(gw, definition)
    command = UpdateAssistant(
        command_id=new_id("cmd"),
        account_id=caller.account_id,
        assistant_id=current.assistant_id,
        definition=definition,
        expected_version=_expected(if_match),
    )
    try:
        raise_for_receipt(await gw.storage.send(command))
    except StorageError as exc:
        if exc.code == RefusalCode.VERSION_MISMATCH:
            raise ApiError(
                412, exc.code, "the assistant changed since you read it; read it again",
                details=exc.details,
            ) from exc  # fmt: skip
        raise
    return _etag(await get_assistant(gw, caller, current.assistant_id), response)


_UPDATE_RESPONSES = responses(404, 409, 412, 413, 422)


@router.patch("/{name_or_id}", response_model=Assistant, responses=_UPDATE_RESPONSES)
async def patch_assistant(
    name_or_id: str,
    body: PatchAssistantRequest,
    gw: GatewayDep,
    caller: CallerDep,
    response: Response,
    if_match: Annotated[str | None, Header()] = None,
) -> Assistant:
    """Change the given fields: a new version (sessions made from older ones keep theirs)."""
    current = await get_assistant(gw, caller, name_or_id)
    try:
        definition = body.apply(current.definition())
    except ValueError as exc:
        raise ApiError(422, "invalid_config", str(exc).splitlines()[0][:300]) from exc
    return await _update(gw, caller, current, definition, if_match, response)


@router.put("/{name_or_id}", response_model=Assistant, responses=_UPDATE_RESPONSES)
async def put_assistant(
    name_or_id: str,
    body: AssistantDefinition,
    gw: GatewayDep,
    caller: CallerDep,
    response: Response,
    if_match: Annotated[str | None, Header()] = None,
) -> Assistant:
    """Replace the whole definition (fields left out take their defaults): a new version."""
    current = await get_assistant(gw, caller, name_or_id)
    return await _update(gw, caller, current, body, if_match, response)


@router.delete("/{name_or_id}", status_code=204, responses=responses(404))
async def archive_assistant(name_or_id: str, gw: GatewayDep, caller: CallerDep) -> Response:
    """Archive it: gone from the list and its name free; sessions made from it run on."""
    current = await get_assistant(gw, caller, name_or_id)
    command = ArchiveAssistant(
        command_id=new_id("cmd"), account_id=caller.account_id, assistant_id=current.assistant_id
    )
    raise_for_receipt(await gw.storage.send(command))
    return Response(status_code=204)


async def session_config(
    gw: Gateway,
    caller: Caller,
    name_or_id: str,
    version: int | None,
    overrides: AgentConfigOverrides | None,
) -> tuple[dict[str, Any], AssistantPin]:
    """A new session's stored agent config made from an assistant, and its pin.

    The definition's config and instructions, with ``overrides`` on top — which may set only
    the fields the definition lists as overridable (409 ``override_not_allowed``, naming them);
    404 for an assistant the caller does not have, 409 for an archived one.
    """
    assistant = await get_assistant(gw, caller, name_or_id, version)
    if assistant.status != "active":
        raise ApiError(409, "assistant_archived", "the assistant is archived")
    check_overridable(assistant.overridable, overrides)
    values = merge_overrides(
        session_overrides(assistant), overrides.overrides() if overrides else {}
    )
    checked = agent_overrides(gw, AgentConfigOverrides.model_validate(values))
    pin = AssistantPin(
        assistant_id=assistant.assistant_id,
        name=assistant.name,
        version=assistant.version,
        overridable=assistant.overridable,
    )
    return checked or {}, pin


def check_overridable(
    overridable: list[OverridableField], overrides: AgentConfigOverrides | None
) -> None:
    """409 ``override_not_allowed`` when ``overrides`` sets a field ``overridable`` leaves out.

    409, not 422: the request is valid on its own; what refuses it is the state of another
    resource (the assistant's definition, which its owner may change), as with an archived one.
    """
    refused = refused_overrides(overridable, overrides)
    if refused:
        raise ApiError(
            409,
            "override_not_allowed",
            f"the assistant does not let a session change {', '.join(refused)}",
            details={"fields": refused, "overridable": list(overridable)},
        )
