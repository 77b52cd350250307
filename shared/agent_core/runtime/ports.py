"""The small interfaces the agent loop depends on; the run-worker supplies bus-backed ones.

Nothing here knows Redis or SQLite: a test can run the loop with in-memory implementations.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from agent_core.types.enums import EventLevel, EventType
from agent_core.types.protocol import ToolCall, ToolDefinition, ToolResult
from agent_core.types.runtime import Node, RuntimeEvent, TimelineEvent

__all__ = ["EventSink", "RunStore", "ToolRunner"]


class RunStore(Protocol):
    """Durable writes of one run attempt (fenced by the implementation)."""

    async def append_node(
        self,
        node: Node,
        *,
        payload: dict[str, Any] | None = None,
        events: Sequence[TimelineEvent] = (),
    ) -> Node:
        """Persist ``node`` with its ``node_created`` event — and ``events``, more events of
        the run about the node (a tool node's tool call starts and ends) — in one transaction;
        return it with its seq. Refused once the run has ended."""
        ...

    async def append_event(
        self,
        event_type: EventType,
        *,
        level: EventLevel = EventLevel.INFO,
        node_id: str | None = None,
        tool_call_id: str | None = None,
        payload: dict[str, Any] | None = None,
    ) -> None:
        """Persist a timeline event that has no node of its own."""
        ...


class EventSink(Protocol):
    """Where live runtime events go (the run's Redis stream); emitting never blocks."""

    def emit(self, event: RuntimeEvent) -> None:
        """Queue one event; events are delivered in emission order."""
        ...


class ToolRunner(Protocol):
    """Executes tool calls; every failure is an ``is_error`` result, only cancellation raises."""

    def definitions(self) -> Sequence[ToolDefinition]:
        """The tools the model may call in this run."""
        ...

    async def execute(self, call: ToolCall, *, node_id: str | None = None) -> ToolResult:
        """The result of one call."""
        ...
