"""The agent loop's tool turn: run a model turn's tool calls and store what they return.

:func:`run_tool_turn` runs the calls concurrently (at most the loop's ``max_parallel_tools`` at
once), each announced by ``RunToolStarted`` and answered by ``RunToolResult``; a call the model
got wrong is answered by its error result and never run, and with no tools every call is an
``unknown_tool`` error. Every result goes into one tool node (typed by what its tools declare),
stored before anything the results report: task changes (a runtime and a timeline event each,
then one ``task_board`` node) and a loaded skill's context nodes. The tool node is written with
each call's ``tool_started`` and its end — ``tool_completed``, or ``tool_failed`` for an error
result — in the same transaction, so the timeline keeps when each call ran (``started_at``,
``ended_at``, ``duration_ms``) and the files it changed, and a worker lost after the write loses
none of them. One bad tool call never ends the run.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from agent_core.ids import new_id
from agent_core.runtime.steps import StepContext
from agent_core.skills.active import skill_context_nodes
from agent_core.types.enums import EventLevel, EventType, NodeType, Role
from agent_core.types.protocol import TextBlock, ToolCall, ToolResult
from agent_core.types.runtime import (
    Node,
    RunTaskChanged,
    RunToolResult,
    RunToolStarted,
    TimelineEvent,
)

__all__ = ["run_tool_turn"]

# Tool nodes may carry the meaning their tools declare (a template tool's result is a
# ``task_instruction`` / ``plan_instruction`` node, a child agent's answer a ``child_result``).
_TOOL_NODE_TYPES = frozenset(
    {NodeType.TASK_INSTRUCTION, NodeType.PLAN_INSTRUCTION, NodeType.CHILD_RESULT}
)


def _declared_type(results: list[ToolResult]) -> NodeType:
    declared = {r.metadata.get("node_type") for r in results}
    if len(declared) == 1:
        value = declared.pop()
        if value in {t.value for t in _TOOL_NODE_TYPES}:
            return NodeType(value)
    return NodeType.MESSAGE


async def run_tool_turn(
    ctx: StepContext,
    nodes: list[Node],
    calls: list[ToolCall],
    assistant_id: str,
    rejected: dict[str, ToolResult] | None = None,
) -> None:
    """Run the calls (a ``rejected`` one is answered by its error result instead), store every
    result in one tool node, then what the results report."""
    ctx.set_phase("tools")
    ctx.announce_phase("tools", tools=len(calls))
    timed = await _run_tools(ctx, calls, assistant_id, rejected or {})
    results = [t.result for t in timed]
    ctx.set_phase("idle")
    events = [e for call, t in zip(calls, timed, strict=True) for e in _call_events(ctx, call, t)]
    await ctx.append(
        nodes,
        Role.TOOL,
        [r.to_block() for r in results],
        node_type=_declared_type(results),
        events=events,
    )
    await _record_task_changes(ctx, nodes, calls, results)
    for kind, blocks, meta in skill_context_nodes(results):  # load_skill: body, memory
        await ctx.append(nodes, Role.SYSTEM, blocks, node_type=kind, metadata=meta)


@dataclass(frozen=True, slots=True)
class _Timed:
    """A call's result and when it ran (wall clock for the timeline, a monotonic duration)."""

    result: ToolResult
    started_at: str
    ended_at: str
    duration_ms: float


def _iso_now() -> str:
    # The stored timestamps' form: fixed-width ISO-8601 UTC, so they sort as text.
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _call_events(ctx: StepContext, call: ToolCall, timed: _Timed) -> list[TimelineEvent]:
    """The call's ``tool_started`` and its end (``tool_completed`` / ``tool_failed``), written
    with the tool node. The end carries the times, the duration and the files the call changed
    (``files``: path, area, change, size, artifact)."""
    result = timed.result
    start = {"tool": call.name, "started_at": timed.started_at}
    end: dict[str, Any] = {
        **start,
        "ended_at": timed.ended_at,
        "duration_ms": timed.duration_ms,
    }
    if result.is_error:
        end["error_code"] = result.metadata.get("error_code")
    files = result.metadata.get("files")
    if isinstance(files, list) and files:
        end["files"] = files
    ids = {"agent_id": ctx.handle.agent_id, "run_id": ctx.handle.run_id, "tool_call_id": call.id}
    return [
        TimelineEvent(
            event_id=new_id("evt"), event_type=EventType.TOOL_STARTED, payload=start, **ids
        ),
        TimelineEvent(
            event_id=new_id("evt"),
            event_type=EventType.TOOL_FAILED if result.is_error else EventType.TOOL_COMPLETED,
            level=EventLevel.WARNING if result.is_error else EventLevel.INFO,
            payload=end,
            **ids,
        ),
    ]


async def _run_tools(
    ctx: StepContext, calls: list[ToolCall], node_id: str, rejected: dict[str, ToolResult]
) -> list[_Timed]:
    async def one(call: ToolCall) -> _Timed:
        async with ctx.tool_slots:
            started_at, started = _iso_now(), time.monotonic()
            ctx.events.emit(
                ctx.event(
                    RunToolStarted,
                    tool_call_id=call.id,
                    name=call.name,
                    arguments=call.arguments,
                )
            )
            if call.id in rejected:
                result = rejected[call.id]
            elif ctx.tools is None:
                result = ToolResult(
                    tool_call_id=call.id,
                    content=[TextBlock(text=f"No tools are available; {call.name!r} was not run.")],
                    is_error=True,
                    metadata={"error_code": "unknown_tool"},
                )
            else:
                result = await ctx.tools.execute(call, node_id=node_id)
            ctx.events.emit(
                ctx.event(
                    RunToolResult,
                    tool_call_id=call.id,
                    name=call.name,
                    is_error=result.is_error,
                    content=result.content,
                )
            )
            duration_ms = round((time.monotonic() - started) * 1000, 1)
            return _Timed(result, started_at, _iso_now(), duration_ms)

    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(one(c)) for c in calls]
    return [t.result() for t in tasks]


async def _record_task_changes(
    ctx: StepContext, nodes: list[Node], calls: list[ToolCall], results: list[ToolResult]
) -> None:
    """Task tools report changes in their metadata: a runtime + timeline event per change,
    and one ``task_board`` node with the newest board after the tool node."""
    board = None
    for call, result in zip(calls, results, strict=True):
        change = result.metadata.get("task_event")
        if isinstance(change, dict):
            ctx.events.emit(
                ctx.event(
                    RunTaskChanged,
                    list_name=str(change.get("list", "")),
                    change=str(change.get("change", "")),
                    task_id=change.get("task_id"),
                    tool_call_id=call.id,
                )
            )
            await ctx.store.append_event(
                EventType.TASK_CHANGED, tool_call_id=call.id, payload=dict(change)
            )
        if isinstance(result.metadata.get("task_board"), str):
            board = result.metadata["task_board"]
    if board:
        await ctx.append(nodes, Role.SYSTEM, [TextBlock(text=board)], node_type=NodeType.TASK_BOARD)
