"""run_python and run_command: code in the session's scratchpad, through the code sandbox."""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile

from pydantic import Field

from agent_core.tools.base import Tool, ToolArgs, ToolContext, ToolOutput
from agent_core.tools.sandbox import CodeRunner, SandboxLimits, SandboxResult

__all__ = ["RunCommandArgs", "RunCommandTool", "RunPythonArgs", "RunPythonTool"]

# The executor's own timeout sits above the call's, so the sandbox (which kills the whole tree
# and reports partial output) always fires first.
_EXECUTOR_GRACE_S = 15.0
_MIB = 1024 * 1024
_SIGNALS = {
    signal.SIGXCPU: "its CPU time limit",
    signal.SIGXFSZ: "its file size limit",
    signal.SIGKILL: "SIGKILL (a limit, or out of memory)",
}


def _status(result: SandboxResult, limits: SandboxLimits) -> str:
    match result.stopped_for:
        case "timeout":
            return f"timed out after {limits.timeout_s:g} s; all its processes were killed"
        case "write_quota":
            quota = (limits.write_quota_bytes or 0) // _MIB
            return f"stopped: it wrote more than {quota} MiB to scratchpad/ and output/"
        case "disk_full":
            return "stopped: the disk holding the workspace is nearly full"
    code = result.exit_code
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {_SIGNALS.get(signal.Signals(-code), signal.Signals(-code).name)}"
        return f"killed by signal {-code}"
    return f"exit code {code}"


def format_result(result: SandboxResult, limits: SandboxLimits) -> str:
    """The call's outcome for the model: how it ended, then its (capped) output."""
    parts = [f"[{_status(result, limits)}, {result.duration_s:.1f} s]"]
    if result.stdout:
        parts.append(f"[stdout]\n{result.stdout}")
    if result.stderr:
        parts.append(f"[stderr]\n{result.stderr}")
    return "\n".join(parts)


def _output(result: SandboxResult, limits: SandboxLimits) -> ToolOutput:
    return ToolOutput(
        format_result(result, limits),
        is_error=not result.ok,
        metadata={
            "exit_code": result.exit_code,
            "timed_out": result.timed_out,
            "stopped_for": result.stopped_for,
            "stdout_bytes": result.stdout_bytes,
            "stderr_bytes": result.stderr_bytes,
        },
    )


class _CodeTool:
    """What both code tools share: the runner, the limits, the executor's timeout."""

    def __init__(self, runner: CodeRunner, limits: SandboxLimits) -> None:
        self.runner = runner
        self.limits = limits

    def _limits_for(self, timeout_s: float | None) -> SandboxLimits:
        return self.limits.with_timeout(timeout_s)


class RunPythonArgs(ToolArgs):
    """Arguments of run_python."""

    code: str = Field(min_length=1, max_length=1_000_000, description="A complete Python script")
    timeout_s: float | None = Field(
        default=None, gt=0, description="Seconds before the script is killed (capped by config)"
    )


class RunPythonTool(_CodeTool, Tool[RunPythonArgs]):
    """Run a Python script with scratchpad/ as working directory; files written to output/
    become artifacts."""

    name = "run_python"
    description = (
        "Run a Python script in a sandbox. The working directory is scratchpad/; read inputs from "
        "../input/ (read-only) and save deliverables to ../output/. Print what you need to see; "
        "output is capped. No network unless the operator allows it; no credentials."
    )
    input_model = RunPythonArgs
    writes = True

    def timeout_for(self, args: RunPythonArgs) -> float:
        """The script's timeout plus a grace for killing and draining."""
        return self._limits_for(args.timeout_s).timeout_s + _EXECUTOR_GRACE_S

    async def run(self, args: RunPythonArgs, ctx: ToolContext) -> ToolOutput:
        """Run the script; a non-zero exit or a stop by a limit is an error result."""
        limits = self._limits_for(args.timeout_s)
        scratch = ctx.workspace.scratchpad
        fd, script = tempfile.mkstemp(prefix=".run_python_", suffix=".py", dir=scratch)
        try:
            os.fchmod(fd, 0o644)  # the sandbox's user reads it (mkstemp makes it 0600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(args.code)
            command = [self.runner.config.python, "-E", "-s", "-u", "-X", "utf8"]
            result = await self.runner.run(
                [*command, os.path.basename(script)], ctx.workspace, limits
            )
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(script)
        return _output(result, limits)


class RunCommandArgs(ToolArgs):
    """Arguments of run_command."""

    command: str = Field(min_length=1, max_length=100_000, description="A shell command line")
    timeout_s: float | None = Field(
        default=None, gt=0, description="Seconds before it is killed (capped by config)"
    )


class RunCommandTool(_CodeTool, Tool[RunCommandArgs]):
    """Run a shell command line in the sandbox, with scratchpad/ as working directory."""

    name = "run_command"
    description = (
        "Run a shell command line in a sandbox (POSIX sh). The working directory is scratchpad/; "
        "../input/ is read-only, ../output/ holds deliverables. Output is capped."
    )
    input_model = RunCommandArgs
    writes = True

    def timeout_for(self, args: RunCommandArgs) -> float:
        """The command's timeout plus a grace for killing and draining."""
        return self._limits_for(args.timeout_s).timeout_s + _EXECUTOR_GRACE_S

    async def run(self, args: RunCommandArgs, ctx: ToolContext) -> ToolOutput:
        """Run the command line; a non-zero exit or a stop by a limit is an error result."""
        limits = self._limits_for(args.timeout_s)
        command = [self.runner.config.shell, "-c", args.command]
        return _output(await self.runner.run(command, ctx.workspace, limits), limits)
