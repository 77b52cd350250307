"""The public surface of agent_core.tools is pinned: changing it is a deliberate act."""

from __future__ import annotations

import agent_core.tools as tools
import agent_core.tools.builtin as builtin


def test_tools_exports() -> None:
    assert sorted(tools.__all__) == [
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
    for name in tools.__all__:
        assert getattr(tools, name) is not None


_FILE_TOOLS = ["edit_file", "glob", "grep", "list_dir", "read_file", "write_file"]


def test_builtin_tool_names() -> None:
    """Code tools come with a runner only; run_command only when turned on."""
    runner = tools.BwrapRunner(tools.SandboxConfig())
    assert sorted(t.name for t in builtin.builtin_tools()) == _FILE_TOOLS
    with_code = builtin.builtin_tools(runner)
    assert sorted(t.name for t in with_code) == sorted([*_FILE_TOOLS, "run_python"])
    every = builtin.builtin_tools(runner, run_command=True)
    assert sorted(t.name for t in every) == sorted([*_FILE_TOOLS, "run_command", "run_python"])
