"""The built-in tools: files, search and Python execution."""

from __future__ import annotations

from typing import Any

from agent_core.tools.base import Tool
from agent_core.tools.builtin.files import EditFileTool, ReadFileTool, WriteFileTool
from agent_core.tools.builtin.python import RunPythonTool
from agent_core.tools.builtin.search import GlobTool, GrepTool, ListDirTool
from agent_core.tools.sandbox import SandboxConfig, SandboxLimits

__all__ = [
    "EditFileTool",
    "GlobTool",
    "GrepTool",
    "ListDirTool",
    "ReadFileTool",
    "RunPythonTool",
    "WriteFileTool",
    "builtin_tools",
]


def builtin_tools(
    *, sandbox_limits: SandboxLimits | None = None, sandbox_config: SandboxConfig | None = None
) -> list[Tool[Any]]:
    """A fresh instance of every built-in tool (for a per-runtime ``ToolRegistry``)."""
    return [
        ReadFileTool(),
        WriteFileTool(),
        EditFileTool(),
        ListDirTool(),
        GlobTool(),
        GrepTool(),
        RunPythonTool(sandbox_limits, sandbox_config),
    ]
