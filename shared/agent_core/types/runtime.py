"""Runtime types: what the loop, the services and SDK callers handle (layer 2 of three).

Timestamps are timezone-aware UTC datetimes; JSON is parsed; ids are validated prefixed strings.
The runtime views of stored rows (:class:`SessionState`, :class:`AgentState`, :class:`RunState`,
:class:`Node`, :class:`TimelineEvent`, :class:`ArtifactRef`) are built from the storage records
through :mod:`agent_core.types.mappers` only (one direction: the writer writes rows itself);
nothing here knows a SQLite row.

Task DAG types (:class:`Task`, :class:`TaskDAG`, :class:`TaskWalEvent`) are defined in
:mod:`agent_core.types.tasks` (the task domain, :mod:`agent_core.tasks`, builds on them) and
re-exported here, so there is one definition of each.
A plan is a Markdown file in the project, so :data:`Plan` is the task domain's reference to one.
"""

from __future__ import annotations

from pydantic import Field

from agent_core.types._agent_config import (
    SESSION_CONFIG_KEY,
    AgentConfig,
    AgentConfigOverrides,
    ContextPolicy,
    RunBudget,
    ToolPolicy,
    merge_overrides,
    overrides_from,
)
from agent_core.types._fields import AgentId, NodeId, RunId, SessionId, Strict, TaskId
from agent_core.types._runtime_events import (
    RUNTIME_EVENT,
    RunError,
    RunFinished,
    RunNodeCreated,
    RunPermissionRequested,
    RunPhase,
    RunStatusChanged,
    RunTaskChanged,
    RunTextDelta,
    RuntimeEvent,
    RunToolResult,
    RunToolStarted,
    RunUsage,
)
from agent_core.types._state import (
    AgentState,
    ArtifactRef,
    ChildAgentResult,
    Node,
    RunEnd,
    RunHandle,
    RunState,
    SessionState,
    TimelineEvent,
)
from agent_core.types._usage import UsageTotals
from agent_core.types.enums import NodeType
from agent_core.types.tasks import PlanRef, Task, TaskDAG, TaskStatus, TaskWalEvent

__all__ = [
    "RUNTIME_EVENT",
    "UsageTotals",
    "SESSION_CONFIG_KEY",
    "AgentConfig",
    "AgentConfigOverrides",
    "AgentState",
    "ArtifactRef",
    "ChildAgentResult",
    "ContextBudget",
    "ContextBuildReport",
    "ContextPolicy",
    "DroppedNode",
    "InjectedContext",
    "Node",
    "Plan",
    "RunBudget",
    "RunEnd",
    "RunError",
    "RunFinished",
    "RunHandle",
    "RunNodeCreated",
    "RunPermissionRequested",
    "RunPhase",
    "RunState",
    "RunStatusChanged",
    "RunTaskChanged",
    "RunTextDelta",
    "RunToolResult",
    "RunToolStarted",
    "RunUsage",
    "RuntimeEvent",
    "SessionState",
    "Task",
    "TaskDAG",
    "TaskStep",
    "TaskWalEvent",
    "TimelineEvent",
    "ToolPolicy",
    "merge_overrides",
    "overrides_from",
]

Plan = PlanRef
"""A plan: a Markdown file in the project, read and written with the file tools."""


class TaskStep(Strict):
    """One step of a task's execution, as a task board or an inspector shows it.

    Steps are a view, not DAG state: the Task WAL records task changes, and a step's ``status``
    uses the task statuses so the two vocabularies cannot drift apart.
    """

    task_id: TaskId
    index: int = Field(ge=0)
    title: str = Field(min_length=1, max_length=500)
    status: TaskStatus = TaskStatus.PENDING
    agent_id: AgentId | None = None
    run_id: RunId | None = None


class InjectedContext(Strict):
    """Synthetic context put into a model request (memory, skills, task board, …)."""

    node_type: NodeType
    source: str = Field(min_length=1, description="where it came from, e.g. 'memory:user.md'")
    token_estimate: int = Field(default=0, ge=0)
    node_id: NodeId | None = None


class DroppedNode(Strict):
    """A node of the active path left out of the context, and why (compacted, over budget, …)."""

    node_id: NodeId
    reason: str = Field(min_length=1)


class ContextBudget(Strict):
    """The token budget of one model request and what uses it (estimates, calibrated).

    ``input_budget`` is the window minus the output reserve; ``compact_at`` the size past which
    the loop compacts. ``system`` counts the agent's prompt and the skill listing, ``pinned`` the
    context kept through compactions (memory, skills, task board, plan, pinned user messages and
    the summary), ``history`` the conversation's messages, ``tools`` the tool definitions.
    ``ratio``: the calibration factor the raw estimates were multiplied by.
    """

    context_window: int = Field(ge=1)
    output_reserve: int = Field(ge=0)
    input_budget: int = Field(ge=0)
    compact_at: int = Field(ge=0)
    system: int = Field(default=0, ge=0)
    pinned: int = Field(default=0, ge=0)
    history: int = Field(default=0, ge=0)
    tools: int = Field(default=0, ge=0)
    total: int = Field(default=0, ge=0)
    estimated: int = Field(default=0, ge=0, description="total before calibration")
    ratio: float = Field(default=1.0, gt=0)


class ContextBuildReport(Strict):
    """What the context builder put into one model request, for inspection and tests.

    ``node_ids`` are in context order (root first); ``token_estimate`` covers them plus ``injected``.
    """

    session_id: SessionId
    agent_id: AgentId
    run_id: RunId | None = None
    active_node_id: NodeId | None = None
    node_ids: list[NodeId] = Field(default_factory=list)
    token_estimate: int = Field(default=0, ge=0)
    injected: list[InjectedContext] = Field(default_factory=list)
    dropped: list[DroppedNode] = Field(default_factory=list)
    # Skills: those named (with their descriptions only) in the skill listing, and those whose
    # bodies are in the context (their skill_context nodes), in the order they were loaded.
    skills_listed: list[str] = Field(default_factory=list)
    skills_loaded: list[str] = Field(default_factory=list)
    # The budget and its use; the compaction node in effect and how many nodes it stands for.
    budget: ContextBudget | None = None
    # Enabled tools whose definitions were not sent: they did not fit a small window's share.
    tools_left_out: list[str] = Field(default_factory=list)
    compaction_node_id: NodeId | None = None
    compacted: int = Field(default=0, ge=0)
