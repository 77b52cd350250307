"""Where a conversation can go on (``context/branch_points.py``): pure logic over a path."""

from __future__ import annotations

from agent_core.context.branch_points import branch_refusal, turn_message
from agent_core.types.enums import NodeType, Role
from agent_core.types.protocol import TextBlock, ToolCallBlock, ToolResultBlock
from agent_core.types.runtime import Node

MAIN, WORKER = "agent_0000000000000001", "agent_0000000000000002"


def _node(
    n: int, role: Role, *blocks: object, agent: str = MAIN, kind: NodeType = NodeType.MESSAGE
) -> Node:
    return Node(
        node_id=f"node_{n:016x}",
        parent_id=f"node_{n - 1:016x}" if n > 1 else None,
        agent_id=agent,
        role=role,
        node_type=kind,
        content=list(blocks) or [TextBlock(text=f"{role.value} {n}")],  # type: ignore[arg-type]
    )


USER = _node(1, Role.USER)
MEMORY = _node(2, Role.SYSTEM, kind=NodeType.MEMORY_CONTEXT)
CALLS = _node(
    3, Role.ASSISTANT, ToolCallBlock(id="a", name="lookup"), ToolCallBlock(id="b", name="lookup")
)
HALF = _node(4, Role.TOOL, ToolResultBlock(tool_call_id="a"))
REST = _node(5, Role.TOOL, ToolResultBlock(tool_call_id="b"))
ANSWER = _node(6, Role.ASSISTANT)


def test_an_answer_a_turn_with_every_result_and_the_root_are_branch_points() -> None:
    assert branch_refusal([], MAIN) is None
    assert branch_refusal([USER, MEMORY, CALLS, HALF, REST], MAIN) is None
    assert branch_refusal([USER, MEMORY, CALLS, HALF, REST, ANSWER], MAIN) is None
    compacted = _node(7, Role.SYSTEM, kind=NodeType.COMPACTION)
    assert branch_refusal([USER, ANSWER, compacted], MAIN) is None  # system nodes are no turn


def test_a_user_message_tool_calls_without_results_and_a_workers_node_are_not() -> None:
    for path in ([USER], [USER, MEMORY]):
        why = branch_refusal(path, MAIN)
        assert why is not None and why.reason == "user_message" and "regenerate" in why.message
    for path in ([USER, MEMORY, CALLS], [USER, MEMORY, CALLS, HALF]):
        why = branch_refusal(path, MAIN)
        assert why is not None and why.reason == "tool_calls_without_results"
        assert "b" in why.message
    worker = _node(7, Role.ASSISTANT, agent=WORKER)
    why = branch_refusal([USER, ANSWER, worker], MAIN)
    assert why is not None and why.reason == "child_agent_node" and WORKER in why.message


def test_the_turn_of_a_node_is_the_user_message_that_began_it() -> None:
    path = [USER, MEMORY, CALLS, HALF, REST, ANSWER]
    assert turn_message(path, MAIN) == USER
    assert turn_message([USER], MAIN) == USER
    assert turn_message([USER, ANSWER, _node(7, Role.ASSISTANT, agent=WORKER)], MAIN) is None
    assert turn_message([], MAIN) is None
