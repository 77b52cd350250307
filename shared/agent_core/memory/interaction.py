"""The interaction a run leaves behind, as the memory pipeline reads it."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Interaction", "Turn", "TurnRole"]


class TurnRole(StrEnum):
    """Who produced a turn; only user turns and tool results are evidence for memory."""

    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class Turn(BaseModel):
    """One turn of an interaction (the replay JSONL line's ``turns`` items).

    Tool turns carry the call that produced the result (``tool_name``, ``arguments``: an object,
    or the raw string when the model sent invalid JSON) because a tool lesson is the change between
    a failed call and the call that then succeeded.
    """

    model_config = ConfigDict(extra="forbid")

    role: TurnRole
    content: str = ""
    is_error: bool = False
    tool_name: str | None = None
    arguments: dict[str, Any] | str | None = None


class Interaction(BaseModel):
    """The turns of one run plus the skills that were enabled for it."""

    model_config = ConfigDict(extra="forbid")

    turns: list[Turn] = Field(default_factory=list)
    skills: list[str] = Field(default_factory=list)

    def user_text(self) -> str:
        """All user turns joined by newlines (used for language detection)."""
        return "\n".join(t.content for t in self.turns if t.role is TurnRole.USER)
