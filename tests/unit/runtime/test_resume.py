"""Where a taken-over run may continue."""

from __future__ import annotations

from agent_core.runtime import resume_point
from agent_core.types.enums import NodeType, Role
from agent_core.types.protocol import TextBlock, ToolCallBlock, ToolResultBlock
from agent_core.types.runtime import Node

RUN = "run_aaaaaaaaaaaaaaaa"


def _node(
    i: int, role: Role, blocks: list, run: str | None = RUN, node_type: NodeType = NodeType.MESSAGE
) -> Node:  # type: ignore[type-arg]
    return Node(
        node_id=f"node_{i:016x}",
        agent_id="agent_aaaaaaaaaaaaaaaa",
        run_id=run,
        role=role,
        content=blocks,
        node_type=node_type,
    )


def test_resume_points() -> None:
    user = _node(1, Role.USER, [TextBlock(text="q")])
    memory = _node(2, Role.SYSTEM, [TextBlock(text="m")], node_type=NodeType.MEMORY_CONTEXT)
    calls = _node(3, Role.ASSISTANT, [ToolCallBlock(id="c1", name="t")])
    results = _node(4, Role.TOOL, [ToolResultBlock(tool_call_id="c1")])
    answer = _node(5, Role.ASSISTANT, [TextBlock(text="done")])
    earlier = _node(
        0, Role.ASSISTANT, [ToolCallBlock(id="c0", name="t")], run="run_bbbbbbbbbbbbbbbb"
    )

    assert resume_point([earlier, user], RUN).action == "continue"
    assert resume_point([earlier, user, memory], RUN).action == "continue"
    unsafe = resume_point([user, memory, calls], RUN)
    assert (unsafe.action, unsafe.turns_done) == ("unsafe", 1)
    cont = resume_point([user, calls, results], RUN)
    assert (cont.action, cont.turns_done) == ("continue", 1)
    done = resume_point([user, calls, results, answer], RUN)
    assert (done.action, done.turns_done, done.final_text) == ("complete", 2, "done")


def test_tool_calls_without_results_run_again_only_when_every_tool_is_repeatable() -> None:
    user = _node(1, Role.USER, [TextBlock(text="q")])
    both = [ToolCallBlock(id="c1", name="read_file"), ToolCallBlock(id="c2", name="write_file")]
    reads = _node(2, Role.ASSISTANT, [both[0]])
    mixed = _node(2, Role.ASSISTANT, both)

    def repeatable(name: str) -> bool:
        return name == "read_file"

    rerun = resume_point([user, reads], RUN, repeatable)
    assert (rerun.action, rerun.turns_done) == ("rerun", 1)
    assert resume_point([user, mixed], RUN, repeatable).action == "unsafe"
    assert resume_point([user, reads], RUN).action == "unsafe"  # nothing declared: unsafe
