"""The loop's steps get a :class:`StepContext`, never the loop: its private members stay its own.

Read from the source for the boundary (a step module reaching into ``loop._x`` fails here), and
run for the shape: each step works on a context built without any :class:`AgentLoop`.
"""

from __future__ import annotations

import ast
import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent_core.errors import ErrorPayload
from agent_core.ids import new_id
from agent_core.runtime import Ending, ScriptedModel, ScriptedReply
from agent_core.runtime.model_stream import stream_response
from agent_core.runtime.steps import AnnouncedPhase, LoopPhase, StepContext, child_node
from agent_core.runtime.tool_turn import run_tool_turn
from agent_core.types.enums import EndReason, NodeType, Role, RunStatus
from agent_core.types.protocol import ContentBlock, ModelRequest, TextBlock, ToolCall
from agent_core.types.runtime import (
    Node,
    RunHandle,
    RunTextDelta,
    RunToolResult,
    RunToolStarted,
    TimelineEvent,
)
from tests.unit.runtime.fakes import EchoTools, ListSink, MemoryStore

RUNTIME = Path(__file__).resolve().parents[3] / "shared" / "agent_core" / "runtime"
# The modules whose functions are the loop's steps.
STEP_MODULES = ("hook_steps.py", "model_stream.py", "tool_turn.py")


def _private_reaches(path: Path) -> list[str]:
    """``line: expr`` of every private attribute read or written on anything but ``self`` or
    ``cls`` (dunders are not private)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or (name.startswith("__") and name.endswith("__")):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"}:
            continue
        found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_runtime_module_but_the_loop_reaches_into_private_members() -> None:
    modules = sorted(p for p in RUNTIME.glob("*.py") if p.name != "loop.py")
    assert {p.name for p in modules} >= set(STEP_MODULES)
    reaches = [hit for path in modules for hit in _private_reaches(path)]
    assert reaches == [], f"reach the loop through its StepContext instead: {reaches}"


def test_the_step_modules_do_not_know_the_loop_class() -> None:
    for name in STEP_MODULES:
        tree = ast.parse((RUNTIME / name).read_text(encoding="utf-8"))
        named = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        imported = {
            alias.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for alias in n.names
        }
        assert "AgentLoop" not in named | imported, name


class _Recorder:
    """A step context's loop side, recorded: the nodes it stored, phases and partial text."""

    def __init__(self, handle: RunHandle) -> None:
        self.handle = handle
        self.phases: list[LoopPhase] = []
        self.announced: list[tuple[AnnouncedPhase, int]] = []
        self.partial: list[str] = []

    async def append(
        self,
        nodes: list[Node],
        role: Role,
        blocks: list[ContentBlock],
        *,
        node_type: NodeType = NodeType.MESSAGE,
        metadata: dict[str, Any] | None = None,
        events: Sequence[TimelineEvent] = (),
    ) -> Node:
        node = child_node(
            self.handle, nodes[-1], role, blocks, node_type=node_type, metadata=metadata
        )
        nodes.append(node)
        return node

    def announce(self, phase: AnnouncedPhase, tools: int = 0) -> None:
        self.announced.append((phase, tools))

    def end(
        self, status: RunStatus, reason: EndReason, *, error: ErrorPayload | None = None
    ) -> Ending:
        raise AssertionError(f"no step here ends the run ({status}, {reason}, {error})")


def _context(reply: Any, *, tools: EchoTools | None = None) -> tuple[StepContext, _Recorder]:
    handle = RunHandle(
        run_id=new_id("run"),
        session_id="sess_20260101_000000_abcd",
        agent_id=new_id("agent"),
        attempt=2,
    )
    loop = _Recorder(handle)
    ctx = StepContext(
        handle=handle,
        model=ScriptedModel(reply),
        store=MemoryStore(),
        events=ListSink(),
        tools=tools,
        hooks=None,
        tool_slots=asyncio.Semaphore(2),
        append=loop.append,
        announce_phase=loop.announce,
        set_phase=loop.phases.append,
        set_partial_text=loop.partial.append,
        end=loop.end,
    )
    return ctx, loop


async def test_a_model_call_streams_through_the_context_alone() -> None:
    ctx, loop = _context(lambda _r: ScriptedReply(text="hello there"))
    request = ModelRequest(model="m", messages=[])
    response = await stream_response(ctx, request, turn=3)
    assert response.text == "hello there"
    assert loop.announced == [("streaming", 0)]
    assert loop.partial and loop.partial[-1] == "hello there"
    assert isinstance(ctx.events, ListSink)
    deltas = [e for e in ctx.events.events if isinstance(e, RunTextDelta)]
    assert "".join(d.text for d in deltas) == "hello there"
    assert {(d.turn, d.attempt, d.run_id, d.session_id) for d in deltas} == {
        (3, 2, ctx.handle.run_id, ctx.handle.session_id)
    }


async def test_a_tool_turn_runs_through_the_context_alone() -> None:
    ctx, loop = _context(lambda _r: ScriptedReply(text="unused"), tools=EchoTools())
    first = Node(
        node_id=new_id("node"),
        agent_id=ctx.handle.agent_id,
        run_id=ctx.handle.run_id,
        role=Role.ASSISTANT,
        content=[TextBlock(text="")],
    )
    nodes = [first]
    calls = [ToolCall(id="a", name="echo", arguments={"text": "x"}), ToolCall(id="b", name="fail")]
    await run_tool_turn(ctx, nodes, calls, first.node_id)
    assert loop.phases == ["tools", "idle"]
    assert loop.announced == [("tools", 2)]
    assert [n.role for n in nodes] == [Role.ASSISTANT, Role.TOOL]
    assert isinstance(ctx.events, ListSink)
    started = [e.tool_call_id for e in ctx.events.events if isinstance(e, RunToolStarted)]
    ended = {e.tool_call_id: e.is_error for e in ctx.events.events if isinstance(e, RunToolResult)}
    assert sorted(started) == ["a", "b"]
    assert ended == {"a": False, "b": True}
