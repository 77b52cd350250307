"""Command tools the operator declares in ``[tools.<name>]``: JSON on stdin, JSON on stdout.

Each becomes a :class:`CommandTool`, a :class:`Tool` like the built-ins, so its calls go through
the same :class:`ToolExecutor` — the enabled set, PreToolUse / PostToolUse hooks, the permission
gate (by its name in the tool policy; ``writes`` decides what the ``ask`` policy asks about),
the executor's timeout, the output cap and the artifact for a long result, the tool events —
and run through the same :class:`CodeRunner` as ``run_command``: in the code sandbox, working
directory ``scratchpad/``, scrubbed environment, no network unless the sandbox allows it. A
worker without a working sandbox offers no command tool, as it offers no code tool.

The arguments are checked against the declared JSON Schema first (a misfit is an error result
naming the place, and the command never starts); they reach the command's stdin from a file the
worker writes in ``scratchpad/`` and removes after the call. The answer is the command's stdout,
which must be one JSON value: it goes back to the model as compact JSON. A non-zero exit, a stop
by a limit (the declared ``timeout_s``), or stdout that is not JSON is an error result that says
which.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import replace
from typing import Any, ClassVar

from jsonschema import Draft202012Validator
from pydantic import ConfigDict

from agent_core.config.command_tools import CommandToolSettings
from agent_core.errors import ToolError
from agent_core.tools.base import Tool, ToolArgs, ToolContext, ToolOutput
from agent_core.tools.builtin.python import format_result
from agent_core.tools.sandbox import CodeRunner, SandboxLimits
from agent_core.types.protocol import ToolDefinition

__all__ = ["CommandArgs", "CommandTool", "command_tools"]

# The executor's own timeout sits above the command's: the sandbox kills the command first and
# reports it, and the executor's limit only backs it up.
_EXECUTOR_GRACE_S = 15.0
# The shell opens the arguments' file ($1) as the command's stdin, then becomes the command.
_STDIN_FROM_FILE = 'input=$1; shift; exec "$@" < "$input"'
_SHOWN_CHARS = 300


class CommandArgs(ToolArgs):
    """Any JSON object: the tool checks it against the operator's JSON Schema itself."""

    model_config = ConfigDict(extra="allow")


class CommandTool(Tool[CommandArgs]):
    """One declared command (a subclass per ``[tools.<name>]``, made by :func:`command_tools`)."""

    input_model = CommandArgs
    settings: ClassVar[CommandToolSettings]

    def __init__(self, runner: CodeRunner, limits: SandboxLimits) -> None:
        timeout = self.settings.timeout_s
        self.runner = runner
        self.limits = limits if timeout is None else replace(limits, timeout_s=timeout)
        self.validator = Draft202012Validator(self.settings.input_schema)

    def definition(self) -> ToolDefinition:
        """The declared schema, as the operator wrote it."""
        return ToolDefinition(
            name=self.name, description=self.description, input_schema=self.settings.input_schema
        )

    def timeout_for(self, args: CommandArgs) -> float:
        """The command's timeout plus a grace for killing and draining."""
        return self.limits.timeout_s + _EXECUTOR_GRACE_S

    async def run(self, args: CommandArgs, ctx: ToolContext) -> ToolOutput:
        """Check the arguments, run the command with them on stdin, read its JSON answer."""
        arguments = dict(args.model_extra or {})
        error = next(iter(sorted(self.validator.iter_errors(arguments), key=str)), None)
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(top)"
            raise ToolError(
                "invalid_arguments",
                f"{self.name}: the arguments do not fit its schema at {where}: {error.message}",
            )
        scratch = ctx.workspace.scratchpad
        fd, path = tempfile.mkstemp(prefix=f".tool_{self.name}_", suffix=".json", dir=scratch)
        try:
            os.fchmod(fd, 0o644)  # the sandbox's user reads it (mkstemp makes it 0600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(arguments, fh, ensure_ascii=False)
            shell = self.runner.config.shell
            command = [
                shell, "-c", _STDIN_FROM_FILE, self.name, os.path.basename(path),
                *self.settings.command,
            ]  # fmt: skip
            result = await self.runner.run(command, ctx.workspace, self.limits)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        meta: dict[str, Any] = {
            "command_tool": self.name,
            "exit_code": result.exit_code,
            "timed_out": result.timed_out,
            "stopped_for": result.stopped_for,
        }
        if not result.ok:
            meta["error_code"] = "command_failed"
            return ToolOutput(format_result(result, self.limits), True, meta)
        try:
            answer = json.loads(result.stdout)
        except ValueError:
            shown = result.stdout.strip()[:_SHOWN_CHARS] or "(nothing)"
            meta["error_code"] = "invalid_tool_output"
            text = (
                f"{self.name} answered something that is not JSON on stdout "
                f"({result.stdout_bytes} bytes): {shown}"
            )
            return ToolOutput(text, True, meta)
        return ToolOutput(json.dumps(answer, ensure_ascii=False), False, meta)


def command_tools(
    declared: dict[str, CommandToolSettings], runner: CodeRunner, limits: SandboxLimits
) -> list[Tool[Any]]:
    """One tool per ``[tools.<name>]`` entry, run by ``runner``."""
    tools: list[Tool[Any]] = []
    for name, settings in sorted(declared.items()):
        attrs: dict[str, Any] = {
            "name": name,
            "description": settings.description,
            "settings": settings,
            "writes": settings.writes,
            "repeatable": settings.repeatable,
        }
        cls = type(f"CommandTool_{name}", (CommandTool,), attrs)
        tools.append(cls(runner, limits))
    return tools
