"""Storage commands of a session and what hangs off it: the session itself, its active node, its
agents and its artifacts.

Each command names its result model (``result_type``); the union of every storage command is
:mod:`agent_core.bus.contracts.storage`'s, which re-exports these names.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from agent_core.bus.contracts._replies import CommandResult, ResultType
from agent_core.bus.contracts._storage_base import EventPlaced, RunFence, _Command
from agent_core.types._fields import LogicalPath
from agent_core.types.enums import AgentStatus, AgentType, SessionStatus
from agent_core.types.runtime import ArtifactRef

__all__ = [
    "CreateAgent",
    "CreateAgentResult",
    "CreateArtifact",
    "CreateArtifactResult",
    "CreateSession",
    "CreateSessionResult",
    "DeleteSession",
    "DeleteSessionResult",
    "SwitchActiveNode",
    "SwitchActiveNodeResult",
    "UpdateAgent",
    "UpdateAgentResult",
    "UpdateSession",
    "UpdateSessionResult",
]


class CreateSessionResult(EventPlaced):
    """:class:`CreateSession`'s result: the session and its ``session_created`` event."""

    session_id: str
    created_at: str


class CreateSession(_Command):
    """Create a session, its two per-session tables, its root agent and a ``session_created`` event.

    ``root_agent_type`` ``orchestrator`` starts the session in orchestrator mode: its
    root agent plans and delegates to worker sub-agents instead of doing the work itself.
    """

    type: Literal["create_session"] = "create_session"
    result_type: ClassVar[ResultType] = CreateSessionResult
    account_id: str = Field(min_length=1, max_length=64)
    cwd: LogicalPath  # the project by logical name (agent_core.tools.projects), never a folder
    root_agent_id: str
    root_agent_type: Literal[AgentType.MAIN, AgentType.ORCHESTRATOR] = AgentType.MAIN
    parent_session_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class UpdateSessionResult(CommandResult):
    """:class:`UpdateSession`'s result."""

    session_id: str
    updated_at: str


class UpdateSession(_Command):
    """Change a session's status or metadata (``None`` leaves a field as it is)."""

    type: Literal["update_session"] = "update_session"
    result_type: ClassVar[ResultType] = UpdateSessionResult
    status: SessionStatus | None = None
    metadata: dict[str, Any] | None = None


class DeleteSessionResult(CommandResult):
    """:class:`DeleteSession`'s result: what was removed and the account-level audit event."""

    session_id: str
    deleted_at: str
    audit_event_id: str
    nodes: int
    runs: int
    artifacts: int


class DeleteSession(_Command):
    """Delete a session: its rows (session, agents, runs, artifacts, receipts), its two tables,
    its rows in the account's search index, and the writer's own files of it (offloaded JSON).

    Refused with ``runs_active`` while any run of the session has not ended (the caller cancels
    them first), and with ``session_not_found`` unless the session is ``account_id``'s. Writes a
    ``session_deleted`` event to the account's audit log (the session's own timeline goes with
    it). The session's workspace is the file layer's, removed by the sender after the receipt.
    """

    type: Literal["delete_session"] = "delete_session"
    result_type: ClassVar[ResultType] = DeleteSessionResult
    account_id: str = Field(min_length=1, max_length=64)


class SwitchActiveNodeResult(CommandResult):
    """:class:`SwitchActiveNode`'s result."""

    session_id: str
    active_node_id: str


class SwitchActiveNode(_Command):
    """Move a session's active node; the target must be a node of that session."""

    type: Literal["switch_active_node"] = "switch_active_node"
    result_type: ClassVar[ResultType] = SwitchActiveNodeResult
    node_id: str


class CreateAgentResult(CommandResult):
    """:class:`CreateAgent`'s result."""

    agent_id: str
    created_at: str


class CreateAgent(_Command):
    """Create an agent of the session."""

    type: Literal["create_agent"] = "create_agent"
    result_type: ClassVar[ResultType] = CreateAgentResult
    agent_id: str
    agent_type: AgentType
    parent_agent_id: str | None = None
    created_by_run_id: str | None = None
    fork_from_node_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class UpdateAgentResult(CommandResult):
    """:class:`UpdateAgent`'s result."""

    agent_id: str
    updated_at: str


class UpdateAgent(_Command):
    """Change an agent's status, result or metadata."""

    type: Literal["update_agent"] = "update_agent"
    result_type: ClassVar[ResultType] = UpdateAgentResult
    agent_id: str
    status: AgentStatus | None = None
    result: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    fence: RunFence | None = None


class CreateArtifactResult(CommandResult):
    """:class:`CreateArtifact`'s result."""

    artifact_id: str
    created_at: str


class CreateArtifact(_Command):
    """Register a file as an artifact of the session.

    ``artifact`` is the artifact itself, the one model of it (:class:`ArtifactRef`), with the
    writer's field unset: the writer stamps its own ``created_at``. Its ``session_id`` is the
    command's.
    """

    type: Literal["create_artifact"] = "create_artifact"
    result_type: ClassVar[ResultType] = CreateArtifactResult
    artifact: ArtifactRef
    fence: RunFence | None = None

    @model_validator(mode="after")
    def _of_this_session(self) -> CreateArtifact:
        if self.artifact.session_id != self.session_id:
            raise ValueError("the artifact belongs to the command's session (session_id)")
        return self
