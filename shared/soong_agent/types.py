"""The types SDK callers handle, re-exported from the server's own modules (one definition each).

Runtime views and events come from :mod:`agent_core.types.runtime`, the API's bodies from
:mod:`agent_core.types.api`, enums from :mod:`agent_core.types.enums`; tasks and memory files from
their domains. Nothing here is a copy: ``soong_agent.types.RunFinished is
agent_core.types.runtime.RunFinished``.
"""

from agent_core.bus.contracts.tasks import TaskDagView, TaskListsView
from agent_core.memory.client import MemoryFile
from agent_core.skills.model import SkillList, SkillProblem, SkillView
from agent_core.types.api import (
    EventList,
    FileEntry,
    Health,
    MessageAccepted,
    Readiness,
    SessionList,
    Tree,
    TreeNode,
    UploadedFile,
)
from agent_core.types.enums import (
    EndReason,
    MultitaskStrategy,
    NodeType,
    PermissionBehavior,
    Role,
    RunStatus,
    SessionStatus,
)
from agent_core.types.protocol import PermissionDecision, PermissionRequest, Usage
from agent_core.types.runtime import (
    AgentConfigOverrides,
    AgentState,
    ArtifactRef,
    ContextBuildReport,
    Node,
    RunError,
    RunFinished,
    RunNodeCreated,
    RunPermissionRequested,
    RunState,
    RunStatusChanged,
    RunTaskChanged,
    RunTextDelta,
    RuntimeEvent,
    RunToolResult,
    RunToolStarted,
    RunUsage,
    SessionState,
    TimelineEvent,
)

__all__ = [
    "AgentConfigOverrides",
    "AgentState",
    "ArtifactRef",
    "ContextBuildReport",
    "EndReason",
    "EventList",
    "FileEntry",
    "Health",
    "MemoryFile",
    "MessageAccepted",
    "MultitaskStrategy",
    "Node",
    "NodeType",
    "PermissionBehavior",
    "PermissionDecision",
    "PermissionRequest",
    "Readiness",
    "Role",
    "RunError",
    "RunFinished",
    "RunNodeCreated",
    "RunPermissionRequested",
    "RunState",
    "RunStatus",
    "RunStatusChanged",
    "RunTaskChanged",
    "RunTextDelta",
    "RunToolResult",
    "RunToolStarted",
    "RunUsage",
    "RuntimeEvent",
    "SessionList",
    "SkillList",
    "SkillProblem",
    "SkillView",
    "SessionState",
    "SessionStatus",
    "TaskDagView",
    "TaskListsView",
    "TimelineEvent",
    "Tree",
    "TreeNode",
    "UploadedFile",
    "Usage",
]
