"""Storage types: one record per SQLite table row (layer 3 of three).

Fields follow the table columns exactly: JSON columns keep their ``*_json`` names and hold JSON
text (or ``None`` for SQL NULL), timestamps are ISO-8601 strings with an offset, normalised to the
fixed-width UTC form of :func:`agent_core.types._fields.to_iso` so that they sort as text. Status
columns are the shared enums. Ids are validated (prefix and safe body); ``session_id`` must be one
the core could have generated, since it becomes part of table names.

Records do not parse their JSON columns: that is the mappers' job (:mod:`agent_core.types.mappers`).
Besides the design's columns: ``sessions.account_id``, ``runs.attempt`` and
``runs.claim_command_id``.
"""

from __future__ import annotations

from pydantic import Field

from agent_core.types._fields import (
    AccountId,
    AgentId,
    ArtifactId,
    EventId,
    IsoTimestamp,
    NodeId,
    RunId,
    SessionId,
    Strict,
    ToolCallId,
)
from agent_core.types.enums import (
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

__all__ = [
    "AgentRecord",
    "ArtifactRecord",
    "EventRecord",
    "NodeRecord",
    "RunRecord",
    "SessionRecord",
]


class SessionRecord(Strict):
    """A row of ``sessions``: the container of one agent tree."""

    session_id: SessionId
    account_id: AccountId
    cwd: str
    root_agent_id: AgentId
    active_node_id: NodeId | None = None
    parent_session_id: SessionId | None = None
    status: SessionStatus
    metadata_json: str | None = None
    created_at: IsoTimestamp
    updated_at: IsoTimestamp


class AgentRecord(Strict):
    """A row of ``agents``: one agent (main, orchestrator, sub or fork) of a session."""

    agent_id: AgentId
    session_id: SessionId
    parent_agent_id: AgentId | None = None
    agent_type: AgentType
    created_by_run_id: RunId | None = None
    fork_from_node_id: NodeId | None = None
    status: AgentStatus
    result_json: str | None = None
    metadata_json: str | None = None
    created_at: IsoTimestamp
    updated_at: IsoTimestamp


class RunRecord(Strict):
    """A row of ``runs``: one loop execution of an agent.

    ``attempt`` is the fencing counter: 0 while queued, incremented each time a
    worker takes the run; the storage-writer refuses writes from an older attempt.
    ``end_node_id`` is the last durable node of the run (final once the run is terminal).
    ``claim_command_id`` is the storage command that claimed the current attempt (how the writer
    recognises that claim repeated; internal, not part of the run's API view).
    """

    run_id: RunId
    session_id: SessionId
    agent_id: AgentId
    status: RunStatus
    attempt: int = Field(default=0, ge=0)
    start_node_id: NodeId | None = None
    end_node_id: NodeId | None = None
    end_reason: EndReason | None = None
    turn_count: int | None = Field(default=None, ge=0)
    usage_json: str | None = None
    error_json: str | None = None
    metadata_json: str | None = None
    created_at: IsoTimestamp
    updated_at: IsoTimestamp
    claim_command_id: str | None = None


class NodeRecord(Strict):
    """A row of ``nodes_<session_id>``; ``node_seq`` is allocated by the storage-writer alone."""

    node_id: NodeId
    node_seq: int = Field(ge=0)
    parent_id: NodeId | None = None
    agent_id: AgentId
    run_id: RunId | None = None
    role: Role
    node_type: NodeType
    content_json: str
    metadata_json: str | None = None
    token_count: int | None = Field(default=None, ge=0)
    created_at: IsoTimestamp


class EventRecord(Strict):
    """A row of ``events_<session_id>``: ``seq`` orders the session timeline, ``run_seq`` a run."""

    event_id: EventId
    seq: int = Field(ge=0)
    run_seq: int | None = Field(default=None, ge=0)
    agent_id: AgentId | None = None
    run_id: RunId | None = None
    level: EventLevel
    event_type: EventType
    node_id: NodeId | None = None
    tool_call_id: ToolCallId | None = None
    payload_json: str | None = None
    created_at: IsoTimestamp


class ArtifactRecord(Strict):
    """A row of ``artifacts``: the only place that knows an artifact's path, size and provenance."""

    artifact_id: ArtifactId
    session_id: SessionId
    agent_id: AgentId | None = None
    run_id: RunId | None = None
    node_id: NodeId | None = None
    tool_call_id: ToolCallId | None = None
    path: str = Field(min_length=1)
    filename: str | None = None
    mime_type: str | None = None
    size_bytes: int | None = Field(default=None, ge=0)
    summary: str | None = None
    metadata_json: str | None = None
    created_at: IsoTimestamp
