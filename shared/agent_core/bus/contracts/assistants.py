"""Contracts of the named agents' (assistants') storage commands and queries.

They travel on the storage streams with the session commands and queries (members of
``StorageCommand`` / ``StorageQuery``) but concern an *account*, not a session: they carry
``account_id`` where a session command carries ``session_id``, and the writer keeps an account's
assistants together in one shard file picked by the account id (``docs/architecture.md``,
"Named agents"). Like every command, they carry the ids their sender allocated (``command_id``,
``assistant_id``), so a repeat gets the first result back and changes nothing.

Every query is scoped by ``account_id`` (required here, unlike session queries): another
account's assistant answers exactly like a missing one (``data=None``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field, model_validator

from agent_core.bus.contracts._base import BusMessage
from agent_core.bus.contracts._replies import CommandResult, ResultType, many, one
from agent_core.ids import id_pattern
from agent_core.types._assistant import Assistant, AssistantDefinition, AssistantName
from agent_core.types.api import AssistantVersions

if TYPE_CHECKING:
    from agent_core.bus.contracts.storage import QueryReply

__all__ = [
    "MAX_ACTIVE_ASSISTANTS",
    "AccountCommand",
    "ArchiveAssistant",
    "ArchiveAssistantResult",
    "CreateAssistant",
    "CreateAssistantResult",
    "GetAssistant",
    "ListAssistantVersions",
    "ListAssistants",
    "UpdateAssistant",
    "UpdateAssistantResult",
]

_ASSISTANT_ID = id_pattern("asst")
# Active assistants per account: a listing returns them all, so their number is bounded.
MAX_ACTIVE_ASSISTANTS = 1000
_INT_MAX = 2**63 - 1


class AccountCommand(BusMessage):
    """Base of the commands that concern an account's own records rather than a session."""

    command_id: str = Field(min_length=1, max_length=64)
    account_id: str = Field(min_length=1, max_length=64)


class CreateAssistantResult(CommandResult):
    """:class:`CreateAssistant`'s result."""

    assistant_id: str
    version: int
    created_at: str


class CreateAssistant(AccountCommand):
    """Create an assistant at version 1. Refused as ``assistant_exists`` when the account has an
    active assistant of that name, ``too_many_assistants`` when it has
    :data:`MAX_ACTIVE_ASSISTANTS`. Result: ``assistant_id``, ``version``, ``created_at``."""

    type: Literal["create_assistant"] = "create_assistant"
    result_type: ClassVar[ResultType] = CreateAssistantResult
    assistant_id: str = Field(pattern=_ASSISTANT_ID)
    name: AssistantName
    definition: AssistantDefinition


class UpdateAssistantResult(CommandResult):
    """:class:`UpdateAssistant`'s result: the version it stored."""

    assistant_id: str
    version: int
    updated_at: str


class UpdateAssistant(AccountCommand):
    """Store ``definition`` as the assistant's next version (the older ones are kept).

    With ``expected_version`` the update applies only while that is the latest version, else it
    is refused as ``version_mismatch`` (``details.current_version``). An archived assistant
    refuses it (``assistant_archived``), another account's is ``assistant_not_found``.
    Result: ``assistant_id``, ``version``, ``updated_at``.
    """

    type: Literal["update_assistant"] = "update_assistant"
    result_type: ClassVar[ResultType] = UpdateAssistantResult
    assistant_id: str = Field(pattern=_ASSISTANT_ID)
    definition: AssistantDefinition
    expected_version: int | None = Field(default=None, ge=1, le=_INT_MAX)


class ArchiveAssistantResult(CommandResult):
    """:class:`ArchiveAssistant`'s result."""

    assistant_id: str
    status: Literal["archived"]


class ArchiveAssistant(AccountCommand):
    """Archive an assistant: it leaves the list and its name is free again; its versions stay
    readable by id, and sessions made from it keep running as pinned. Archiving an archived one
    changes nothing. Result: ``assistant_id``, ``status``."""

    type: Literal["archive_assistant"] = "archive_assistant"
    result_type: ClassVar[ResultType] = ArchiveAssistantResult
    assistant_id: str = Field(pattern=_ASSISTANT_ID)


class GetAssistant(BusMessage):
    """One assistant of the account, by id or by (active) name, at its latest version or at
    ``version``. Data: an :class:`~agent_core.types.api.Assistant`'s fields, or ``None``."""

    type: Literal["get_assistant"] = "get_assistant"
    account_id: str = Field(min_length=1, max_length=64)
    assistant_id: str | None = None
    name: str | None = None
    version: int | None = Field(default=None, ge=1, le=_INT_MAX)

    def reply_of(self, reply: QueryReply) -> Assistant | None:
        """The assistant at the version asked for (``None``: not the account's, or none)."""
        return one(Assistant, reply)

    @model_validator(mode="after")
    def _one_key(self) -> GetAssistant:
        if (self.assistant_id is None) == (self.name is None):
            raise ValueError("give exactly one of assistant_id or name")
        return self


class ListAssistants(BusMessage):
    """The account's assistants by name, each at its latest version (archived ones with
    ``include_archived``). Data: a list of ``Assistant`` fields."""

    type: Literal["list_assistants"] = "list_assistants"
    account_id: str = Field(min_length=1, max_length=64)
    include_archived: bool = False

    def reply_of(self, reply: QueryReply) -> list[Assistant]:
        """The account's assistants."""
        return many(Assistant, reply) or []


class ListAssistantVersions(BusMessage):
    """The versions of one assistant of the account, oldest first. Data:
    ``{"assistant_id", "items": [{"version", "created_at"}]}``, or ``None``."""

    type: Literal["list_assistant_versions"] = "list_assistant_versions"
    account_id: str = Field(min_length=1, max_length=64)
    assistant_id: str

    def reply_of(self, reply: QueryReply) -> AssistantVersions | None:
        """The assistant's versions (``None``: not the account's assistant)."""
        return one(AssistantVersions, reply)
