"""Building a model request from the active path (seed 000 "Active Path").

Only the nodes from the root to the run's head go into the context; sibling branches never do.
Nodes map by role: ``user``/``assistant``/``tool`` nodes become messages, ``system`` nodes (memory,
skill context, task boards, system notes) become system blocks after the agent's own prompt. Of
the ``memory_context`` and ``task_board`` nodes on the path only the newest of each is used — an
older snapshot must not contradict the current one. A builder made with a skill listing puts it
right after the agent's prompt: the names and descriptions of the skills the model may load, never
their bodies (those come as ``skill_context`` nodes once loaded). Every decision is recorded in the
:class:`ContextBuildReport` (``skills_listed``, ``skills_loaded`` included), so what the model saw
can be inspected later.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from agent_core.skills.active import SkillListing
from agent_core.types.enums import NodeType, Role
from agent_core.types.protocol import (
    ContentBlock,
    JsonBlock,
    ModelMessage,
    ModelRequest,
    SystemBlock,
    TextBlock,
    ToolCallBlock,
    ToolDefinition,
    ToolResultBlock,
)
from agent_core.types.runtime import (
    AgentConfig,
    ContextBuildReport,
    DroppedNode,
    InjectedContext,
    Node,
)

__all__ = ["ContextBuilder", "estimate_tokens"]

_SYNTHETIC = {NodeType.MEMORY_CONTEXT, NodeType.SKILL_CONTEXT, NodeType.TASK_BOARD}
# Snapshots where only the latest is true: an older memory or task board would contradict it.
_NEWEST_ONLY = (NodeType.MEMORY_CONTEXT, NodeType.TASK_BOARD)


def estimate_tokens(blocks: Sequence[ContentBlock]) -> int:
    """A cheap token estimate (~4 bytes of UTF-8 per token); good enough for budgets."""
    size = 0
    for block in blocks:
        if isinstance(block, TextBlock):
            size += len(block.text.encode())
        elif isinstance(block, ToolCallBlock):
            size += len(block.name) + len(json.dumps(block.arguments))
        elif isinstance(block, ToolResultBlock):
            size += sum(estimate_tokens([c]) * 4 for c in block.content)
        elif isinstance(block, JsonBlock):
            size += len(block.summary or "") + len(json.dumps(block.data, default=str))
        else:
            size += 64
    return max(1, size // 4) if size else 0


def _text(blocks: Sequence[ContentBlock]) -> str:
    return "\n".join(b.text for b in blocks if isinstance(b, TextBlock))


class _MessageCache:
    """The message of each recently seen node, so a long history is not rebuilt every call.

    Nodes never change once written, and the run-worker keeps the node objects of a session's path
    between runs; an entry is used only for the very node object it was made from. Messages are
    built with ``model_construct``: a node's blocks were validated when the node was.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[str, tuple[Node, ModelMessage]] = OrderedDict()

    def message(self, node: Node) -> ModelMessage:
        entry = self._entries.get(node.node_id)
        if entry is not None and entry[0] is node:
            return entry[1]
        role = node.role
        assert role is not Role.SYSTEM  # system nodes become system blocks, never messages
        message = ModelMessage.model_construct(role=role, content=list(node.content))
        self._entries[node.node_id] = (node, message)
        if len(self._entries) > self._size:
            self._entries.popitem(last=False)
        return message


_MESSAGES = _MessageCache(50_000)


@dataclass(frozen=True, slots=True)
class ContextBuilder:
    """Turns an active path into a :class:`ModelRequest` plus its :class:`ContextBuildReport`.

    ``skills``: the listing of the skills the model may load in this run (``None``: none).
    """

    skills: SkillListing | None = None

    def build(
        self,
        path: Sequence[Node],
        *,
        session_id: str,
        config: AgentConfig,
        tools: Sequence[ToolDefinition] = (),
        run_id: str | None = None,
    ) -> tuple[ModelRequest, ContextBuildReport]:
        """Build the request for the next model call after the last node of ``path``."""
        if not path:
            raise ValueError("an active path has at least the user's message")
        newest = {
            kind: next((n.node_id for n in reversed(path) if n.node_type is kind), None)
            for kind in _NEWEST_ONLY
        }
        system: list[SystemBlock] = []
        if config.system_prompt:
            system.append(SystemBlock(text=config.system_prompt, cache=True))
        if self.skills is not None:
            system.append(SystemBlock(text=self.skills.text))
        messages: list[ModelMessage] = []
        report = ContextBuildReport(
            session_id=session_id,
            agent_id=path[-1].agent_id,
            run_id=run_id,
            active_node_id=path[-1].node_id,
            skills_listed=list(self.skills.names) if self.skills is not None else [],
        )
        tokens = sum(estimate_tokens([TextBlock(text=b.text)]) for b in system)
        for node in path:
            # Writers record the estimate with the node (see BusRunStore); older rows lack it.
            cost = (
                node.token_count if node.token_count is not None else estimate_tokens(node.content)
            )
            if node.node_type in _NEWEST_ONLY and node.node_id != newest[node.node_type]:
                reason = f"superseded {node.node_type.value}"
                report.dropped.append(DroppedNode(node_id=node.node_id, reason=reason))
                continue
            if node.role is Role.SYSTEM:
                _add_system(node, cost, system, report)
            else:
                _add_message(node, messages)
            report.node_ids.append(node.node_id)
            tokens += cost
        report.token_estimate = tokens
        request = ModelRequest(
            model=config.model,
            system=system,
            messages=messages,
            tools=list(tools),
            max_tokens=config.max_output_tokens,
            temperature=config.temperature,
            provider_options=dict(config.provider_options),
            metadata={"run_id": run_id} if run_id else {},
        )
        return request, report


def _add_system(
    node: Node, cost: int, system: list[SystemBlock], report: ContextBuildReport
) -> None:
    """A system node's text joins the system prompt; synthetic context is reported as injected."""
    text = _text(node.content)
    if text:
        system.append(SystemBlock(text=text))
    if node.node_type is NodeType.SKILL_CONTEXT:
        name = node.metadata.get("skill")
        if isinstance(name, str) and name not in report.skills_loaded:
            report.skills_loaded.append(name)
    if node.node_type in _SYNTHETIC:
        report.injected.append(
            InjectedContext(
                node_type=node.node_type,
                source=str(node.metadata.get("source", node.node_type.value)),
                token_estimate=cost,
                node_id=node.node_id,
            )
        )


def _add_message(node: Node, messages: list[ModelMessage]) -> None:
    role = node.role
    if messages and messages[-1].role == role and role is not Role.ASSISTANT:
        # Consecutive user (or tool) nodes merge into one message: providers want turns.
        merged = [*messages[-1].content, *node.content]
        messages[-1] = ModelMessage.model_construct(role=role, content=merged)
    else:
        messages.append(_MESSAGES.message(node))
