"""API bodies of a session's life beyond chat: search matches, deletion, its export and the
account's audit log. Re-exported by :mod:`agent_core.types.api` (one definition each)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from agent_core.types.protocol import ModelRequest
from agent_core.types.runtime import (
    AgentState,
    ArtifactRef,
    ContextBuildReport,
    Node,
    RunState,
    SessionState,
    TimelineEvent,
)

__all__ = [
    "AuditEvent",
    "AuditList",
    "ModelContext",
    "SessionDeleted",
    "SessionExport",
    "SessionMatch",
]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SessionMatch(_Body):
    """Where a session found by ``q`` matched, newest match first: a message node (``node_id``)
    or its title (``node_id`` ``None``), with a snippet whose matched words are in ``[``…``]``."""

    session_id: str
    node_id: str | None = None
    snippet: str


class SessionDeleted(_Body):
    """A deleted session: what went with it, and the account-level audit event that records it."""

    session_id: str
    deleted_at: str
    audit_event_id: str
    nodes: int
    runs: int
    artifacts: int


class AuditEvent(_Body):
    """An account-level event (``session_deleted``), kept after its session is gone."""

    seq: int
    event_id: str
    event_type: str
    session_id: str | None = None
    payload: dict[str, Any]
    created_at: str


class AuditList(_Body):
    """An account's audit events, newest first; pass ``next_before_seq`` as ``before_seq``."""

    items: list[AuditEvent]
    next_before_seq: int | None = None


class SessionExport(_Body):
    """Everything stored about one session, as JSON: the session, its agents, every node of its
    tree (full content, ``node_seq`` order), its runs, its timeline events (``seq`` order) and
    its artifacts' metadata (the files themselves are downloaded by their URLs)."""

    format: Literal["soong-agent.session-export"] = "soong-agent.session-export"
    version: Literal[1] = 1
    exported_at: str
    session: SessionState
    agents: list[AgentState]
    nodes: list[Node]
    runs: list[RunState]
    events: list[TimelineEvent]
    artifacts: list[ArtifactRef]


class ModelContext(_Body):
    """The model's full context at a node, rebuilt from the tree the way a run-worker builds it
    (the same :class:`~agent_core.context.ContextBuilder`): for an assistant node, the request
    that produced it (built from the path to its parent); for any other node, the request a run
    continuing from it would send. The system prompt and every message are there; the tool
    definitions and skill listing a run adds at its time are not (``request.tools`` is empty)."""

    node_id: str
    built_from_node_id: str
    produced_by_model: bool
    request: ModelRequest
    report: ContextBuildReport
