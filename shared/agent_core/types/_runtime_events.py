"""Runtime events: what a run appends to its Redis event stream, served to clients as SSE.

Private: import these names from :mod:`agent_core.types.runtime`. One strict discriminated union on
``type`` (:data:`RuntimeEvent`, validated by :data:`RUNTIME_EVENT`). Every event names its run and
session (a parent's stream also carries its child runs' events, told apart by ``run_id``) and holds
enough for a client to render it without another request. The stream entry id is the SSE event id,
so events carry no sequence number of their own.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, model_validator

from agent_core.types._fields import (
    AgentId,
    AnyErrorPayload,
    NodeId,
    RunId,
    SessionId,
    Strict,
    ToolCallId,
    UtcDatetime,
    utc_now,
)
from agent_core.types._state import Node, RunEnd, RunHandle
from agent_core.types.enums import TERMINAL_RUN_STATUSES, EndReason, RunStatus
from agent_core.types.protocol import PermissionRequest, ToolResultContent, Usage

__all__ = [
    "RUNTIME_EVENT",
    "RunError",
    "RunFinished",
    "RunNodeCreated",
    "RunPermissionRequested",
    "RunPhase",
    "RunStatusChanged",
    "RunTaskChanged",
    "RunTextDelta",
    "RunToolResult",
    "RunToolStarted",
    "RunUsage",
    "RuntimeEvent",
]


class _RunEvent(Strict):
    run_id: RunId
    session_id: SessionId
    agent_id: AgentId | None = None
    created_at: UtcDatetime = Field(default_factory=utc_now)


class RunTextDelta(_RunEvent):
    """Assistant text streamed so far in this turn, coalesced from many provider deltas.

    ``turn`` is the model turn, counted from 1 as in the ``phase`` events (0 only in events of
    runs streamed before that was so). ``attempt`` is the attempt that streamed it and ``offset`` where in the turn's text it goes
    (``None``, from a server that did not say: after the text so far). A run taken over after its
    worker was lost streams the turn again: its new attempt's first delta says where the text
    restarts (``offset`` 0), so a client drops what it holds of the turn past ``offset`` instead
    of showing the text twice.
    """

    type: Literal["text_delta"] = "text_delta"
    turn: int = Field(ge=0)
    text: str
    attempt: int = Field(default=1, ge=1)
    offset: int | None = Field(default=None, ge=0)


class RunToolStarted(_RunEvent):
    """A tool call began executing."""

    type: Literal["tool_started"] = "tool_started"
    tool_call_id: ToolCallId
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class RunToolResult(_RunEvent):
    """A tool call finished; ``is_error`` marks a failure (the result is still a normal result)."""

    type: Literal["tool_result"] = "tool_result"
    tool_call_id: ToolCallId
    name: str
    is_error: bool = False
    content: list[ToolResultContent] = Field(default_factory=list)


class RunNodeCreated(_RunEvent):
    """A node became durable (the storage-writer committed it)."""

    type: Literal["node_created"] = "node_created"
    node: Node


class RunStatusChanged(_RunEvent):
    """The run moved from ``previous`` to ``status`` (``attempt`` tells a take-over apart)."""

    type: Literal["run_status_changed"] = "run_status_changed"
    status: RunStatus
    previous: RunStatus | None = None
    attempt: int = Field(default=0, ge=0)


class RunUsage(_RunEvent):
    """Token usage of the last model response and the run's total so far."""

    type: Literal["usage"] = "usage"
    usage: Usage
    total: Usage


class RunPhase(_RunEvent):
    """What the run is doing now, for an activity area: ``model`` — it waits for the model's
    answer; ``streaming`` — the answer is arriving; ``tools`` — ``tools`` tool calls run;
    ``files`` — it waits for the file store, which cannot be reached now, to bring or take the
    session's files (it retries until the store answers). In model turn ``turn`` of at most
    ``max_turns``. (Waiting for a person is the run's ``pending`` status.) A phase that a later
    one replaced before it was sent may be left out."""

    type: Literal["phase"] = "phase"
    phase: Literal["model", "streaming", "tools", "files"]
    turn: int = Field(ge=1)
    max_turns: int = Field(ge=1)
    tools: int = Field(default=0, ge=0)


class RunPermissionRequested(_RunEvent):
    """A tool call waits for a person's decision."""

    type: Literal["permission_requested"] = "permission_requested"
    request: PermissionRequest


class RunTaskChanged(_RunEvent):
    """A task list changed through a task tool (the board itself is a ``task_board`` node)."""

    type: Literal["task_changed"] = "task_changed"
    list_name: str
    change: str
    task_id: str | None = None
    tool_call_id: ToolCallId | None = None


class RunError(_RunEvent):
    """An error during the run; ``fatal`` errors are followed by :class:`RunFinished`."""

    type: Literal["error"] = "error"
    error: AnyErrorPayload
    fatal: bool = False


class RunFinished(_RunEvent):
    """The last event of a run's stream: the terminal status, why, and what it cost."""

    type: Literal["run_finished"] = "run_finished"
    status: Annotated[RunStatus, Field(description="a terminal status")]
    end_reason: EndReason | None = None
    turns: int = Field(default=0, ge=0)
    usage: Usage = Field(default_factory=Usage)
    error: AnyErrorPayload | None = None
    last_node_id: NodeId | None = None

    @classmethod
    def of(cls, handle: RunHandle, end: RunEnd) -> RunFinished:
        """The ``run_finished`` event of ``handle``'s run that ended as ``end``."""
        return cls(
            run_id=handle.run_id,
            session_id=handle.session_id,
            agent_id=handle.agent_id,
            **{name: getattr(end, name) for name in RunEnd.model_fields},
        )

    @model_validator(mode="after")
    def _terminal(self) -> RunFinished:
        # A stream that ends must say how the run ended.
        if self.status not in TERMINAL_RUN_STATUSES:
            raise ValueError(f"run_finished needs a terminal status, got {self.status.value!r}")
        return self


RuntimeEvent = Annotated[
    RunTextDelta
    | RunToolStarted
    | RunToolResult
    | RunNodeCreated
    | RunStatusChanged
    | RunUsage
    | RunPhase
    | RunPermissionRequested
    | RunTaskChanged
    | RunError
    | RunFinished,
    Field(discriminator="type"),
]
RUNTIME_EVENT: TypeAdapter[RuntimeEvent] = TypeAdapter(RuntimeEvent)
