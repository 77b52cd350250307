"""Long paths and loop runs for the context tests (compaction and recovery through the fakes)."""

from __future__ import annotations

from typing import Any

from agent_core.ids import new_id, new_session_id
from agent_core.provider import ProviderAdapter
from agent_core.runtime import AgentLoop
from agent_core.types.enums import NodeType, Role
from agent_core.types.protocol import TextBlock, ToolCallBlock, ToolResultBlock
from agent_core.types.runtime import AgentConfig, Node, RunEnd, RunHandle
from tests.unit.runtime.fakes import ListSink, MemoryStore

AGENT = "agent_aaaaaaaaaaaaaaaa"
FILLER = (
    "Line {i}: the build of module {i} read config.toml, wrote output/report_{i}.md and found "
    '{{"status": "ok", "rows": {i}}}; 第{i}步完成。\n'
)


def node(role: Role, blocks: list[Any], **fields: Any) -> Node:
    """A node of the test agent with a fresh id."""
    return Node(node_id=new_id("node"), agent_id=AGENT, role=role, content=blocks, **fields)


def chain(nodes: list[Node]) -> list[Node]:
    """``nodes`` linked parent to child, as a path."""
    linked: list[Node] = []
    for n in nodes:
        parent = linked[-1].node_id if linked else None
        linked.append(n.model_copy(update={"parent_id": parent}))
    return linked


def big_text(i: int, lines: int = 12) -> str:
    """A tool output of mixed prose, paths, JSON and CJK (about 40 tokens a line)."""
    return "".join(FILLER.format(i=i * 100 + j) for j in range(lines))


def long_path(turns: int, *, lines: int = 12, task: str = "Build every module.") -> list[Node]:
    """A user's task, then ``turns`` tool turns with large results, ending on a tool node."""
    nodes = [node(Role.USER, [TextBlock(text=task)])]
    for i in range(turns):
        call = f"call_{i}"
        nodes.append(node(Role.ASSISTANT, [ToolCallBlock(id=call, name="echo", arguments={})]))
        result = ToolResultBlock(tool_call_id=call, content=[TextBlock(text=big_text(i, lines))])
        nodes.append(node(Role.TOOL, [result]))
    return chain(nodes)


def config(**fields: Any) -> AgentConfig:
    """An agent config with a small window (4,096: the tests' paths outgrow it quickly)."""
    base: dict[str, Any] = {
        "provider": "fake",
        "model": "fake-model",
        "system_prompt": "You are the build agent. PINNED-SYSTEM-PROMPT",
        "context_window": 4096,
        "max_output_tokens": 512,
    }
    base.update(fields)
    return AgentConfig.model_validate(base)


def handle() -> RunHandle:
    """A run of a fresh session (calibration is kept per session: tests must not share one)."""
    return RunHandle(run_id=new_id("run"), session_id=new_session_id(), agent_id=AGENT, attempt=1)


async def run_path(
    adapter: ProviderAdapter,
    path: list[Node],
    agent: AgentConfig,
    *,
    tools: Any = None,
    store: MemoryStore | None = None,
    run: RunHandle | None = None,
) -> tuple[RunEnd, AgentLoop]:
    """One run of the loop continuing ``path``: its end and the loop (its nodes, its reports).
    The node the run ends on is stored and added to the loop's nodes, as the driver does."""
    loop = AgentLoop(
        handle=run or handle(),
        config=agent,
        model=adapter,
        store=store if store is not None else MemoryStore(),
        events=ListSink(),
        tools=tools,
    )
    ending = await loop.run(path)
    if ending.node is not None:
        await loop.store.append_node(ending.node)
        loop.nodes.append(ending.node)
    return ending.end, loop


def compactions(nodes: list[Node]) -> list[Node]:
    """The compaction nodes among ``nodes``."""
    return [n for n in nodes if n.node_type is NodeType.COMPACTION]
