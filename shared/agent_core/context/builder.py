"""Building a model request from the active path (docs/architecture.md, "Context management").

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

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from agent_core.context.compacted import Compacted, compacted_view
from agent_core.context.tokens import (
    estimate_blocks,
    estimate_text,
    estimate_tools,
    model_limits,
    node_tokens,
)
from agent_core.context.tool_choice import choose_tools
from agent_core.errors import ConfigError
from agent_core.skills.active import SkillListing
from agent_core.types.enums import NodeType, Role
from agent_core.types.protocol import (
    ContentBlock,
    ModelMessage,
    ModelRequest,
    NamedToolChoice,
    SystemBlock,
    TextBlock,
    ToolCallBlock,
    ToolChoice,
    ToolDefinition,
    ToolResultBlock,
)
from agent_core.types.runtime import (
    AgentConfig,
    ContextBudget,
    ContextBuildReport,
    DroppedNode,
    InjectedContext,
    Node,
)

__all__ = ["ContextBuilder", "estimate_tokens"]

_SYNTHETIC = {NodeType.MEMORY_CONTEXT, NodeType.SKILL_CONTEXT, NodeType.TASK_BOARD}
# Snapshots where only the latest is true: an older memory or task board would contradict it.
_NEWEST_ONLY = (NodeType.MEMORY_CONTEXT, NodeType.TASK_BOARD)

estimate_tokens = estimate_blocks
"""A node's estimated tokens (see :mod:`agent_core.context.tokens`)."""


def _text(blocks: Sequence[ContentBlock]) -> str:
    return "\n".join(b.text for b in blocks if isinstance(b, TextBlock))


# Writers record the estimate with the node (see BusRunStore); older rows lack it.
_cost = node_tokens


class _MessageCache:
    """The message of each recently seen node, so a long history is not rebuilt every call.

    Nodes never change once written, and the run-worker keeps the node objects of a session's path
    between runs; an entry is used only for the very node object it was made from. Messages are
    built with ``model_construct``: a node's blocks were validated when the node was.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        # A plain dict dropping its oldest entry, not ``agent_core.recent.Recent``: this is read
        # once per node of every context build (thousands), where a method call and a reorder
        # per read cost 0.15-0.2 ms a 2,000-node build (``bench/context.py``, side by side).
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
        ratio: float = 1.0,
    ) -> tuple[ModelRequest, ContextBuildReport]:
        """Build the request for the next model call after the last node of ``path``.

        The newest ``compaction`` node on the path stands for the nodes it covers (see
        :mod:`agent_core.context.compacted`): its summary opens the messages, the covered
        nodes it pinned are kept, the rest are reported ``dropped`` as compacted. ``ratio``:
        the calibration factor of the session's model (see :class:`Calibration`), applied to
        the budget's figures."""
        if not path:
            raise ValueError("an active path has at least the user's message")
        view = compacted_view(path)
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
        system_tokens = sum(estimate_text(b.text) for b in system)
        pinned = 0 if view is None else self._summary(view, system, messages, report)
        nodes = path if view is None else view.nodes
        added_pinned, history = _history(nodes, newest, system, messages, report)
        pinned += added_pinned
        report.token_estimate = system_tokens + pinned + history
        sent, choice = _tools_sent(config, tools, path, run_id, ratio, report)
        report.budget = _budget(config, system_tokens, pinned, history, _tool_tokens(sent), ratio)
        request = ModelRequest(
            model=config.model,
            system=system,
            messages=messages,
            tools=sent,
            tool_choice=choice,
            # A configured limit is sent as the output reserve: never more than half the window,
            # so a server that checks prompt + max_tokens against it takes the request.
            max_tokens=None if config.max_output_tokens is None else report.budget.output_reserve,
            temperature=config.temperature,
            provider_options=dict(config.provider_options),
            metadata={"run_id": run_id} if run_id else {},
        )
        return request, report

    @staticmethod
    def _summary(
        view: Compacted,
        system: list[SystemBlock],
        messages: list[ModelMessage],
        report: ContextBuildReport,
    ) -> int:
        """The compaction's part of the context: its summary (with the user's pinned words) as
        the first message, pinned tool instructions as system blocks. Returns its tokens."""
        report.compaction_node_id = view.node.node_id
        report.compacted = len(view.dropped)
        report.dropped.extend(DroppedNode(node_id=i, reason="compacted") for i in view.dropped)
        tokens = _cost(view.node)
        for node in view.instructions:
            text = _instruction_text(node)
            system.append(SystemBlock(text=text))
            tokens += _cost(node)
            report.node_ids.append(node.node_id)
        messages.append(
            ModelMessage.model_construct(role=Role.USER, content=[TextBlock(text=view.text)])
        )
        report.node_ids.append(view.node.node_id)
        report.injected.append(
            InjectedContext(
                node_type=NodeType.COMPACTION,
                source=str(view.node.metadata.get("method", "summary")),
                token_estimate=tokens,
                node_id=view.node.node_id,
            )
        )
        return tokens


def _history(
    nodes: Sequence[Node],
    newest: dict[NodeType, str | None],
    system: list[SystemBlock],
    messages: list[ModelMessage],
    report: ContextBuildReport,
) -> tuple[int, int]:
    """Add ``nodes`` to the request: system nodes as system blocks, the others as messages; of
    the kinds only the newest counts (``_NEWEST_ONLY``), older ones are reported dropped as
    superseded. Returns the tokens ``(pinned, history)`` they add."""
    pinned = history = 0
    for node in nodes:
        cost = _cost(node)
        if node.node_type in _NEWEST_ONLY and node.node_id != newest[node.node_type]:
            reason = f"superseded {node.node_type.value}"
            report.dropped.append(DroppedNode(node_id=node.node_id, reason=reason))
            continue
        if node.role is Role.SYSTEM:
            _add_system(node, cost, system, report)
            pinned += cost
        else:
            _add_message(node, messages)
            history += cost
        report.node_ids.append(node.node_id)
    return pinned, history


def _tools_sent(
    config: AgentConfig,
    tools: Sequence[ToolDefinition],
    path: Sequence[Node],
    run_id: str | None,
    ratio: float,
    report: ContextBuildReport,
) -> tuple[list[ToolDefinition], ToolChoice | None]:
    """The tools the request carries (within the policy's share of the window; those left out
    are reported) and its tool choice. ``ConfigError`` if the choice names a tool the agent
    does not have."""
    # No tools at all (a run without them, the inspector's preview): nothing to force.
    choice = _tool_choice(config.tool_choice, path, run_id) if tools else None
    forced = [choice.name] if isinstance(choice, NamedToolChoice) else []
    policy = config.context
    sent, report.tools_left_out = choose_tools(
        tools,
        path,
        room=int(_input_budget(config) * policy.tool_share / ratio),
        cost=_tool_cost,
        preferred=policy.small_window_tools or (),
        forced=forced,
    )
    if forced and all(t.name != forced[0] for t in sent):
        raise ConfigError(
            "unknown_tool_choice",
            f"tool_choice names the tool {forced[0]!r}, which this agent does not have",
            details={"key": "tool_choice", "tools": sorted(t.name for t in sent)[:50]},
        )
    return sent, choice


def _tool_choice(
    choice: ToolChoice | None, path: Sequence[Node], run_id: str | None
) -> ToolChoice | None:
    """The tool choice of the next request: the config's until run ``run_id`` has called a tool,
    then the provider's default (a forced call would otherwise repeat until ``max_turns``)."""
    if choice is None or choice == "auto":
        return None
    if choice == "none" or run_id is None:
        return choice
    called = any(
        node.run_id == run_id and any(isinstance(b, ToolCallBlock) for b in node.content)
        for node in path
    )
    return None if called else choice


def _instruction_text(node: Node) -> str:
    """A pinned plan / task instruction (a tool result) as system text."""
    parts: list[str] = []
    for block in node.content:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ToolResultBlock):
            parts.extend(c.text for c in block.content if isinstance(c, TextBlock))
    return f"[{node.node_type.value}, kept through compaction]\n" + "\n".join(parts)


_TOOL_COSTS: dict[int, tuple[ToolDefinition, int]] = {}


def _tool_cost(tool: ToolDefinition) -> int:
    """One tool definition's tokens, estimated once per definition object."""
    entry = _TOOL_COSTS.get(id(tool))
    if entry is None or entry[0] is not tool:
        if len(_TOOL_COSTS) > 4096:
            _TOOL_COSTS.clear()
        entry = (tool, estimate_tools([tool]))
        _TOOL_COSTS[id(tool)] = entry
    return entry[1]


def _tool_tokens(tools: Sequence[ToolDefinition]) -> int:
    """The tool definitions' tokens."""
    return sum(_tool_cost(tool) for tool in tools)


def _input_budget(config: AgentConfig) -> int:
    """The window less the output reserve (as :func:`_budget` reckons them)."""
    limits = model_limits(
        config.model,
        context_window=config.context_window,
        max_output_tokens=config.max_output_tokens,
    )
    return limits.context_window - limits.max_output_tokens


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


def _budget(
    config: AgentConfig, system: int, pinned: int, history: int, tools: int, ratio: float
) -> ContextBudget:
    """The build's budget: the model's window and output reserve, and what each part of the
    context takes (the estimates times the session's calibration ``ratio``)."""
    limits = model_limits(
        config.model,
        context_window=config.context_window,
        max_output_tokens=config.max_output_tokens,
    )
    input_budget = limits.context_window - limits.max_output_tokens
    raw = system + pinned + history + tools
    return ContextBudget(
        context_window=limits.context_window,
        output_reserve=limits.max_output_tokens,
        input_budget=input_budget,
        compact_at=int(input_budget * config.context.compact_at),
        system=round(system * ratio),
        pinned=round(pinned * ratio),
        history=round(history * ratio),
        tools=round(tools * ratio),
        total=round(raw * ratio),
        estimated=raw,
        ratio=ratio,
    )
