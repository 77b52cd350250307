"""``load_skill``: the model brings a skill's instructions into the run, or reads one of its files.

Read-only (``repeatable``): it reads skill folders and asks the loop, through its result's
metadata, for a ``skill_context`` node with the body after the tool node (and, when the run has
memory and the skill brings some, a new ``memory_context`` node rendered with it). A skill whose
``model_invocable`` is off is refused — only the user can invoke it (``/<name>``) — though once
the user did, its files may be read. Loading a skill already loaded in this run adds nothing.
"""

from __future__ import annotations

import asyncio

from pydantic import Field

from agent_core.errors import ToolError
from agent_core.skills.active import (
    LOAD_SKILL,
    SKILL_CONTEXT_KEY,
    RunSkills,
    skill_metadata,
    skill_text,
)
from agent_core.skills.files import list_skill_files, read_skill_file
from agent_core.skills.model import Skill
from agent_core.tools.base import Tool, ToolArgs, ToolContext, ToolOutput

__all__ = ["LoadSkillArgs", "LoadSkillTool"]


class LoadSkillArgs(ToolArgs):
    """Arguments of ``load_skill``."""

    name: str = Field(max_length=64, description="the skill's name, as listed under # Skills")
    file: str | None = Field(
        default=None,
        max_length=512,
        description="a file of the skill's folder to read (e.g. 'reference.md'); "
        "omit to load the skill's instructions",
    )


class LoadSkillTool(Tool[LoadSkillArgs]):
    """Loads a skill's instructions, or reads a file of its folder."""

    name = LOAD_SKILL
    description = (
        "Load a skill listed under # Skills: its instructions join your context. "
        "With file=..., read one of the skill's own files instead."
    )
    input_model = LoadSkillArgs
    repeatable = True  # read-only
    timeout_s = 10.0

    def __init__(self, skills: RunSkills) -> None:
        self.skills = skills

    async def run(self, args: LoadSkillArgs, ctx: ToolContext) -> ToolOutput:
        """Load the skill (a ``skill_context`` node follows the result) or read its file."""
        skill = self._skill(args.name, reading=args.file is not None)
        if args.file is not None:
            text = await asyncio.to_thread(read_skill_file, skill.folder, args.file)
            return ToolOutput(text, metadata={"skill": skill.name, "file": args.file})
        if skill.name in self.skills.loaded:
            return ToolOutput(
                f"The skill {skill.name!r} is loaded already; its instructions are in your "
                "context.",
                metadata={"skill": skill.name},
            )
        files = await asyncio.to_thread(list_skill_files, skill.folder)
        self.skills.activate(skill.name)
        context = {"text": skill_text(skill, files), **skill_metadata(skill, "model")}
        memory = await self.skills.memory_after_load()
        if memory:  # the skill's own memory, from now on (a new memory_context node)
            context["memory"] = memory
        return ToolOutput(
            f"Loaded the skill {skill.name!r}: its instructions are now in your context; "
            "follow them.",
            metadata={"skill": skill.name, SKILL_CONTEXT_KEY: context},
        )

    def _skill(self, name: str, *, reading: bool) -> Skill:
        skill = self.skills.catalog.get(name)
        if skill is None:
            known = ", ".join(s.name for s in self.skills.catalog.listed()) or "none"
            raise ToolError("unknown_skill", f"there is no skill {name!r} (skills: {known})")
        if not skill.model_invocable and not (reading and name in self.skills.loaded):
            raise ToolError(
                "skill_not_model_invocable",
                f"the skill {name!r} can only be invoked by the user (a message starting with "
                f"/{name})",
            )
        return skill
