"""Contracts of the storage query stream: each query, the type of its reply's data
(``reply_of``), the stream's union and the reply. Re-exported by
:mod:`agent_core.bus.contracts.storage`, beside the commands."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from agent_core.bus.contracts._base import SQLITE_INT_MAX, BusMessage
from agent_core.bus.contracts._replies import many, one
from agent_core.bus.contracts.assistants import (
    GetAssistant,
    ListAssistants,
    ListAssistantVersions,
)
from agent_core.errors import ErrorPayload
from agent_core.types.api import TreeNode, UsageRow, UsageTotals
from agent_core.types.enums import SessionStatus
from agent_core.types.queued import QueuedRun
from agent_core.types.storage import (
    AgentRecord,
    ArtifactRecord,
    EventRecord,
    NodeRecord,
    RunRecord,
    SessionRecord,
)


class _Query(BusMessage):
    # Set by the gateway; the writer scopes every lookup by it so that another account's id
    # answers exactly like a missing one. Internal callers (workers) may omit it.
    account_id: str | None = None


class GetSession(_Query):
    """One session."""

    type: Literal["get_session"] = "get_session"
    session_id: str

    def reply_of(self, reply: QueryReply) -> SessionRecord | None:
        """The session's row (``None``: not visible)."""
        return one(SessionRecord, reply)


class ListSessions(_Query):
    """Sessions of an account, newest first, with cursor pagination."""

    type: Literal["list_sessions"] = "list_sessions"
    account_id: str
    status: SessionStatus | None = None
    cursor: str | None = None
    limit: int = Field(default=50, ge=1, le=500)

    def reply_of(self, reply: QueryReply) -> list[SessionRecord]:
        """The page's rows (the next cursor is the reply's)."""
        return many(SessionRecord, reply) or []


class GetActivePath(_Query):
    """Nodes from the root to ``node_id`` (the session's active node when omitted).

    With ``after_node_id`` (the last node of a path the reader already holds) the walk up from the
    tip stops there: if that node is on the path, only the nodes after it are returned (the first
    one's parent is ``after_node_id``; none when it *is* the tip); otherwise the whole path, which
    starts at the root (parent ``None``). Nodes never change once written, so a reader that keeps
    paths reads each node once, not once per turn.
    """

    type: Literal["get_active_path"] = "get_active_path"
    session_id: str
    node_id: str | None = None
    after_node_id: str | None = None

    def reply_of(self, reply: QueryReply) -> list[NodeRecord] | None:
        """The path's node rows, root (or after ``after_node_id``) first; ``None``: no such node."""
        return many(NodeRecord, reply)


class GetTree(_Query):
    """The compact tree: ids, parents, roles, types and short previews."""

    type: Literal["get_tree"] = "get_tree"
    session_id: str

    def reply_of(self, reply: QueryReply) -> list[TreeNode] | None:
        """Every node of the session in ``node_seq`` order."""
        return many(TreeNode, reply)


class GetNode(_Query):
    """One node with its full content."""

    type: Literal["get_node"] = "get_node"
    session_id: str
    node_id: str

    def reply_of(self, reply: QueryReply) -> NodeRecord | None:
        """The node's row."""
        return one(NodeRecord, reply)


class ListNodes(_Query):
    """Nodes with their full content and ``node_seq > after_seq``, in ``node_seq`` order (every
    branch; a session's export reads its whole tree page by page)."""

    type: Literal["list_nodes"] = "list_nodes"
    session_id: str
    after_seq: int = Field(default=0, ge=0, le=SQLITE_INT_MAX)
    limit: int = Field(default=500, ge=1, le=5000)

    def reply_of(self, reply: QueryReply) -> list[NodeRecord] | None:
        """The nodes' rows (a full page: the reply's cursor)."""
        return many(NodeRecord, reply)


class ListEvents(_Query):
    """Timeline events with ``seq > after_seq``, optionally of one run."""

    type: Literal["list_events"] = "list_events"
    session_id: str
    after_seq: int = Field(default=0, ge=0, le=SQLITE_INT_MAX)
    run_id: str | None = None
    limit: int = Field(default=500, ge=1, le=5000)

    def reply_of(self, reply: QueryReply) -> list[EventRecord] | None:
        """The events' rows, by ``seq`` (a full page: the reply's cursor)."""
        return many(EventRecord, reply)


class GetRun(_Query):
    """One run."""

    type: Literal["get_run"] = "get_run"
    run_id: str
    session_id: str | None = None

    def reply_of(self, reply: QueryReply) -> RunRecord | None:
        """The run's row."""
        return one(RunRecord, reply)


class ListRuns(_Query):
    """Runs of a session."""

    type: Literal["list_runs"] = "list_runs"
    session_id: str

    def reply_of(self, reply: QueryReply) -> list[RunRecord] | None:
        """The session's run rows, oldest first."""
        return many(RunRecord, reply)


class ListAgents(_Query):
    """Agents of a session."""

    type: Literal["list_agents"] = "list_agents"
    session_id: str

    def reply_of(self, reply: QueryReply) -> list[AgentRecord] | None:
        """The session's agent rows, oldest first."""
        return many(AgentRecord, reply)


class ListArtifacts(_Query):
    """Artifacts of a session."""

    type: Literal["list_artifacts"] = "list_artifacts"
    session_id: str

    def reply_of(self, reply: QueryReply) -> list[ArtifactRecord] | None:
        """The session's artifact rows, oldest first."""
        return many(ArtifactRecord, reply)


class GetArtifact(_Query):
    """One artifact."""

    type: Literal["get_artifact"] = "get_artifact"
    artifact_id: str
    session_id: str | None = None

    def reply_of(self, reply: QueryReply) -> ArtifactRecord | None:
        """The artifact's row."""
        return one(ArtifactRecord, reply)


class SessionMatch(BaseModel):
    """A session found by :class:`SearchSessions`, with where its newest match is: the node
    (``None``: the title matched) and a snippet with the matched words in ``[``…``]``."""

    session: SessionRecord
    node_id: str | None
    snippet: str


class SearchSessions(_Query):
    """An account's sessions whose title or message text holds every word of ``q``.

    Answered from the account-level index in the catalog (never a scan of the shards): sessions
    by their newest matching text first (a session renamed or written to lately comes first).
    """

    type: Literal["search_sessions"] = "search_sessions"
    account_id: str
    q: str = Field(min_length=1, max_length=500)
    status: SessionStatus | None = None
    limit: int = Field(default=50, ge=1, le=200)

    def reply_of(self, reply: QueryReply) -> list[SessionMatch]:
        """The matching sessions, best first."""
        return many(SessionMatch, reply) or []


class AuditRecord(BaseModel):
    """A row of the catalog's ``account_audit``: an account-level event (``session_deleted``)."""

    seq: int
    event_id: str
    account_id: str
    event_type: str
    session_id: str | None
    payload_json: str | None
    created_at: str


class ListAuditEvents(_Query):
    """An account's audit events, newest first; ``before_seq`` pages back."""

    type: Literal["list_audit_events"] = "list_audit_events"
    account_id: str
    before_seq: int | None = Field(default=None, ge=1, le=SQLITE_INT_MAX)
    limit: int = Field(default=50, ge=1, le=500)

    def reply_of(self, reply: QueryReply) -> list[AuditRecord]:
        """The events' rows, newest first."""
        return many(AuditRecord, reply) or []


class GetUsage(_Query):
    """An account's usage totals by day (UTC) and model, from ``since`` to ``until`` (both
    included; open ends when unset): the storage-writer's kept counters, read by index."""

    type: Literal["get_usage"] = "get_usage"
    account_id: str
    since: dt.date | None = None
    until: dt.date | None = None

    def reply_of(self, reply: QueryReply) -> list[UsageRow]:
        """One row per day and model, oldest day first."""
        return many(UsageRow, reply) or []


class SessionWithUsage(BaseModel):
    """A session's row and its usage totals, read together (:class:`GetSessionWithUsage`)."""

    model_config = ConfigDict(extra="forbid")

    session: SessionRecord
    usage: UsageTotals


class GetSessionWithUsage(_Query):
    """One session and its usage totals in one query: the gateway's ``GET /v1/sessions/{id}``
    asks this rather than :class:`GetSession` and :class:`GetSessionUsage` side by side, which
    cost the bus and the writer twice the round trips of the hottest read."""

    type: Literal["get_session_with_usage"] = "get_session_with_usage"
    session_id: str

    def reply_of(self, reply: QueryReply) -> SessionWithUsage | None:
        """The row and its totals (zeros before a run ends); ``None``: not visible."""
        return one(SessionWithUsage, reply)


class GetSessionUsage(_Query):
    """A session's usage totals (kept counters)."""

    type: Literal["get_session_usage"] = "get_session_usage"
    session_id: str

    def reply_of(self, reply: QueryReply) -> UsageTotals | None:
        """The session's totals (``None``: no such session visible)."""
        return one(UsageTotals, reply)


class ListStrandedRuns(_Query):
    """Runs accepted and never started (``queued``, no attempt claimed) whose row has not
    changed for ``idle_s`` seconds, oldest first, across every session: the runs the bus may
    have lost (a primary that died before replicating an enqueue, a gateway that died between
    recording a run and queueing it). A service query: the run-workers' reconciler asks it."""

    type: Literal["list_stranded_runs"] = "list_stranded_runs"
    idle_s: float = Field(ge=1)
    limit: int = Field(default=100, ge=1, le=1000)

    def reply_of(self, reply: QueryReply) -> list[QueuedRun]:
        """Each run as its queue entry; a failed read raises :class:`StorageError`."""
        return many(QueuedRun, reply) or []


StorageQuery = Annotated[
    GetSession
    | ListSessions
    | SearchSessions
    | ListAuditEvents
    | GetActivePath
    | GetTree
    | GetNode
    | ListNodes
    | ListEvents
    | GetRun
    | ListRuns
    | ListStrandedRuns
    | ListAgents
    | ListArtifacts
    | GetArtifact
    | GetUsage
    | GetSessionUsage
    | GetSessionWithUsage
    | GetAssistant
    | ListAssistants
    | ListAssistantVersions,
    Field(discriminator="type"),
]
STORAGE_QUERY: TypeAdapter[StorageQuery] = TypeAdapter(StorageQuery)


class QueryReply(BusMessage):
    """The answer to a storage query; ``data`` is ``None`` when nothing (visible) matched."""

    type: Literal["query_reply"] = "query_reply"
    ok: bool
    data: Any = None
    next_cursor: str | None = None
    error: ErrorPayload | None = None
