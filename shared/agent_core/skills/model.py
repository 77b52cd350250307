"""What a skill is once scanned, what went wrong with one that could not be, and the API's view.

A :class:`Skill` is one ``SKILL.md`` whose frontmatter passed every check; a :class:`SkillProblem`
is one that did not (or one hidden by a skill of the same name from a folder that wins), with the
file and the reason. Scanning never raises for a skill's own fault: a broken skill is a problem in
the list and every other skill is unaffected (``docs/architecture.md``, "Skills").
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "MAX_DESCRIPTION_CHARS",
    "SKILL_NAME",
    "Skill",
    "SkillList",
    "SkillProblem",
    "SkillProblemCode",
    "SkillSource",
    "SkillView",
    "valid_skill_name",
]

# Lowercase letters, digits, ``-`` and ``_``: a folder name that cannot be ``..``, hold a ``/`` or
# differ only in case, and the memory scope ``skill:<name>`` accepts it as it is.
SKILL_NAME: Final = r"^[a-z0-9][a-z0-9_\-]{0,63}$"
_SKILL_NAME = re.compile(SKILL_NAME)
MAX_DESCRIPTION_CHARS: Final = 1024


def valid_skill_name(name: object) -> bool:
    """Whether ``name`` may name a skill (and its folder)."""
    return isinstance(name, str) and _SKILL_NAME.fullmatch(name) is not None


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SkillSource(StrEnum):
    """Where a skill was found; earlier members win a name collision."""

    OPERATOR = "operator"  # a folder of ``[skills] dirs`` in config.toml
    USER = "user"  # <home>/accounts/<account>/skills/
    PROJECT = "project"  # <project>/.soong-agent/skills/


class SkillProblemCode(StrEnum):
    """Why a ``SKILL.md`` was skipped."""

    UNREADABLE = "unreadable"  # not a regular file, a link, not UTF-8, an OS error
    TOO_LARGE = "too_large"  # the file or its frontmatter is over its bound
    NO_FRONTMATTER = "no_frontmatter"  # does not start with a ``---`` block
    INVALID_YAML = "invalid_yaml"  # the frontmatter is not YAML, or not a mapping
    MISSING_FIELD = "missing_field"  # ``name`` or ``description`` is absent or empty
    INVALID_FIELD = "invalid_field"  # a field has the wrong type or shape
    INVALID_NAME = "invalid_name"  # the folder's name (or the ``name`` field) is no skill name
    NAME_MISMATCH = "name_mismatch"  # ``name`` differs from the folder's name
    SHADOWED = "shadowed"  # a skill of the same name from a folder that wins is in effect
    TOO_MANY = "too_many"  # past the number of skills one folder may hold


class Skill(_Strict):
    """One usable skill: its frontmatter and body, and the folder its referenced files are in."""

    name: str
    description: str
    source: SkillSource
    folder: Path
    model_invocable: bool = True
    # ``None``: the skill does not narrow the tools; a list: the tools offered while it is active.
    allowed_tools: tuple[str, ...] | None = None
    body: str = ""

    def view(self) -> SkillView:
        """The skill as the API shows it (no body, no server path)."""
        return SkillView(
            name=self.name,
            description=self.description,
            source=self.source,
            model_invocable=self.model_invocable,
            allowed_tools=list(self.allowed_tools) if self.allowed_tools is not None else None,
        )


class SkillProblem(_Strict):
    """A ``SKILL.md`` that was skipped, and why (the rest of the skills are unaffected)."""

    source: SkillSource
    path: str = Field(
        description="the file, relative to its skill folder's root (`<name>/SKILL.md`)"
    )
    code: SkillProblemCode
    reason: str = Field(description="what is wrong, for the person who wrote the file")
    name: str | None = Field(default=None, description="the skill's name, when it is known")


class SkillView(_Strict):
    """A skill in effect for a session, as listed by ``GET /v1/sessions/{id}/skills``."""

    name: str
    description: str
    source: SkillSource
    model_invocable: bool
    allowed_tools: list[str] | None = None


class SkillList(_Strict):
    """The skills in effect for a session (in precedence order) and the skipped ones' problems."""

    items: list[SkillView]
    problems: list[SkillProblem]
