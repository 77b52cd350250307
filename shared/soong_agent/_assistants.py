"""``client.assistants``: the account's named agents (reusable, versioned agent definitions)."""

from __future__ import annotations

from typing import Any

from agent_core.types.api import (
    Assistant,
    AssistantDefinition,
    AssistantList,
    AssistantVersions,
    CreateAssistantRequest,
    PatchAssistantRequest,
)
from soong_agent import _operations as ops
from soong_agent._http import HttpCore

__all__ = ["AsyncAssistants"]


def _if_match(version: int | None) -> dict[str, str] | None:
    return None if version is None else {"If-Match": f'"v{version}"'}


class AsyncAssistants:
    """Create, read, update (a new version each time) and archive named agents.

    An assistant is addressed by its name or its id. ``if_version`` makes an update
    conditional: it applies only while that is the latest version, else
    :class:`~soong_agent.PreconditionFailedError`. A session is made from one with
    ``client.create_session(assistant=name)``.
    """

    def __init__(self, http: HttpCore) -> None:
        self._http = http

    async def create(self, definition: CreateAssistantRequest | dict[str, Any]) -> Assistant:
        """Create one (version 1); :class:`~soong_agent.ConflictError` when the name is taken."""
        body = CreateAssistantRequest.model_validate(definition).model_dump(
            mode="json", exclude_unset=True
        )
        return await self._http.model(ops.CREATE_ASSISTANT, Assistant, json=body)

    async def list(self, *, include_archived: bool = False) -> AssistantList:
        """The account's assistants by name, each at its latest version."""
        query = {"include_archived": "true" if include_archived else None}
        return await self._http.model(ops.LIST_ASSISTANTS, AssistantList, query=query)

    async def get(self, name_or_id: str, *, version: int | None = None) -> Assistant:
        """One assistant at its latest version, or at ``version``."""
        return await self._http.model(
            ops.GET_ASSISTANT, Assistant, {"name_or_id": name_or_id}, query={"version": version}
        )

    async def versions(self, name_or_id: str) -> AssistantVersions:
        """Every version of an assistant, oldest first."""
        return await self._http.model(
            ops.LIST_ASSISTANT_VERSIONS, AssistantVersions, {"name_or_id": name_or_id}
        )

    async def update(
        self,
        name_or_id: str,
        changes: PatchAssistantRequest | dict[str, Any],
        *,
        if_version: int | None = None,
    ) -> Assistant:
        """Change the given fields (``PATCH``): the next version."""
        body = PatchAssistantRequest.model_validate(changes).model_dump(
            mode="json", exclude_unset=True
        )
        return await self._http.model(
            ops.PATCH_ASSISTANT,
            Assistant,
            {"name_or_id": name_or_id},
            json=body,
            headers=_if_match(if_version),
        )

    async def replace(
        self,
        name_or_id: str,
        definition: AssistantDefinition | dict[str, Any],
        *,
        if_version: int | None = None,
    ) -> Assistant:
        """Replace the whole definition (``PUT``): the next version."""
        body = AssistantDefinition.model_validate(definition).model_dump(
            mode="json", exclude_unset=True
        )
        return await self._http.model(
            ops.PUT_ASSISTANT,
            Assistant,
            {"name_or_id": name_or_id},
            json=body,
            headers=_if_match(if_version),
        )

    async def archive(self, name_or_id: str) -> None:
        """Archive it (``DELETE``): gone from the list, its name free; its sessions run on."""
        await self._http.request(ops.ARCHIVE_ASSISTANT, {"name_or_id": name_or_id})
