"""run_python: a script in the session's scratchpad, through the sandbox."""

from __future__ import annotations

from pydantic import Field

from agent_core.tools.base import Tool, ToolArgs, ToolContext, ToolOutput
from agent_core.tools.sandbox import SandboxConfig, SandboxLimits, SandboxResult, run_python

__all__ = ["RunPythonArgs", "RunPythonTool"]

# The executor's own timeout sits above the script's, so the sandbox (which kills the process
# group and reports partial output) always fires first.
_EXECUTOR_GRACE_S = 15.0


class RunPythonArgs(ToolArgs):
    """Arguments of run_python."""

    code: str = Field(min_length=1, description="A complete Python script")
    timeout_s: float | None = Field(
        default=None, gt=0, description="Seconds before the script is killed (capped by config)"
    )


def _format(result: SandboxResult) -> str:
    if result.timed_out:
        status = "timed out (process group killed)"
    elif result.exit_code is not None and result.exit_code < 0:
        status = f"killed by signal {-result.exit_code}"
    else:
        status = f"exit code {result.exit_code}"
    parts = [f"[{status}, {result.duration_s:.1f} s]"]
    if result.stdout:
        parts.append(f"[stdout]\n{result.stdout}")
    if result.stderr:
        parts.append(f"[stderr]\n{result.stderr}")
    return "\n".join(parts)


class RunPythonTool(Tool[RunPythonArgs]):
    """Run a Python script with scratchpad/ as working directory; files written to output/
    become artifacts."""

    name = "run_python"
    description = (
        "Run a Python script. The working directory is scratchpad/; read inputs from "
        "../input/ and save deliverables to ../output/. Print what you need to see; output is "
        "capped. The environment holds no credentials."
    )
    input_model = RunPythonArgs
    writes = True

    def __init__(
        self, limits: SandboxLimits | None = None, config: SandboxConfig | None = None
    ) -> None:
        self.limits = limits or SandboxLimits()
        self.config = config or SandboxConfig()

    def _limits_for(self, args: RunPythonArgs) -> SandboxLimits:
        timeout = min(args.timeout_s or self.limits.timeout_s, self.limits.timeout_s)
        return SandboxLimits(
            timeout_s=timeout,
            cpu_s=self.limits.cpu_s,
            memory_bytes=self.limits.memory_bytes,
            file_size_bytes=self.limits.file_size_bytes,
            max_processes=self.limits.max_processes,
            output_cap_bytes=self.limits.output_cap_bytes,
        )

    def timeout_for(self, args: RunPythonArgs) -> float:
        """The script's timeout plus a grace for killing and draining."""
        return self._limits_for(args).timeout_s + _EXECUTOR_GRACE_S

    async def run(self, args: RunPythonArgs, ctx: ToolContext) -> ToolOutput:
        """Run the script; a non-zero exit or a timeout is an error result with the output."""
        result = await run_python(
            args.code,
            cwd=ctx.workspace.scratchpad,
            limits=self._limits_for(args),
            config=self.config,
        )
        return ToolOutput(
            _format(result),
            is_error=not result.ok,
            metadata={
                "exit_code": result.exit_code,
                "timed_out": result.timed_out,
                "stdout_bytes": result.stdout_bytes,
                "stderr_bytes": result.stderr_bytes,
            },
        )
