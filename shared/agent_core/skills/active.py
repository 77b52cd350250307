"""The skills of one run: what the model is told, what is loaded, and how tools narrow.

Progressive disclosure (``docs/architecture.md``, "Skills"): the context lists only the names and
descriptions of the skills the model may load (:class:`SkillListing`); a skill's body enters the
conversation tree as a ``skill_context`` node when the model calls ``load_skill`` or the user's
message starts with ``/<name>``; the files in a skill's folder are read one at a time on request.

While skills are active (loaded in this run), the tools offered are narrowed to those their
``allowed_tools`` name — the union over the active skills that declare a list — plus
``load_skill`` itself (a skill's files are read through it). Skills without a list do not narrow.
This holds for the rest of the run; a later run starts unnarrowed (the bodies stay in its context).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agent_core.skills.model import Skill
from agent_core.skills.scan import SkillCatalog
from agent_core.types.enums import NodeType, Role
from agent_core.types.protocol import ContentBlock, TextBlock, ToolCall, ToolDefinition, ToolResult
from agent_core.types.runtime import Node, RunHandle

__all__ = [
    "LOAD_SKILL",
    "SKILL_CONTEXT_KEY",
    "RunSkills",
    "SkillListing",
    "invoked_skill",
    "loaded_skills",
    "skill_context_nodes",
]

LOAD_SKILL: Final = "load_skill"
# The tool result metadata key under which load_skill hands the loop a skill_context node.
SKILL_CONTEXT_KEY: Final = "skill_context"
_LISTING_BUDGET_CHARS: Final = 8_000  # the whole listing block; skills past it are not listed
_INVOKED = re.compile(r"^\s*/([a-z0-9][a-z0-9_\-]{0,63})(?=\s|$)")


@dataclass(frozen=True, slots=True)
class SkillListing:
    """The system block naming the skills the model may load (names and descriptions only)."""

    names: tuple[str, ...]
    text: str


def _listing(skills: Sequence[Skill]) -> SkillListing | None:
    if not skills:
        return None
    head = (
        "# Skills\n"
        "Skills hold instructions for particular kinds of task. When the task at hand fits one "
        f"of these descriptions, call {LOAD_SKILL}(name) first to read its instructions; "
        f"{LOAD_SKILL}(name, file=...) reads a file of its folder.\n"
    )
    lines, names, size = [head], [], len(head)
    for skill in skills:
        line = f"- {skill.name}: {skill.description}\n"
        if size + len(line) > _LISTING_BUDGET_CHARS:
            break
        lines.append(line)
        names.append(skill.name)
        size += len(line)
    return SkillListing(tuple(names), "".join(lines).rstrip())


def invoked_skill(blocks: Sequence[ContentBlock]) -> str | None:
    """The ``<name>`` of a message that starts with ``/<name>`` (then a space or its end)."""
    first = next((b for b in blocks if isinstance(b, TextBlock)), None)
    match = _INVOKED.match(first.text) if first is not None else None
    return match.group(1) if match else None


def loaded_skills(nodes: Iterable[Node], run_id: str | None = None) -> list[str]:
    """The skills whose ``skill_context`` nodes are on ``nodes`` (of run ``run_id`` only, if
    given), in the order they were loaded."""
    names: dict[str, None] = {}
    for node in nodes:
        if node.node_type is NodeType.SKILL_CONTEXT and (run_id is None or node.run_id == run_id):
            name = node.metadata.get("skill")
            if isinstance(name, str):
                names[name] = None
    return list(names)


def skill_context_nodes(
    results: Iterable[ToolResult],
) -> list[tuple[NodeType, list[ContentBlock], dict[str, Any]]]:
    """The system nodes (type, content, metadata) that ``load_skill`` results ask for after the
    tool node: the ``skill_context`` node, then — when the skill brought memory of its own — a
    ``memory_context`` node that supersedes the run's earlier one."""
    out: list[tuple[NodeType, list[ContentBlock], dict[str, Any]]] = []
    for result in results:
        wanted = result.metadata.get(SKILL_CONTEXT_KEY)
        if isinstance(wanted, dict) and isinstance(wanted.get("text"), str):
            meta = {k: v for k, v in wanted.items() if k not in ("text", "memory")}
            out.append((NodeType.SKILL_CONTEXT, [TextBlock(text=wanted["text"])], meta))
            memory = wanted.get("memory")
            if isinstance(memory, str) and memory.strip():
                block: list[ContentBlock] = [TextBlock(text=memory)]
                out.append((NodeType.MEMORY_CONTEXT, block, {"source": "memory"}))
    return out


def skill_text(skill: Skill, files: Sequence[str]) -> str:
    """What a ``skill_context`` node says: the skill's body and the files it may refer to."""
    parts = [f"# Skill: {skill.name}\n", skill.body or "(this skill has no instructions)"]
    if files:
        listed = "\n".join(f"- {f}" for f in files)
        parts.append(
            f"\nFiles of this skill, read on demand with "
            f'{LOAD_SKILL}(name="{skill.name}", file="<path>"):\n{listed}'
        )
    return "\n".join(parts)


def skill_metadata(skill: Skill, invoked_by: str) -> dict[str, Any]:
    """The metadata of a ``skill_context`` node (``source`` is what context reports show)."""
    return {
        "source": f"skill:{skill.name}",
        "skill": skill.name,
        "skill_source": skill.source.value,
        "invoked_by": invoked_by,
    }


class RunSkills:
    """One run's skills: the catalogue in effect, those loaded so far, the tool narrowing."""

    def __init__(
        self,
        catalog: SkillCatalog,
        loaded: Iterable[str] = (),
        *,
        render_memory: Callable[[Sequence[str]], Awaitable[str]] | None = None,
        named: Sequence[str] = (),
    ) -> None:
        self.catalog = catalog
        self.listing = _listing(catalog.listed())
        # Loaded in this run, in order (a recovered attempt rebuilds it from its path).
        self.loaded: list[str] = [n for n in loaded if catalog.get(n) is not None]
        # Memory: the text rendered for the named skills plus the loaded ones (``None``: the run
        # has no memory), and the memory text in the run's context now.
        self.render_memory = render_memory
        self.named = list(named)
        self.memory = ""

    async def memory_after_load(self) -> str:
        """The run's memory rendered again now that a skill was loaded (``""`` when it has no
        memory or nothing changed): a loaded skill counts as a named one from its load on."""
        if self.render_memory is None:
            return ""
        text = await self.render_memory(list(dict.fromkeys([*self.named, *self.loaded])))
        if not text.strip() or text == self.memory:
            return ""
        self.memory = text
        return text

    def __bool__(self) -> bool:
        return bool(self.catalog.skills)

    def activate(self, name: str) -> None:
        """Mark ``name`` loaded in this run (its ``allowed_tools`` narrow from now on)."""
        if name not in self.loaded:
            self.loaded.append(name)

    def allowed_tools(self) -> frozenset[str] | None:
        """The tools offered while the active skills narrow them; ``None``: not narrowed."""
        lists = [
            s.allowed_tools
            for s in (self.catalog.get(n) for n in self.loaded)
            if s is not None and s.allowed_tools is not None
        ]
        if not lists:
            return None
        return frozenset({LOAD_SKILL, *(t for tools in lists for t in tools)})

    def narrow(self, definitions: Sequence[ToolDefinition]) -> Sequence[ToolDefinition]:
        """``definitions`` as narrowed by the active skills."""
        allowed = self.allowed_tools()
        if allowed is None:
            return definitions
        return [d for d in definitions if d.name in allowed]

    def refusal(self, call: ToolCall) -> ToolResult | None:
        """The error result of a call the active skills do not allow; ``None`` to run it."""
        allowed = self.allowed_tools()
        if allowed is None or call.name in allowed:
            return None
        active = ", ".join(self.loaded)
        text = (
            f"{call.name!r} is not available while the skill(s) {active} are active; "
            f"the tools available now: {', '.join(sorted(allowed))}."
        )
        return ToolResult(
            tool_call_id=call.id,
            content=[TextBlock(text=text)],
            is_error=True,
            metadata={"error_code": "tool_not_allowed_by_skill"},
        )

    def node(self, skill: Skill, text: str, handle: RunHandle, parent: Node, *, by: str) -> Node:
        """A ``skill_context`` node with ``text`` for ``skill``, under ``parent``."""
        return Node.of_run(
            handle,
            parent.node_id,
            Role.SYSTEM,
            [TextBlock(text=text)],
            node_type=NodeType.SKILL_CONTEXT,
            metadata=skill_metadata(skill, by),
        )
