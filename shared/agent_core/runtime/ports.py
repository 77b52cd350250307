"""The small interfaces the agent loop depends on; the run-worker supplies bus-backed ones.

Nothing here knows Redis or SQLite: a test can run the loop with in-memory implementations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent_core.errors import ErrorPayload
from agent_core.types.enums import EndReason, EventLevel, EventType, RunStatus
from agent_core.types.protocol import ToolCall, ToolDefinition, ToolResult, Usage
from agent_core.types.runtime import Node, RuntimeEvent

__all__ = ["EventSink", "RunOutcome", "RunStore", "ToolRunner"]


class RunStore(Protocol):
    """Durable writes of one run attempt (fenced by the implementation)."""

    async def append_node(
        self,
        node: Node,
        *,
        payload: dict[str, Any] | None = None,
        finish: RunOutcome | None = None,
    ) -> Node:
        """Persist ``node`` with its ``node_created`` event in one transaction; return it with its
        seq. With ``finish`` the same transaction records the run's end (``finish`` with
        ``last_node_id`` = this node) and its final timeline event."""
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


@dataclass
class RunOutcome:
    """How a run ended; the executor writes it to the run record and the event stream."""

    status: RunStatus
    end_reason: EndReason
    usage: Usage = field(default_factory=Usage)
    turns: int = 0
    last_node_id: str | None = None
    error: ErrorPayload | None = None
    final_text: str = ""
    # The run record and final timeline event were written with the last node (by the store's
    # ``append_node(finish=…)``); what is left is to announce the end.
    recorded: bool = False
