"""Parsing one ``SKILL.md``: a YAML frontmatter block (``safe_load``), then the Markdown body.

Fields (unknown ones are ignored: the format is shared with other agent tools):

* ``name`` — required, the skill folder's name (``[a-z0-9][a-z0-9_-]{0,63}``);
* ``description`` — required, non-empty, at most 1,024 characters: what the model reads to
  decide whether the skill fits a task;
* ``allowed_tools`` — optional list of tool names (also spelled ``allowed-tools``, and a
  comma- or space-separated string is accepted): the tools offered while the skill is active;
* ``model_invocable`` — optional boolean, default ``true``; ``false`` keeps the skill out of the
  model's listing and ``load_skill`` (``/name`` in a user message still works). The well-known
  ``disable-model-invocation: true`` means the same.

Every check failing is one :class:`SkillProblem` with the reason; nothing here raises.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final

import yaml

from agent_core.skills.model import (
    MAX_DESCRIPTION_CHARS,
    Skill,
    SkillProblem,
    SkillProblemCode,
    SkillSource,
    valid_skill_name,
)

__all__ = ["MAX_FRONTMATTER_BYTES", "parse_skill"]

# The frontmatter is parsed whole: bounded before YAML sees it (aliases, nesting, size).
MAX_FRONTMATTER_BYTES: Final = 8 * 1024
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")
_MAX_TOOLS: Final = 64
# ``safe_load``'s loader, in C when libyaml is there (the same safe constructors, ~10× faster).
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_FENCE = re.compile(r"^---[ \t]*\r?$", re.MULTILINE)


class _Invalid(Exception):
    def __init__(self, code: SkillProblemCode, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def parse_skill(text: str, *, folder: Path, source: SkillSource) -> Skill | SkillProblem:
    """The skill ``text`` (the content of ``folder/SKILL.md``) defines, or why it defines none."""
    where = f"{folder.name}/SKILL.md"
    try:
        meta, body = _split(text)
        skill = _skill(meta, body, folder=folder, source=source)
    except _Invalid as bad:
        name = folder.name if valid_skill_name(folder.name) else None
        return SkillProblem(source=source, path=where, code=bad.code, reason=bad.reason, name=name)
    return skill


def _split(text: str) -> tuple[dict[str, Any], str]:
    """The frontmatter as a mapping and the body after it."""
    text = text.removeprefix("\ufeff")
    first, _, rest = text.partition("\n")
    if first.rstrip("\r").rstrip() != "---":
        raise _Invalid(
            SkillProblemCode.NO_FRONTMATTER,
            "the file must start with a YAML frontmatter block between two '---' lines",
        )
    end = _FENCE.search(rest)
    if end is None:
        raise _Invalid(SkillProblemCode.NO_FRONTMATTER, "the frontmatter has no closing '---' line")
    raw, body = rest[: end.start()], rest[end.end() :].lstrip("\r\n")
    if len(raw.encode()) > MAX_FRONTMATTER_BYTES:
        raise _Invalid(
            SkillProblemCode.TOO_LARGE,
            f"the frontmatter is over {MAX_FRONTMATTER_BYTES} bytes",
        )
    try:
        meta = yaml.load(raw, Loader=_SAFE_LOADER)  # the safe loader (safe_load), in C
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 2})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise _Invalid(
            SkillProblemCode.INVALID_YAML, f"the frontmatter is not valid YAML{at}: {problem}"
        ) from None
    if not isinstance(meta, dict):
        raise _Invalid(SkillProblemCode.INVALID_YAML, "the frontmatter must be a mapping of fields")
    return meta, body


def _skill(meta: dict[str, Any], body: str, *, folder: Path, source: SkillSource) -> Skill:
    name = _required_text(meta, "name")
    if not valid_skill_name(name):
        raise _Invalid(
            SkillProblemCode.INVALID_NAME,
            f"name {name[:80]!r} is not a skill name (lowercase letters, digits, '-' and '_', "
            "at most 64 characters)",
        )
    if name != folder.name:
        raise _Invalid(
            SkillProblemCode.NAME_MISMATCH,
            f"name {name!r} differs from its folder's name {folder.name!r}",
        )
    description = _required_text(meta, "description")
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise _Invalid(
            SkillProblemCode.INVALID_FIELD,
            f"description is {len(description)} characters; at most {MAX_DESCRIPTION_CHARS}",
        )
    return Skill(
        name=name,
        description=" ".join(description.split()),
        source=source,
        folder=folder,
        model_invocable=_model_invocable(meta),
        allowed_tools=_allowed_tools(meta),
        body=body.strip(),
    )


def _required_text(meta: dict[str, Any], key: str) -> str:
    value = meta.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise _Invalid(SkillProblemCode.MISSING_FIELD, f"the frontmatter has no {key!r}")
    if not isinstance(value, str):
        raise _Invalid(
            SkillProblemCode.INVALID_FIELD,
            f"{key!r} must be text, not {type(value).__name__}",
        )
    return value.strip()


def _model_invocable(meta: dict[str, Any]) -> bool:
    invocable = meta.get("model_invocable")
    disabled = meta.get("disable-model-invocation", meta.get("disable_model_invocation"))
    for key, value in (("model_invocable", invocable), ("disable-model-invocation", disabled)):
        if value is not None and not isinstance(value, bool):
            raise _Invalid(
                SkillProblemCode.INVALID_FIELD,
                f"{key!r} must be true or false, not {type(value).__name__}",
            )
    if invocable is not None and disabled is not None and invocable == disabled:
        raise _Invalid(
            SkillProblemCode.INVALID_FIELD,
            "'model_invocable' and 'disable-model-invocation' contradict each other",
        )
    if invocable is not None:
        return bool(invocable)
    return not disabled


def _allowed_tools(meta: dict[str, Any]) -> tuple[str, ...] | None:
    spellings = [k for k in ("allowed_tools", "allowed-tools") if k in meta]
    if len(spellings) > 1:
        raise _Invalid(
            SkillProblemCode.INVALID_FIELD, "give 'allowed_tools' or 'allowed-tools', not both"
        )
    if not spellings or meta[spellings[0]] is None:
        return None
    value = meta[spellings[0]]
    if isinstance(value, str):
        value = [t for t in re.split(r"[,\s]+", value) if t]
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise _Invalid(
            SkillProblemCode.INVALID_FIELD, f"{spellings[0]!r} must be a list of tool names"
        )
    if len(value) > _MAX_TOOLS:
        raise _Invalid(
            SkillProblemCode.INVALID_FIELD, f"{spellings[0]!r} names over {_MAX_TOOLS} tools"
        )
    bad = next((t for t in value if not _TOOL_NAME.fullmatch(t)), None)
    if bad is not None:
        raise _Invalid(
            SkillProblemCode.INVALID_FIELD, f"{spellings[0]!r}: {bad[:80]!r} is not a tool name"
        )
    return tuple(dict.fromkeys(value))
