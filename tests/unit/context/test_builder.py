"""The context builder: active path only, newest memory only, system nodes as system blocks."""

from __future__ import annotations

from agent_core.context import ContextBuilder, estimate_text, estimate_tokens
from agent_core.types.enums import NodeType, Role
from agent_core.types.protocol import TextBlock, ToolCallBlock, ToolDefinition, ToolResultBlock
from agent_core.types.runtime import AgentConfig, Node

AGENT = "agent_aaaaaaaaaaaaaaaa"
SESSION = "sess_20260101_000000_abcd"


def _n(
    i: int,
    role: Role,
    text: str | None = None,
    node_type: NodeType = NodeType.MESSAGE,
    blocks: list | None = None,
) -> Node:  # type: ignore[type-arg]
    return Node(
        node_id=f"node_{i:016x}",
        agent_id=AGENT,
        role=role,
        node_type=node_type,
        content=blocks or [TextBlock(text=text or "")],
    )


def test_build_maps_roles_and_keeps_only_the_newest_memory() -> None:
    path = [
        _n(1, Role.USER, "first"),
        _n(2, Role.SYSTEM, "old memory", NodeType.MEMORY_CONTEXT),
        _n(3, Role.ASSISTANT, blocks=[ToolCallBlock(id="c", name="t")]),
        _n(4, Role.TOOL, blocks=[ToolResultBlock(tool_call_id="c", content=[TextBlock(text="r")])]),
        _n(5, Role.ASSISTANT, "answer"),
        _n(6, Role.USER, "second"),
        _n(7, Role.USER, "more"),
        _n(8, Role.SYSTEM, "# 个性化记忆\n- new", NodeType.MEMORY_CONTEXT),
    ]
    config = AgentConfig(
        provider="p", model="m", system_prompt="You are helpful.", max_output_tokens=100
    )
    request, report = ContextBuilder().build(
        path,
        session_id=SESSION,
        config=config,
        tools=[ToolDefinition(name="t")],
        run_id="run_aaaaaaaaaaaaaaaa",
    )
    assert [b.text for b in request.system] == ["You are helpful.", "# 个性化记忆\n- new"]
    assert [m.role for m in request.messages] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
        Role.USER,
    ]
    assert [b.text for b in request.messages[-1].content] == ["second", "more"]  # type: ignore[union-attr]
    assert request.max_tokens == 100 and request.tools[0].name == "t"
    assert [(d.node_id, d.reason) for d in report.dropped] == [
        (path[1].node_id, "superseded memory_context")
    ]
    assert [i.node_id for i in report.injected] == [path[7].node_id]
    assert report.node_ids == [n.node_id for n in path if n is not path[1]]
    assert report.token_estimate > 0 and report.active_node_id == path[-1].node_id


def test_the_output_asked_for_fits_the_window() -> None:
    """A 2,048-token local model with the default 4,096 output tokens: asking for 4,096 makes a
    server that checks prompt + max_tokens against its window refuse every request."""
    config = AgentConfig(provider="p", model="smollm2", context_window=2048, max_output_tokens=4096)
    request, report = ContextBuilder().build(
        [_n(1, Role.USER, "hi")], session_id=SESSION, config=config, tools=[]
    )
    assert request.max_tokens == report.budget.output_reserve == 1024
    assert report.budget.input_budget + request.max_tokens == 2048


def test_token_estimate_grows_with_text() -> None:
    short = estimate_text("the answer is here")
    assert 3 <= short <= 6
    assert estimate_text("the answer is here " * 50) > 40 * short
    assert estimate_tokens([]) == 0
