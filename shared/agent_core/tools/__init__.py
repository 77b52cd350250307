"""Agent tools: session workspace, path routing, tool framework and built-in tools.

A runtime builds one :class:`ToolRegistry` (``ToolRegistry(builtin_tools(...))``), one
:class:`Workspace` per session and one :class:`ToolExecutor` per run, injecting a
:class:`PermissionGate` (with its broker) and an :class:`ArtifactSink`.
"""

from agent_core.tools.artifacts import ArtifactSink, MemoryArtifactSink, OutputFile, SavedToolOutput
from agent_core.tools.base import Tool, ToolArgs, ToolContext, ToolOutput
from agent_core.tools.builtin import builtin_tools
from agent_core.tools.executor import ExecutorSettings, ToolExecutor
from agent_core.tools.paths import (
    Area,
    InvalidPathError,
    PathErrorCode,
    PathEscapeError,
    SessionPath,
    WriteProtectedError,
)
from agent_core.tools.permissions import PermissionBroker, PermissionGate, PermissionRules
from agent_core.tools.registry import ToolRegistry
from agent_core.tools.sandbox import (
    BwrapRunner,
    CodeRunner,
    DirectRunner,
    SandboxConfig,
    SandboxLimits,
)
from agent_core.tools.workspace import Workspace

__all__ = [
    "Area",
    "ArtifactSink",
    "BwrapRunner",
    "CodeRunner",
    "DirectRunner",
    "ExecutorSettings",
    "InvalidPathError",
    "MemoryArtifactSink",
    "OutputFile",
    "PathErrorCode",
    "PathEscapeError",
    "PermissionBroker",
    "PermissionGate",
    "PermissionRules",
    "SandboxConfig",
    "SandboxLimits",
    "SavedToolOutput",
    "SessionPath",
    "Tool",
    "ToolArgs",
    "ToolContext",
    "ToolExecutor",
    "ToolOutput",
    "ToolRegistry",
    "Workspace",
    "WriteProtectedError",
    "builtin_tools",
]
