"""Which tool definitions go with a request when they would not all fit a small window.

Twenty definitions are about 3,200 tokens: nothing in a 128k window, more than a 2,048-token
window's whole input budget. When the definitions would take more than ``tool_share`` of the
input budget (:class:`~agent_core.types.runtime.ContextPolicy`), the request carries a subset
that fits that share, chosen in this order (a tool the agent's ``tool_choice`` forces is always
sent, before all of them):

1. the tools the conversation has already called (a task under way keeps its tools);
2. the tools the agent's config lists in ``small_window_tools``, in that order;
3. the others by relevance to the newest user message: how many of its words appear in the tool's
   name and description (ties keep the registry's order).

A tool left out is still enabled: the executor runs it if the model calls it anyway (a model may
know it from earlier in the conversation); it is only not described in this request. The report
names what was left out (``ContextBuildReport.tools_left_out``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from agent_core.types.enums import Role
from agent_core.types.protocol import TextBlock, ToolCallBlock, ToolDefinition
from agent_core.types.runtime import Node

__all__ = ["choose_tools"]

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if len(w) > 2}


def _called(path: Sequence[Node]) -> list[str]:
    """Tool names called on the path, the most recent first."""
    seen: list[str] = []
    for node in reversed(path):
        for block in node.content:
            if isinstance(block, ToolCallBlock) and block.name not in seen:
                seen.append(block.name)
    return seen


def _newest_user_text(path: Sequence[Node]) -> str:
    for node in reversed(path):
        if node.role is Role.USER:
            return " ".join(b.text for b in node.content if isinstance(b, TextBlock))
    return ""


def choose_tools(
    tools: Sequence[ToolDefinition],
    path: Sequence[Node],
    *,
    room: int,
    cost: Callable[[ToolDefinition], int],
    preferred: Sequence[str] = (),
    forced: Sequence[str] = (),
) -> tuple[list[ToolDefinition], list[str]]:
    """The definitions to send within ``room`` tokens (each costing ``cost(tool)``), in the
    registry's order, and the names left out (see the module docstring). Everything when it all
    fits. The ``forced`` tools (the agent's ``tool_choice``) are always sent, first in line for
    the room."""
    if sum(cost(t) for t in tools) <= room:
        return list(tools), []
    by_name = {t.name: t for t in tools}
    asked = _words(_newest_user_text(path))

    def relevance(tool: ToolDefinition) -> int:
        return len(asked & _words(f"{tool.name.replace('_', ' ')} {tool.description}"))

    chosen = {n for n in forced if n in by_name}
    used = sum(cost(by_name[n]) for n in chosen)
    order = [by_name[n] for n in _called(path) if n in by_name and n not in chosen]
    order += [by_name[n] for n in preferred if n in by_name and by_name[n] not in order]
    rest = [t for t in tools if t not in order]
    order += sorted(rest, key=relevance, reverse=True)  # stable: ties keep the registry order
    for tool in order:
        if tool.name in chosen:
            continue
        if used + cost(tool) <= room:
            chosen.add(tool.name)
            used += cost(tool)
    kept = [t for t in tools if t.name in chosen]
    return kept, [t.name for t in tools if t.name not in chosen]
