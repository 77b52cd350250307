"""Where a conversation can go on: the rule a new message's parent and a switched-to node keep.

A user message goes under a node only if the request the model then gets is one every provider
takes: the path's conversation (system nodes aside) ends with an answer (an assistant turn
without tool calls), with a turn whose tool calls all have their results, or with nothing (a new
first message). Three places break it: a user message (two user messages in a row — replace a
message by branching from its parent, answer it again with ``regenerate``), an assistant turn
whose tool calls lack results (OpenAI and Anthropic refuse such a request), and a child agent's
node (the main agent would get a worker's or fork's context).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent_core.types.enums import NodeType, Role
from agent_core.types.protocol import ToolCallBlock, ToolResultBlock
from agent_core.types.runtime import Node

__all__ = ["NotABranchPoint", "branch_refusal", "turn_message"]


@dataclass(frozen=True, slots=True)
class NotABranchPoint:
    """Why no message can follow a node: a stable ``reason`` code and a sentence for people."""

    reason: str  # "user_message" | "tool_calls_without_results" | "child_agent_node"
    message: str


def branch_refusal(path: Sequence[Node], root_agent_id: str) -> NotABranchPoint | None:
    """``None`` when a user message may follow the last node of ``path`` (root first), else why
    not. An empty path (a new first message) is always a branch point."""
    if not path:
        return None
    tip = path[-1]
    if tip.agent_id != root_agent_id:
        return NotABranchPoint(
            "child_agent_node",
            f"node {tip.node_id} belongs to a child agent ({tip.agent_id}), not the session's "
            "main agent: a message there would give the main agent a worker's or fork's context",
        )
    answered: set[str] = set()
    for node in reversed(path):
        if node.role is Role.SYSTEM:  # memory, skills, compaction, notes: not turns
            continue
        if node.role is Role.TOOL:
            answered.update(b.tool_call_id for b in node.content if isinstance(b, ToolResultBlock))
            continue
        if node.role is Role.USER:
            return NotABranchPoint(
                "user_message",
                f"node {node.node_id} is a user message, so a message under it would be the "
                "second user message in a row: to replace it, post under its parent "
                '(parent_node_id of the node before it, or "root" for the first message); to '
                "answer it again, POST …/nodes/{node_id}/regenerate",
            )
        calls = [b.id for b in node.content if isinstance(b, ToolCallBlock)]
        missing = [c for c in calls if c not in answered]
        if missing:
            return NotABranchPoint(
                "tool_calls_without_results",
                f"node {node.node_id} is an assistant turn whose tool calls have no results "
                f"({', '.join(missing[:5])}): providers refuse a request that carries them; "
                "branch from the node holding their results, or from before the turn",
            )
        return None
    return None


def turn_message(path: Sequence[Node], root_agent_id: str) -> Node | None:
    """The user message that began the main agent's turn ending at the last node of ``path``
    (the node itself when it is one); ``None`` when there is none (a child agent's node, or no
    user message above)."""
    if not path or path[-1].agent_id != root_agent_id:
        return None
    for node in reversed(path):
        if node.role is Role.USER and node.node_type is NodeType.MESSAGE:
            return node
    return None
