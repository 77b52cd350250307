"""The run-worker's side of skills: the skills a run starts with, ``/<name>`` in its message, and
the memory of the skills its session has loaded.

A main run's first attempt starts, after its message, with the ``memory_context`` node — rendered
for the skills the agent config names *and* those loaded earlier on the session's path (a loaded
skill counts as a named one) — and, when the message starts with ``/<name>``, that skill's
``skill_context`` node (whether or not the model may invoke it), or a ``system_note`` saying no
such skill is in effect. See ``docs/architecture.md``, "Skills".
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from agent_core.config import Settings
from agent_core.runqueue import QueuedRun
from agent_core.runtime.recovery import COMPACT_COMMAND
from agent_core.service import ServiceContext
from agent_core.skills import (
    RunSkills,
    SkillCatalog,
    invoked_skill,
    list_skill_files,
    loaded_skills,
    session_skills,
    skill_text,
)
from agent_core.tools import Workspace
from agent_core.types.enums import NodeType, Role
from agent_core.types.protocol import TextBlock
from agent_core.types.runtime import AgentConfig, Node, RunHandle
from services.run_worker.memory_link import memory_node, memory_text, render_memory

__all__ = ["SkillLink"]

log = logging.getLogger("soong.run_worker")


class SkillLink:
    """Skills for the runs of one worker process."""

    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx
        self.settings: Settings = ctx.settings

    def run_skills(
        self, run: QueuedRun, cwd: str, path: Sequence[Node], config: AgentConfig
    ) -> RunSkills | None:
        """The run's skills (``None`` when none is in effect): the session's catalogue, and the
        skills loaded by this run so far (a recovered attempt finds them on its path)."""
        # Inline: a few stat calls per folder; files are parsed again only when they changed.
        catalog = self.catalog(run, cwd, config)
        if not catalog.skills:
            return None
        renderer = None
        if self.settings.memory.enabled and run.kind == "main":

            async def renderer(skills: Sequence[str]) -> str:
                return await render_memory(self.ctx, run.account_id, skills)

        named = [str(s) for s in run.config_overrides.get("enabled_skills") or []]
        return RunSkills(
            catalog, loaded_skills(path, run.run_id), render_memory=renderer, named=named
        )

    def catalog(self, run: QueuedRun, cwd: str, config: AgentConfig) -> SkillCatalog:
        """The session's catalogue for ``config`` (what memory's hand-off reads the skills'
        descriptions and tools from)."""
        root = Workspace(self.settings.home, run.account_id, run.session_id).root
        return session_skills(
            self.settings,
            account_id=run.account_id,
            cwd=cwd,
            workspace_root=root,
            enabled=config.enabled_skills,
        )

    def child_skills(self, run: QueuedRun, cwd: str, config: AgentConfig) -> RunSkills | None:
        """A child run's skills (a worker's or a fork's; ``None`` when none is in effect): the
        session's catalogue for the child's own config, nothing loaded yet (child runs are never
        recovered), and no memory of their own (memory belongs to main runs)."""
        catalog = self.catalog(run, cwd, config)
        return RunSkills(catalog) if catalog.skills else None

    async def first_nodes(
        self,
        run: QueuedRun,
        handle: RunHandle,
        path: Sequence[Node],
        skills: RunSkills | None,
        memory: str,
    ) -> list[Node]:
        """The nodes a main run's first attempt puts after its message (see the module
        docstring); ``memory`` is what was rendered at the claim for the configured skills."""
        named = list(run.config_overrides.get("enabled_skills") or [])
        invoked = invoked_skill(path[-1].content) if path[-1].role is Role.USER else None
        if invoked == COMPACT_COMMAND[1:]:  # the built-in command, never a skill
            invoked = None
        skill = skills.catalog.get(invoked) if skills is not None and invoked else None
        now = [skill.name] if skill is not None else []
        extra = [s for s in [*loaded_skills(path), *now] if s not in named]
        if extra and self.settings.memory.enabled:
            memory = await memory_text(self.ctx, run, handle.attempt, [*named, *extra])
        nodes: list[Node] = []
        parent = path[-1]
        if skills is not None:
            skills.memory = memory  # a skill loaded later renders it again only if it changes
        note = memory_node(memory, handle, parent)
        if note is not None:
            nodes.append(note)
            parent = note
        if invoked is None:
            return nodes
        if skill is None or skills is None:
            nodes.append(_no_such_skill(invoked, skills, handle, parent))
            return nodes
        skills.activate(skill.name)
        text = skill_text(skill, list_skill_files(skill.folder))
        nodes.append(skills.node(skill, text, handle, parent, by="user"))
        return nodes


def _no_such_skill(name: str, skills: RunSkills | None, handle: RunHandle, parent: Node) -> Node:
    known = ", ".join(skills.catalog.skills) if skills is not None else ""
    text = (
        f"The user's message starts with /{name}, but no skill called {name!r} is in effect in "
        f"this session ({'skills: ' + known if known else 'it has no skills'}). If the user meant "
        "a skill, say so; otherwise answer the message as written."
    )
    return Node.of_run(
        handle,
        parent.node_id,
        Role.SYSTEM,
        [TextBlock(text=text)],
        node_type=NodeType.SYSTEM_NOTE,
        metadata={"source": "skills"},
    )
