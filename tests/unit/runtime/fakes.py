"""In-memory ports for unit tests of the loop's logic (no bus, no SQLite)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_core.types.enums import EventLevel, EventType
from agent_core.types.protocol import TextBlock, ToolCall, ToolDefinition, ToolResult
from agent_core.types.runtime import Node, RuntimeEvent, TimelineEvent


class MemoryStore:
    """Keeps appended nodes and events in lists; assigns node_seq like the writer."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.events: list[tuple[EventType, dict[str, Any]]] = []

    async def append_node(
        self,
        node: Node,
        *,
        payload: dict[str, Any] | None = None,
        events: Sequence[TimelineEvent] = (),
    ) -> Node:
        stored = node.model_copy(update={"node_seq": len(self.nodes) + 1})
        self.nodes.append(stored)
        self.events.append((EventType.NODE_CREATED, {"node_id": node.node_id}))
        for event in events:
            self.events.append(
                (event.event_type, {"tool_call_id": event.tool_call_id, **event.payload})
            )
        return stored

    async def append_event(
        self,
        event_type: EventType,
        *,
        level: EventLevel = EventLevel.INFO,
        node_id: str | None = None,
        tool_call_id: str | None = None,
        payload: dict[str, Any] | None = None,
    ) -> None:
        self.events.append((event_type, {"tool_call_id": tool_call_id, **(payload or {})}))


class ListSink:
    """Collects runtime events."""

    def __init__(self) -> None:
        self.events: list[RuntimeEvent] = []

    def emit(self, event: RuntimeEvent) -> None:
        self.events.append(event)


class EchoTools:
    """``echo`` returns its text; ``fail`` is an error result."""

    def __init__(self) -> None:
        self.calls: list[ToolCall] = []

    def definitions(self) -> Sequence[ToolDefinition]:
        return [ToolDefinition(name="echo"), ToolDefinition(name="fail")]

    async def execute(self, call: ToolCall, *, node_id: str | None = None) -> ToolResult:
        self.calls.append(call)
        if call.name == "fail":
            return ToolResult(
                tool_call_id=call.id,
                content=[TextBlock(text="it broke")],
                is_error=True,
                metadata={"error_code": "tool_failed"},
            )
        return ToolResult(
            tool_call_id=call.id, content=[TextBlock(text=str(call.arguments.get("text")))]
        )
