"""Contracts of the memory streams (run-workers → memory-extraction; gateway/worker ↔ memory).

The memory-extraction service is not an agent: interactions name the run they came from only as
provenance for the change log.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from agent_core.bus.contracts._base import BusMessage
from agent_core.errors import ErrorPayload

__all__ = [
    "MEMORY_INTERACTION",
    "MEMORY_QUERY",
    "Interaction",
    "InteractionSkill",
    "InteractionToolCall",
    "InteractionTurn",
    "ListMemory",
    "MemoryHistory",
    "MemoryInteractionMessage",
    "MemoryQuery",
    "MemoryReply",
    "ReadMemory",
    "RenderMemory",
    "RestoreMemory",
    "WriteMemory",
]


class InteractionToolCall(BusMessage):
    """A call an assistant turn made, in the transcript shape (its result names it by ``id``)."""

    id: str | None = None
    name: str
    arguments: dict[str, Any] | str | None = None


class InteractionSkill(BusMessage):
    """An enabled skill with its description (the words that tie a rule to it) and the tools it
    owns (those it brings or is allowed to call): a tool lesson about one of them is scoped to
    the skill even when its description does not name the tool."""

    name: str
    description: str = ""
    tools: list[str] = Field(default_factory=list)


class InteractionTurn(BusMessage):
    """One turn of a finished interaction (already redacted by the worker).

    Tool turns carry the call that produced the result (``tool_name``, ``arguments``: an object,
    or the raw string when the model sent invalid JSON): a tool lesson is the change between a
    failed call and the call that then succeeded. A transcript may instead put the calls on the
    assistant turn (``tool_calls``) and name the call on the tool turn (``tool_call_id``); memory
    pairs them.
    """

    role: Literal["user", "assistant", "tool"]
    content: str
    is_error: bool = False
    tool_name: str | None = None
    arguments: dict[str, Any] | str | None = None
    tool_call_id: str | None = None
    tool_calls: list[InteractionToolCall] | None = None


class Interaction(BusMessage):
    """What a main run hands to memory-extraction when it ends (completed, failed or cancelled).

    ``status`` is the run's final status, provenance only: every ending is learned from.
    ``skills`` are names, or objects with the skill's description.
    """

    type: Literal["interaction"] = "interaction"
    interaction_id: str
    account_id: str
    session_id: str
    run_id: str
    turns: list[InteractionTurn]
    skills: list[str | InteractionSkill] = Field(default_factory=list)
    status: str | None = None


MemoryInteractionMessage = Annotated[Interaction, Field(discriminator="type")]
MEMORY_INTERACTION: TypeAdapter[MemoryInteractionMessage] = TypeAdapter(MemoryInteractionMessage)


class RenderMemory(BusMessage):
    """The memory text to inject at run start (user.md + the run's enabled skills)."""

    type: Literal["render_memory"] = "render_memory"
    account_id: str
    skills: list[str] = Field(default_factory=list)


class ReadMemory(BusMessage):
    """One memory file (``scope`` is ``user`` or ``skill:<name>``) with its ETag."""

    type: Literal["read_memory"] = "read_memory"
    account_id: str
    scope: str


class WriteMemory(BusMessage):
    """Replace one memory file if its ETag still equals ``if_match``."""

    type: Literal["write_memory"] = "write_memory"
    account_id: str
    scope: str
    content: str
    if_match: str | None = None


class ListMemory(BusMessage):
    """The memory files of an account (``user`` and every skill file)."""

    type: Literal["list_memory"] = "list_memory"
    account_id: str


class MemoryHistory(BusMessage):
    """The versions of one file, newest first, with the changes that made each (change log)."""

    type: Literal["memory_history"] = "memory_history"
    account_id: str
    scope: str
    limit: int = Field(default=50, ge=1, le=500)


class RestoreMemory(BusMessage):
    """Write an earlier version of a file back, if its current ETag still equals ``if_match``."""

    type: Literal["restore_memory"] = "restore_memory"
    account_id: str
    scope: str
    version: str
    if_match: str | None = None


MemoryQuery = Annotated[
    RenderMemory | ReadMemory | WriteMemory | ListMemory | MemoryHistory | RestoreMemory,
    Field(discriminator="type"),
]
MEMORY_QUERY: TypeAdapter[MemoryQuery] = TypeAdapter(MemoryQuery)


class MemoryReply(BusMessage):
    """The answer of memory-extraction."""

    type: Literal["memory_reply"] = "memory_reply"
    ok: bool
    data: Any = None
    error: ErrorPayload | None = None
