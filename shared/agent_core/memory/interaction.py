"""The interaction a run leaves behind, as the memory pipeline reads it.

Two shapes of tool turn are read (issue 37): the replay format's own, where the tool turn carries
the call that produced it (``tool_name``, ``arguments``), and the transcript shape, where an
assistant turn carries ``tool_calls`` (``id``, ``name``, ``arguments``) and the tool turn answering
one carries its ``tool_call_id``. Transcript calls are paired to their results when the
interaction is read, so the tool turn holds its call either way. Skills are names, or objects
with a ``name`` and a ``description``; the descriptions are kept by name in ``skill_info``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["Interaction", "SkillInfo", "ToolCall", "Turn", "TurnRole"]


class TurnRole(StrEnum):
    """Who produced a turn; only user turns and tool results are evidence for memory."""

    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class ToolCall(BaseModel):
    """One call an assistant turn made (transcript shape): its id, the tool and the arguments."""

    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    name: str
    arguments: dict[str, Any] | str | None = None


class SkillInfo(BaseModel):
    """An enabled skill's metadata: its name and what it does (the words that scope a rule)."""

    model_config = ConfigDict(extra="ignore")

    name: str
    description: str = ""
    # The tools the skill brings or is allowed to call (the run-worker knows them; a transcript
    # may not): a lesson about one of them belongs to this skill.
    tools: list[str] = Field(default_factory=list)


class Turn(BaseModel):
    """One turn of an interaction (the replay JSONL line's ``turns`` items).

    Tool turns carry the call that produced the result (``tool_name``, ``arguments``: an object,
    or the raw string when the model sent invalid JSON) because a tool lesson is the change between
    a failed call and the call that then succeeded. In the transcript shape the arguments are on
    the assistant turn's ``tool_calls`` and the tool turn names its call by ``tool_call_id``.
    """

    model_config = ConfigDict(extra="forbid")

    role: TurnRole
    content: str = ""
    is_error: bool = False
    tool_name: str | None = None
    arguments: dict[str, Any] | str | None = None
    tool_call_id: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)


def _pair_calls(turns: list[Turn]) -> list[Turn]:
    """Tool turns with the transcript call that produced them (by id, else the open call of
    the same name); turns that already carry their call are left as they are."""
    open_calls: list[ToolCall] = []
    paired: list[Turn] = []
    for turn in turns:
        if turn.role is TurnRole.ASSISTANT and turn.tool_calls:
            open_calls.extend(turn.tool_calls)
        if turn.role is TurnRole.TOOL and turn.arguments is None and open_calls:
            call = next((c for c in open_calls if c.id and c.id == turn.tool_call_id), None)
            if call is None and turn.tool_call_id is None:
                name = turn.tool_name
                call = next((c for c in open_calls if name is None or c.name == name), None)
            if call is not None:
                open_calls.remove(call)
                turn = turn.model_copy(
                    update={"tool_name": turn.tool_name or call.name, "arguments": call.arguments}
                )
        paired.append(turn)
    return paired


class Interaction(BaseModel):
    """The turns of one run plus the skills that were enabled for it (names; the metadata of
    those given as objects is in ``skill_info``)."""

    model_config = ConfigDict(extra="forbid")

    turns: list[Turn] = Field(default_factory=list)
    skills: list[str] = Field(default_factory=list)
    skill_info: list[SkillInfo] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _skill_objects(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("skills"), list):
            return data
        names: list[str] = []
        info = list(data.get("skill_info") or [])
        for skill in data["skills"]:
            if isinstance(skill, dict) and isinstance(skill.get("name"), str):
                names.append(skill["name"])
                info.append(
                    {
                        "name": skill["name"],
                        "description": skill.get("description", ""),
                        "tools": skill.get("tools") or [],
                    }
                )
            else:
                names.append(skill)
        return {**data, "skills": names, "skill_info": info}

    @model_validator(mode="after")
    def _paired(self) -> Interaction:
        if any(t.tool_calls for t in self.turns):
            self.turns = _pair_calls(self.turns)
        return self

    def user_text(self) -> str:
        """All user turns joined by newlines (used for language detection)."""
        return "\n".join(t.content for t in self.turns if t.role is TurnRole.USER)

    def descriptions(self) -> dict[str, str]:
        """Each enabled skill's description by name ('' when it came without one)."""
        known = {s.name: s.description for s in self.skill_info}
        return {name: known.get(name, "") for name in self.skills}

    def tool_owners(self) -> dict[str, str]:
        """The enabled skill that owns each tool, by tool name (empty when no skill came with
        its tools; the first enabled skill listing a tool owns it)."""
        enabled = set(self.skills)
        owners: dict[str, str] = {}
        for info in self.skill_info:
            if info.name in enabled:
                for tool in info.tools:
                    owners.setdefault(tool, info.name)
        return owners
