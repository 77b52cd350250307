"""The run-worker's side of memory: the text injected at run start, the interaction handed off.

Every main run that ends hands its interaction off — completed, failed or cancelled: corrections
and tool lessons happen in the runs that went wrong. Tool turns carry the call's arguments.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from agent_core.bus.contracts.memory import (
    Interaction,
    InteractionSkill,
    InteractionTurn,
    MemoryReply,
    RenderMemory,
)
from agent_core.errors import redact, redact_obj
from agent_core.ids import new_id
from agent_core.memory.client import RenderedMemory, publish_interaction
from agent_core.memory.signals import MAX_TURN_CHARS
from agent_core.runqueue import InFlight, QueuedRun
from agent_core.service import ServiceContext
from agent_core.skills import LOAD_SKILL, SkillCatalog, loaded_skills
from agent_core.types.enums import NodeType, Role
from agent_core.types.protocol import TextBlock, ToolCallBlock, ToolResultBlock
from agent_core.types.runtime import Node, RunEnd, RunHandle
from services.run_worker.reads import RunReads

__all__ = ["hand_off", "memory_node", "memory_text", "render_memory", "skill_ownership"]

log = logging.getLogger("soong.run_worker")

_RENDER_TIMEOUT_S = 2.0
_CACHED_RENDERS = 256  # (account, skills) pairs kept per worker

# Rendered memory per service context: (account, skills) → (rendered at, text). A worker starts
# runs of the same few accounts over and over; rendering for each was a request/reply per turn.
_renders: weakref.WeakKeyDictionary[
    ServiceContext, dict[tuple[str, tuple[str, ...]], tuple[float, str]]
]
_renders = weakref.WeakKeyDictionary()


async def memory_text(
    ctx: ServiceContext, run: QueuedRun, attempt: int, skills: Sequence[str] | None = None
) -> str:
    """The rendered memory for a main run's first attempt ('' when none or unavailable), for
    ``skills`` (default: those the run's agent config names)."""
    if not ctx.settings.memory.enabled or run.kind != "main" or attempt != 1:
        return ""
    if skills is None:
        skills = run.config_overrides.get("enabled_skills") or []
    return await render_memory(ctx, run.account_id, skills)


async def render_memory(ctx: ServiceContext, account_id: str, skills: Sequence[str]) -> str:
    """The memory text of ``account_id`` for ``skills`` ('' when none or unavailable); a text
    rendered less than ``memory.render_cache_s`` ago is reused (a failed render is not kept)."""
    ttl = ctx.settings.memory.render_cache_s
    key = (account_id, tuple(skills))
    cache = _renders.setdefault(ctx, {})
    held = cache.get(key)
    now = time.monotonic()
    if held is not None and now - held[0] < ttl:
        return held[1]
    text = await _render(ctx, account_id, skills)
    if text is not None and ttl > 0:
        if len(cache) >= _CACHED_RENDERS:
            cache.clear()  # bounded; refilled within one TTL
        cache[key] = (now, text)
    return text or ""


async def _render(ctx: ServiceContext, account_id: str, skills: Sequence[str]) -> str | None:
    """The memory text, ``None`` when memory did not answer as it should."""
    try:
        reply = await ctx.rpc.request(
            RenderMemory(account_id=account_id, skills=list(skills)),
            stream=ctx.names.memory_queries,
            reply=MemoryReply,
            timeout_s=_RENDER_TIMEOUT_S,
        )
    except Exception as exc:  # memory is an aid: a run never waits long on it or fails for it
        log.warning("memory unavailable for %s: %s", account_id, type(exc).__name__)
        return None
    if not reply.ok:
        return None
    try:
        return RenderedMemory.model_validate(reply.data).text
    except ValueError:
        log.warning("memory render for %s answered an unexpected shape", account_id)
        return None


def memory_node(text: str, handle: RunHandle, parent: Node) -> Node | None:
    """The ``memory_context`` node that carries ``text`` (``None`` when there is none)."""
    if not text.strip():
        return None
    return Node.of_run(
        handle,
        parent.node_id,
        Role.SYSTEM,
        [TextBlock(text=text)],
        node_type=NodeType.MEMORY_CONTEXT,
        metadata={"source": "memory"},
    )


async def hand_off(
    ctx: ServiceContext,
    reads: RunReads,
    item: InFlight,
    end: RunEnd,
    path: Sequence[Node] = (),
    catalog: Callable[[], SkillCatalog | None] = lambda: None,
) -> None:
    """Publish the finished interaction to memory-extraction (redacted); never fails the run.

    ``path`` is the path the run ended on when the worker holds it (the loop's nodes); without it
    the path is read from storage. ``catalog`` reads the session's skills (called only when the
    run has a skill: reading means a few stat calls per skill folder): each skill of the run is
    then sent with its description and the tools it owns, so a tool lesson is scoped to the
    skill whose tool failed (when it returns ``None``, names only).
    """
    try:
        if not path or path[-1].node_id != end.last_node_id:
            tip = end.last_node_id or item.run.start_node_id
            path = await reads.path(item.run.session_id, tip)
        own = [n for n in path if n.run_id == item.run.run_id]
        calls = {b.id: b for n in own for b in n.content if isinstance(b, ToolCallBlock)}
        # Skills loaded on the path count as named ones: a lesson may belong to them.
        named = item.run.config_overrides.get("enabled_skills") or []
        skills = list(dict.fromkeys([*map(str, named), *loaded_skills(path)]))
        message = Interaction(
            interaction_id=new_id("evt"),
            account_id=item.run.account_id,
            session_id=item.run.session_id,
            run_id=item.run.run_id,
            turns=[t for n in own for t in _turns(n, calls)],
            skills=skill_ownership(skills, catalog() if skills else None),
            status=end.status.value,
        )
        await publish_interaction(ctx.bus, ctx.names, message)
    except Exception as exc:
        log.warning("memory hand-off of %s failed: %s", item.run.run_id, redact(str(exc)))


def skill_ownership(
    names: Sequence[str], catalog: SkillCatalog | None
) -> list[str | InteractionSkill]:
    """The run's skills as memory reads them: with the catalogue, each known skill as an object
    with its description and the tools its ``allowed_tools`` name (the skill-loading tool left
    out: every skill lists it); a name the catalogue lacks stays a name."""
    out: list[str | InteractionSkill] = []
    for name in names:
        skill = catalog.get(name) if catalog is not None else None
        if skill is None:
            out.append(name)
            continue
        tools = [t for t in skill.allowed_tools or () if t != LOAD_SKILL]
        out.append(InteractionSkill(name=name, description=skill.description, tools=tools))
    return out


def _turns(node: Node, calls: dict[str, ToolCallBlock]) -> list[InteractionTurn]:
    """The memory view of one node: plain text, tool results with the call that made them.
    Notes the runtime wrote as the user (a cut answer's request to continue) are not the
    user's words."""
    if node.node_type is NodeType.SYSTEM_NOTE:
        return []
    if node.role is Role.USER or node.role is Role.ASSISTANT:
        text = "".join(b.text for b in node.content if isinstance(b, TextBlock))
        text = text[:MAX_TURN_CHARS]  # what memory reads of a turn; the bus message stays small
        return [InteractionTurn(role=node.role.value, content=redact(text))] if text else []
    if node.role is not Role.TOOL:
        return []
    turns = []
    for block in node.content:
        if not isinstance(block, ToolResultBlock):
            continue
        call = calls.get(block.tool_call_id)
        text = "".join(c.text for c in block.content if isinstance(c, TextBlock))
        turns.append(
            InteractionTurn(
                role="tool",
                content=redact(text[:2000]),
                is_error=block.is_error,
                tool_name=call.name if call else None,
                arguments=_arguments(call),
            )
        )
    return turns


def _arguments(call: ToolCallBlock | None) -> dict[str, Any] | str | None:
    """A call's arguments as memory reads them: the raw text of one whose arguments were not
    JSON (the tool lesson is the change from it to the fixed call), else the object."""
    if call is None:
        return None
    if call.raw_arguments is not None:
        return redact(call.raw_arguments)
    arguments: dict[str, Any] = redact_obj(call.arguments)
    return arguments
