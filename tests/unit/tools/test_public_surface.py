"""The public surface of agent_core.tools is pinned: changing it is a deliberate act."""

from __future__ import annotations

import agent_core.tools as tools
import agent_core.tools.builtin as builtin


def test_tools_exports() -> None:
    assert sorted(tools.__all__) == [
        "Area",
        "ArtifactSink",
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
    for name in tools.__all__:
        assert getattr(tools, name) is not None


def test_builtin_tool_names() -> None:
    assert sorted(t.name for t in builtin.builtin_tools()) == [
        "edit_file",
        "glob",
        "grep",
        "list_dir",
        "read_file",
        "run_python",
        "write_file",
    ]
