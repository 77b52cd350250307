"""The built-in tools: files, search and code (Python, shell) in the sandbox."""

from __future__ import annotations

from typing import Any

from agent_core.tools.base import Tool
from agent_core.tools.builtin.files import EditFileTool, ReadFileTool, WriteFileTool
from agent_core.tools.builtin.python import RunCommandTool, RunPythonTool
from agent_core.tools.builtin.search import GlobTool, GrepTool, ListDirTool
from agent_core.tools.sandbox import CodeRunner, SandboxLimits

__all__ = [
    "EditFileTool",
    "GlobTool",
    "GrepTool",
    "ListDirTool",
    "ReadFileTool",
    "RunCommandTool",
    "RunPythonTool",
    "WriteFileTool",
    "builtin_tools",
]


def builtin_tools(
    code: CodeRunner | None = None,
    *,
    limits: SandboxLimits | None = None,
    run_command: bool = False,
) -> list[Tool[Any]]:
    """A fresh instance of every built-in tool (for a per-runtime ``ToolRegistry``).

    The code tools come only with a ``code`` runner (no sandbox, no code tools); ``run_command``
    only when the operator turned it on.
    """
    tools: list[Tool[Any]] = [
        ReadFileTool(),
        WriteFileTool(),
        EditFileTool(),
        ListDirTool(),
        GlobTool(),
        GrepTool(),
    ]
    if code is not None:
        limits = limits or SandboxLimits()
        tools.append(RunPythonTool(code, limits))
        if run_command:
            tools.append(RunCommandTool(code, limits))
    return tools
