"""Runtime state of sessions, agents, runs, nodes, artifacts and timeline events.

Private: import these names from :mod:`agent_core.types.runtime`. Each type here is the runtime
view of one storage record (see :mod:`agent_core.types.mappers`): parsed JSON instead of ``*_json``
text, timezone-aware UTC datetimes instead of ISO strings, ``metadata`` dicts instead of NULL.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from agent_core.ids import new_id
from agent_core.types._fields import (
    AccountId,
    AgentId,
    AnyErrorPayload,
    ArtifactId,
    EventId,
    LogicalPath,
    NodeId,
    RunId,
    SessionId,
    Strict,
    ToolCallId,
    UtcDatetime,
    utc_now,
)
from agent_core.types._usage import UsageTotals
from agent_core.types.enums import (
    TERMINAL_RUN_STATUSES,
    AgentStatus,
    AgentType,
    EndReason,
    EventLevel,
    EventType,
    NodeType,
    Role,
    RunStatus,
    SessionStatus,
)
from agent_core.types.protocol import ArtifactRefBlock, ContentBlock, Usage

__all__ = [
    "AgentState",
    "ArtifactRef",
    "ChildAgentResult",
    "Node",
    "RunEnd",
    "RunHandle",
    "RunState",
    "SessionState",
    "TimelineEvent",
]


class SessionState(Strict):
    """A session: the container of one agent tree, owned by one account."""

    session_id: SessionId
    account_id: AccountId
    cwd: str
    root_agent_id: AgentId
    active_node_id: NodeId | None = None
    parent_session_id: SessionId | None = None
    status: SessionStatus = SessionStatus.ACTIVE
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: UtcDatetime = Field(default_factory=utc_now)
    updated_at: UtcDatetime = Field(default_factory=utc_now)
    # The session's usage totals: on the session's own GET (kept counters), not in listings.
    usage: UsageTotals | None = None


class ChildAgentResult(Strict):
    """What an agent's run hands back to whoever started it (stored as ``agents.result_json``)."""

    agent_id: AgentId
    run_id: RunId
    status: RunStatus
    end_reason: EndReason | None = None
    text: str = ""
    data: Any = None
    artifact_ids: list[ArtifactId] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    turns: int = Field(default=0, ge=0)
    error: AnyErrorPayload | None = None


class AgentState(Strict):
    """An agent of a session; ``metadata["purpose"]`` says what a sub agent is for."""

    agent_id: AgentId
    session_id: SessionId
    parent_agent_id: AgentId | None = None
    agent_type: AgentType
    created_by_run_id: RunId | None = None
    fork_from_node_id: NodeId | None = None
    status: AgentStatus = AgentStatus.IDLE
    result: ChildAgentResult | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: UtcDatetime = Field(default_factory=utc_now)
    updated_at: UtcDatetime = Field(default_factory=utc_now)


class RunHandle(Strict):
    """The address of one attempt at a run: ``(run_id, attempt)`` is the fencing token.

    ``attempt`` is 0 for a run that no worker has taken yet; each take-over increments it.
    """

    run_id: RunId
    session_id: SessionId
    agent_id: AgentId
    attempt: int = Field(default=0, ge=0)


class RunEnd(Strict):
    """How a run ended: the one shape of a run's end.

    The loop and the run-worker build it, the storage-writer's ``end_run`` command records it
    (the run row and its one terminal event, in one transaction), ``run_finished`` announces it.
    ``turns`` and ``usage`` are what the run did until it ended; ``last_node_id`` is the node it
    ended on; ``error`` is the redacted reason of a ``failed`` run.
    """

    status: RunStatus
    end_reason: EndReason
    turns: int = Field(default=0, ge=0)
    usage: Usage = Field(default_factory=Usage)
    error: AnyErrorPayload | None = None
    last_node_id: NodeId | None = None

    @model_validator(mode="after")
    def _terminal(self) -> RunEnd:
        if self.status not in TERMINAL_RUN_STATUSES:
            raise ValueError(f"a run ends in a terminal status, not {self.status.value!r}")
        return self


class RunState(Strict):
    """The serialisable state of a run's loop, and the runtime view of a ``runs`` row.

    ``last_node_id`` is the last node the run made durable (``runs.end_node_id``): recovery resumes
    from it. ``turn`` counts completed model turns (``runs.turn_count``).
    """

    run_id: RunId
    session_id: SessionId
    agent_id: AgentId
    attempt: int = Field(default=0, ge=0)
    status: RunStatus = RunStatus.QUEUED
    turn: int = Field(default=0, ge=0)
    usage: Usage = Field(default_factory=Usage)
    end_reason: EndReason | None = None
    error: AnyErrorPayload | None = None
    start_node_id: NodeId | None = None
    last_node_id: NodeId | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: UtcDatetime = Field(default_factory=utc_now)
    updated_at: UtcDatetime = Field(default_factory=utc_now)

    @property
    def is_terminal(self) -> bool:
        """Whether the run has reached a terminal status."""
        return self.status in TERMINAL_RUN_STATUSES

    def handle(self) -> RunHandle:
        """The :class:`RunHandle` of this attempt."""
        return RunHandle(
            run_id=self.run_id,
            session_id=self.session_id,
            agent_id=self.agent_id,
            attempt=self.attempt,
        )


class Node(Strict):
    """One node of a session's conversation tree: typed content blocks under a role and node type.

    The one model of a node, in the runtime and on the bus: a node sent to be appended is this
    model with the writer's fields unset (``node_seq`` ``None``; the writer allocates it and
    stamps its own ``created_at``); a stored node always has a ``node_seq``.
    """

    node_id: NodeId
    node_seq: int | None = Field(default=None, ge=0)
    parent_id: NodeId | None = None
    agent_id: AgentId
    run_id: RunId | None = None
    role: Role
    node_type: NodeType = NodeType.MESSAGE
    content: list[ContentBlock]
    metadata: dict[str, Any] = Field(default_factory=dict)
    token_count: int | None = Field(default=None, ge=0, le=2**63 - 1)  # SQLite's INTEGER
    created_at: UtcDatetime = Field(default_factory=utc_now)

    @classmethod
    def of_run(
        cls,
        handle: RunHandle,
        parent_id: str | None,
        role: Role,
        content: list[ContentBlock],
        *,
        node_type: NodeType = NodeType.MESSAGE,
        metadata: dict[str, Any] | None = None,
    ) -> Node:
        """A new node of run ``handle`` under ``parent_id``: a fresh id, no ``node_seq`` yet
        (the storage-writer allocates it when the node is appended)."""
        return cls(
            node_id=new_id("node"),
            parent_id=parent_id,
            agent_id=handle.agent_id,
            run_id=handle.run_id,
            role=role,
            node_type=node_type,
            content=content,
            metadata=dict(metadata or {}),
        )


class ArtifactRef(Strict):
    """An artifact with its provenance; a content block refers to it by id only.

    The one model of an artifact, in the runtime and on the bus: an artifact sent to be registered
    (``CreateArtifact``) is this model with the writer's field unset (the writer stamps its own
    ``created_at``).
    """

    artifact_id: ArtifactId
    session_id: SessionId
    agent_id: AgentId | None = None
    run_id: RunId | None = None
    node_id: NodeId | None = None
    tool_call_id: ToolCallId | None = None
    # Workspace-relative (``output/report.md``) or a file-store key (``artifacts/<s>/<id>.json``).
    path: LogicalPath
    filename: str | None = None
    mime_type: str | None = None
    size_bytes: int | None = Field(default=None, ge=0, le=2**63 - 1)  # SQLite's INTEGER
    summary: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: UtcDatetime = Field(default_factory=utc_now)

    def to_block(self) -> ArtifactRefBlock:
        """The ``artifact_ref`` content block of this artifact (id plus display fields only)."""
        return ArtifactRefBlock(
            artifact_id=self.artifact_id,
            summary=self.summary,
            mime_type=self.mime_type,
            filename=self.filename,
        )


class TimelineEvent(Strict):
    """One timeline event of a session: a row of ``events_<session_id>``, parsed.

    The one model of an event, in the runtime and on the bus: an event sent to be written is this
    model with the writer's fields unset (``seq`` and ``run_seq`` ``None``; the writer allocates
    them and stamps its own ``created_at``); a stored event always has a ``seq``, and a run's
    event a ``run_seq``. Ordered by ``seq`` in the session and ``run_seq`` within a run, never by
    ``created_at``.
    """

    event_id: EventId
    seq: int | None = Field(default=None, ge=0)
    run_seq: int | None = Field(default=None, ge=0)
    agent_id: AgentId | None = None
    run_id: RunId | None = None
    level: EventLevel = EventLevel.INFO
    event_type: EventType
    node_id: NodeId | None = None
    tool_call_id: ToolCallId | None = None
    payload: dict[str, Any] = Field(default_factory=dict)
    created_at: UtcDatetime = Field(default_factory=utc_now)
