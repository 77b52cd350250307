"""Contracts of the storage command and query streams: the union of every storage command, the
writer's receipt, and (re-exported) every command, result and query by its public name.

Commands carry the ids their sender allocated (``command_id`` and the entity ids), so a command that
is redelivered, retried after a timeout or replayed after a crash has no second effect: the writer
answers with the first result. Run-scoped writes carry a :class:`RunFence`; the writer refuses a
write whose attempt is older than the run's current attempt.

The commands live by entity beside this module — ``storage_sessions`` (sessions, the active
node, agents, artifacts), ``storage_runs`` (a run's life), ``storage_nodes`` (tree and timeline
appends), ``_storage_base`` (the envelope and shared results) — and the queries in
``storage_queries``; import them from here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from agent_core.bus.contracts._base import BusMessage
from agent_core.bus.contracts._replies import CommandResult
from agent_core.bus.contracts._storage_base import EventPlaced, RunFence, RunResult
from agent_core.bus.contracts.assistants import (
    ArchiveAssistant,
    CreateAssistant,
    UpdateAssistant,
)
from agent_core.bus.contracts.refusals import Refusal
from agent_core.bus.contracts.storage_nodes import (
    AppendEvent,
    AppendEventResult,
    AppendNode,
    AppendNodeResult,
)
from agent_core.bus.contracts.storage_queries import (
    STORAGE_QUERY,
    AuditRecord,
    GetActivePath,
    GetArtifact,
    GetNode,
    GetRun,
    GetSession,
    GetSessionUsage,
    GetSessionWithUsage,
    GetTree,
    GetUsage,
    ListAgents,
    ListArtifacts,
    ListAuditEvents,
    ListEvents,
    ListNodes,
    ListRuns,
    ListSessions,
    ListStrandedRuns,
    QueryReply,
    SearchSessions,
    SessionMatch,
    SessionWithUsage,
    StorageQuery,
)
from agent_core.bus.contracts.storage_runs import (
    ClaimRun,
    ClaimRunResult,
    CreateRun,
    CreateRunResult,
    EndRun,
    EndRunResult,
    PlacedNode,
    PlaceMessage,
    UpdateRun,
    UpdateRunResult,
)
from agent_core.bus.contracts.storage_sessions import (
    CreateAgent,
    CreateAgentResult,
    CreateArtifact,
    CreateArtifactResult,
    CreateSession,
    CreateSessionResult,
    DeleteSession,
    DeleteSessionResult,
    SwitchActiveNode,
    SwitchActiveNodeResult,
    UpdateAgent,
    UpdateAgentResult,
    UpdateSession,
    UpdateSessionResult,
)

__all__ = [
    "STORAGE_COMMAND",
    "STORAGE_QUERY",
    "AppendEvent",
    "AppendEventResult",
    "AppendNode",
    "AppendNodeResult",
    "AuditRecord",
    "ClaimRun",
    "ClaimRunResult",
    "CommandReceipt",
    "CommandResult",
    "CreateAgent",
    "CreateAgentResult",
    "CreateArtifact",
    "CreateArtifactResult",
    "CreateRun",
    "CreateRunResult",
    "CreateSession",
    "CreateSessionResult",
    "DeleteSession",
    "DeleteSessionResult",
    "EndRun",
    "EndRunResult",
    "EventPlaced",
    "GetActivePath",
    "GetArtifact",
    "GetSessionUsage",
    "GetSessionWithUsage",
    "GetUsage",
    "GetNode",
    "GetRun",
    "GetSession",
    "GetTree",
    "ListAgents",
    "ListArtifacts",
    "ListAuditEvents",
    "ListEvents",
    "ListNodes",
    "ListRuns",
    "ListStrandedRuns",
    "ListSessions",
    "PlaceMessage",
    "PlacedNode",
    "QueryReply",
    "RunFence",
    "RunResult",
    "SearchSessions",
    "SessionMatch",
    "SessionWithUsage",
    "StorageCommand",
    "StorageQuery",
    "SwitchActiveNode",
    "SwitchActiveNodeResult",
    "UpdateAgent",
    "UpdateAgentResult",
    "UpdateRun",
    "UpdateRunResult",
    "UpdateSession",
    "UpdateSessionResult",
]


StorageCommand = Annotated[
    CreateSession
    | UpdateSession
    | DeleteSession
    | SwitchActiveNode
    | CreateAgent
    | UpdateAgent
    | CreateRun
    | ClaimRun
    | UpdateRun
    | EndRun
    | AppendNode
    | AppendEvent
    | CreateArtifact
    # An account's named agents (contracts.assistants): routed by account, not session.
    | CreateAssistant
    | UpdateAssistant
    | ArchiveAssistant,
    Field(discriminator="type"),
]
STORAGE_COMMAND: TypeAdapter[StorageCommand] = TypeAdapter(StorageCommand)


class CommandReceipt(BusMessage):
    """The writer's answer to one command, sent only after COMMIT.

    ``result`` holds what the writer allocated (``node_seq``, ``seq``, ``run_seq``) as JSON; its
    model is the command's ``result_type`` (``CreateRunResult.of(receipt)`` reads it typed). A
    duplicate command gets the first result again with ``duplicate=True``.
    """

    type: Literal["command_receipt"] = "command_receipt"
    command_id: str
    ok: bool
    duplicate: bool = False
    result: dict[str, Any] = Field(default_factory=dict)
    error: Refusal | None = None
