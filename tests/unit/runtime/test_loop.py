"""The agent loop's logic with in-memory ports and the scripted model."""

from __future__ import annotations

from typing import Any

import pytest

from agent_core.errors import ConfigError, ProviderError
from agent_core.ids import new_id
from agent_core.runtime import AgentLoop, ScriptedModel, ScriptedReply
from agent_core.runtime.drive import failure_payload
from agent_core.types.enums import EndReason, EventType, Role, RunStatus
from agent_core.types.protocol import (
    ModelRequest,
    NamedToolChoice,
    TextBlock,
    ToolCall,
    ToolCallBlock,
    Usage,
)
from agent_core.types.runtime import AgentConfig, Node, RunBudget, RunHandle
from tests.unit.runtime.fakes import EchoTools, ListSink, MemoryStore

SESSION = "sess_20260101_000000_abcd"


def _handle() -> RunHandle:
    return RunHandle(run_id=new_id("run"), session_id=SESSION, agent_id=new_id("agent"), attempt=1)


def _user(handle: RunHandle, text: str = "hi") -> Node:
    return Node(
        node_id=new_id("node"),
        agent_id=handle.agent_id,
        run_id=handle.run_id,
        role=Role.USER,
        content=[TextBlock(text=text)],
    )


def _loop(
    reply: Any, *, tools: Any = None, **config: Any
) -> tuple[AgentLoop, MemoryStore, ListSink]:
    handle = _handle()
    store, sink = MemoryStore(), ListSink()
    loop = AgentLoop(
        handle=handle,
        config=AgentConfig(provider="fake", model="m", **config),
        model=ScriptedModel(reply),
        store=store,
        events=sink,
        tools=tools,
    )
    return loop, store, sink


def _calls(*names: str) -> list[ToolCall]:
    return [ToolCall(id=f"c{i}", name=n, arguments={"text": f"t{i}"}) for i, n in enumerate(names)]


async def test_parallel_tools_then_answer_builds_the_tree() -> None:
    def reply(request: ModelRequest) -> ScriptedReply:
        if request.messages[-1].role is Role.TOOL:
            return ScriptedReply(text="answer", usage=Usage(input_tokens=5, output_tokens=2))
        return ScriptedReply(
            tool_calls=_calls("echo", "fail"), usage=Usage(input_tokens=3, output_tokens=1)
        )

    tools = EchoTools()
    loop, store, sink = _loop(reply, tools=tools)
    ending = await loop.run([_user(loop.handle)])
    outcome = ending.end
    assert (outcome.status, outcome.end_reason, outcome.turns) == (
        RunStatus.COMPLETED,
        EndReason.COMPLETED,
        2,
    )
    assert outcome.usage == Usage(input_tokens=8, output_tokens=3)
    assert ending.text == "answer"
    # The answer is not stored by the loop: it is written with the run's end, in one command.
    assert [n.role for n in store.nodes] == [Role.ASSISTANT, Role.TOOL]
    assert [b.id for b in store.nodes[0].content if isinstance(b, ToolCallBlock)] == ["c0", "c1"]
    results = store.nodes[1].content
    assert [r.is_error for r in results] == [False, True]  # type: ignore[union-attr]
    (failed,) = [p for t, p in store.events if t is EventType.TOOL_FAILED]
    assert {k: failed[k] for k in ("tool_call_id", "tool", "error_code")} == {
        "tool_call_id": "c1",
        "tool": "fail",
        "error_code": "tool_failed",
    }
    # Each call's start and end go with the tool node, with when it ran and for how long.
    ends = [p for t, p in store.events if t in (EventType.TOOL_COMPLETED, EventType.TOOL_FAILED)]
    assert sorted(p["tool_call_id"] for p in ends) == ["c0", "c1"]
    assert all(p["started_at"] <= p["ended_at"] and p["duration_ms"] >= 0 for p in ends)
    assert [t for t, _ in store.events].count(EventType.TOOL_STARTED) == 2
    assert [e.type for e in sink.events].count("tool_started") == 2
    assert {c.name for c in tools.calls} == {"echo", "fail"}
    assert ending.node is not None and ending.node.role is Role.ASSISTANT
    assert ending.node.content == [TextBlock(text="answer")] and not ending.node.metadata
    assert ending.node.parent_id == store.nodes[-1].node_id
    assert outcome.last_node_id == ending.node.node_id


async def test_max_turns_ends_the_run() -> None:
    loop, store, _ = _loop(
        lambda r: ScriptedReply(tool_calls=_calls("echo")), tools=EchoTools(), max_turns=3
    )
    ending = await loop.run([_user(loop.handle)])
    outcome = ending.end
    assert (outcome.status, outcome.end_reason, outcome.turns) == (
        RunStatus.COMPLETED,
        EndReason.MAX_TURNS,
        3,
    )
    assert len(store.nodes) == 6
    assert ending.node is None and outcome.last_node_id == store.nodes[-1].node_id


async def test_token_budget_fails_with_a_clear_code() -> None:
    big = Usage(input_tokens=600, output_tokens=10)
    loop, _, _ = _loop(
        lambda r: ScriptedReply(tool_calls=_calls("echo"), usage=big),
        tools=EchoTools(),
        budget=RunBudget(max_total_tokens=1000),
    )
    ending = await loop.run([_user(loop.handle)])
    outcome = ending.end
    assert outcome.status is RunStatus.FAILED and outcome.error is not None
    assert (
        outcome.error.code == "budget_exceeded" and outcome.error.details["limit"] == "max_tokens"
    )
    # The calls of the turn over budget never ran: the end answers them, so the path stays whole.
    assert ending.node is not None and ending.node.role is Role.TOOL
    assert [b.is_error for b in ending.node.content] == [True]  # type: ignore[union-attr]


async def test_an_answer_over_the_token_budget_fails_the_run_and_does_not_end_it_completed() -> (
    None
):
    big = Usage(input_tokens=600, output_tokens=500)
    loop, store, _ = _loop(
        lambda r: ScriptedReply(text="long answer", usage=big),
        budget=RunBudget(max_total_tokens=1000),
    )
    ending = await loop.run([_user(loop.handle)])
    outcome = ending.end
    assert outcome.status is RunStatus.FAILED and outcome.error is not None
    assert outcome.error.code == "budget_exceeded"
    assert [n.role for n in store.nodes] == [Role.ASSISTANT]  # the answer is kept
    assert ending.node is None and outcome.last_node_id == store.nodes[0].node_id


async def test_provider_error_fails_the_run_and_keeps_partial_text() -> None:
    class Broken:
        async def stream(self, request: ModelRequest):  # type: ignore[no-untyped-def]
            from agent_core.types.protocol import MessageStartEvent, TextDeltaEvent

            yield MessageStartEvent()
            yield TextDeltaEvent(text="partial")
            raise ProviderError(
                "connection_dropped", "sk-abcdefghijklmnopqrstu dropped", retryable=True
            )

    handle = _handle()
    store, sink = MemoryStore(), ListSink()
    loop = AgentLoop(
        handle=handle,
        config=AgentConfig(provider="x", model="m"),
        model=Broken(),
        store=store,
        events=sink,
    )
    ending = await loop.run([_user(handle)])
    outcome = ending.end
    assert outcome.status is RunStatus.FAILED and outcome.error is not None
    assert outcome.error.code == "connection_dropped" and "sk-abc" not in outcome.error.message
    # What was streamed is written with the end, as a partial answer.
    assert store.nodes == [] and ending.node is not None
    assert ending.node.metadata == {"partial": True}
    assert ending.node.content == [TextBlock(text="partial")]
    assert outcome.last_node_id == ending.node.node_id


async def test_a_call_without_tools_is_an_error_result_and_the_loop_goes_on() -> None:
    def reply(request: ModelRequest) -> ScriptedReply:
        if request.messages[-1].role is Role.TOOL:
            return ScriptedReply(text="ok then")
        return ScriptedReply(tool_calls=_calls("missing"))

    loop, store, _ = _loop(reply)
    ending = await loop.run([_user(loop.handle)])
    assert ending.end.status is RunStatus.COMPLETED
    assert store.nodes[1].content[0].is_error  # type: ignore[union-attr]


async def test_task_tool_metadata_becomes_events_a_board_node_and_node_types() -> None:
    from agent_core.types.enums import NodeType
    from agent_core.types.protocol import ToolResult

    class TaskTools(EchoTools):
        async def execute(self, call: ToolCall, *, node_id: str | None = None) -> ToolResult:
            if call.name == "template":
                meta = {"node_type": "task_instruction"}
            else:
                meta = {
                    "task_event": {"list": "build", "change": "task_added", "task_id": "t1"},
                    "task_board": "- [ ] t1",
                }
            return ToolResult(tool_call_id=call.id, content=[TextBlock(text="ok")], metadata=meta)

    def reply(request: ModelRequest) -> ScriptedReply:
        tool_turns = sum(1 for m in request.messages if m.role is Role.TOOL)
        if tool_turns == 0:
            return ScriptedReply(tool_calls=[ToolCall(id="a", name="template")])
        if tool_turns == 1:
            return ScriptedReply(tool_calls=[ToolCall(id="b", name="add")])
        return ScriptedReply(text="planned")

    loop, store, sink = _loop(reply, tools=TaskTools())
    ending = await loop.run([_user(loop.handle)])
    assert ending.end.status is RunStatus.COMPLETED
    kinds = [(n.role, n.node_type) for n in [*store.nodes, ending.node]]
    assert kinds == [
        (Role.ASSISTANT, NodeType.MESSAGE),
        (Role.TOOL, NodeType.TASK_INSTRUCTION),
        (Role.ASSISTANT, NodeType.MESSAGE),
        (Role.TOOL, NodeType.MESSAGE),
        (Role.SYSTEM, NodeType.TASK_BOARD),
        (Role.ASSISTANT, NodeType.MESSAGE),
    ]
    assert store.nodes[4].content == [TextBlock(text="- [ ] t1")]
    changed = [e for e in sink.events if e.type == "task_changed"]
    assert len(changed) == 1 and changed[0].list_name == "build" and changed[0].tool_call_id == "b"
    assert (
        EventType.TASK_CHANGED,
        {"tool_call_id": "b", "list": "build", "change": "task_added", "task_id": "t1"},
    ) in store.events


async def test_the_loop_tells_its_phases_turn_by_turn() -> None:
    def reply(request: ModelRequest) -> ScriptedReply:
        if request.messages[-1].role is Role.TOOL:
            return ScriptedReply(text="answer")
        return ScriptedReply(tool_calls=_calls("echo", "echo"))

    loop, _, sink = _loop(reply, tools=EchoTools(), max_turns=5)
    await loop.run([_user(loop.handle)])
    phases = [(e.phase, e.turn, e.max_turns, e.tools) for e in sink.events if e.type == "phase"]  # type: ignore[union-attr]
    assert phases == [
        ("model", 1, 5, 0),
        ("streaming", 1, 5, 0),
        ("tools", 1, 5, 2),
        ("model", 2, 5, 0),
        ("streaming", 2, 5, 0),
    ]
    # A turn's text says the same turn as its phases (both count from 1).
    assert [e.turn for e in sink.events if e.type == "text_delta"] == [2]  # type: ignore[union-attr]


async def test_a_model_that_reports_no_usage_is_counted_by_estimate_and_says_so() -> None:
    from agent_core.types.runtime import RunUsage

    def reply(request: ModelRequest) -> ScriptedReply:
        if request.messages[-1].role is Role.TOOL:
            return ScriptedReply(text="the answer, in a few words", usage=None)
        return ScriptedReply(tool_calls=_calls("echo"), usage=None)

    loop, _, sink = _loop(reply, tools=EchoTools())
    ending = await loop.run([_user(loop.handle, "a question " * 50)])
    usage = ending.end.usage
    assert usage.estimated and usage.input_tokens > 100 and usage.output_tokens > 0
    per_call = [e.usage for e in sink.events if isinstance(e, RunUsage)]
    assert len(per_call) == 2 and all(u.estimated for u in per_call)
    assert per_call[1].input_tokens > per_call[0].input_tokens  # the tool turn added to it


async def test_reported_usage_is_not_marked_estimated() -> None:
    loop, _, _ = _loop(lambda r: ScriptedReply(text="ok", usage=Usage(input_tokens=7)))
    ending = await loop.run([_user(loop.handle)])
    assert ending.end.usage == Usage(input_tokens=7) and not ending.end.usage.estimated


async def test_a_forced_tool_is_asked_for_once_then_the_model_answers() -> None:
    seen: list[Any] = []

    def reply(request: ModelRequest) -> ScriptedReply:
        seen.append(request.tool_choice)
        if request.messages[-1].role is Role.TOOL:
            return ScriptedReply(text="done")
        return ScriptedReply(tool_calls=_calls("echo"))

    loop, _, _ = _loop(reply, tools=EchoTools(), tool_choice={"name": "echo"})
    ending = await loop.run([_user(loop.handle)])
    assert ending.end.status is RunStatus.COMPLETED and ending.text == "done"
    assert seen == [NamedToolChoice(name="echo"), None]


async def test_forcing_a_tool_the_run_does_not_have_ends_it_saying_so() -> None:
    loop, _, _ = _loop(
        lambda _r: ScriptedReply(text="x"), tools=EchoTools(), tool_choice={"name": "nope"}
    )
    with pytest.raises(ConfigError) as caught:
        await loop.run([_user(loop.handle)])
    # What the run's driver makes of it: the run ends failed with this payload.
    payload = failure_payload(caught.value)
    assert (payload.type, payload.code) == ("config_error", "unknown_tool_choice")
    assert "nope" in payload.message
