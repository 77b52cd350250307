"""What the code sandbox costs: a trivial ``run_python`` call in bubblewrap vs without it.

Both go through the same tool (script file, limits, output capture, write watch); the only
difference is the runner: :class:`BwrapRunner` (namespaces, mounts, uid 65534) or
:class:`DirectRunner` (``sandbox.mode = "off"``). Calls alternate between the two so that load
on the machine falls on both alike.

The last line printed is one JSON object: ``sandbox_p50_ms``, ``direct_p50_ms``,
``sandbox_added_p50_ms`` (the difference of the medians; goal ≤ 50) and the p90s.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "shared")]

from agent_core.tools import (  # noqa: E402
    BwrapRunner,
    CodeRunner,
    DirectRunner,
    SandboxConfig,
    SandboxLimits,
    ToolContext,
    Workspace,
)
from agent_core.tools.builtin import RunPythonTool  # noqa: E402
from agent_core.tools.builtin.python import RunPythonArgs  # noqa: E402

CALLS = 40  # per runner
WARMUP = 3
CODE = "print(6 * 7)"


async def _call(tool: RunPythonTool, ctx: ToolContext) -> float:
    started = time.perf_counter()
    output = await tool.run(RunPythonArgs(code=CODE), ctx)
    elapsed = (time.perf_counter() - started) * 1000
    assert not output.is_error and "42" in output.text, output.text
    return elapsed


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as tmp:
        os.chmod(tmp, 0o711)  # a root worker's sandbox runs as uid 65534 and must pass through
        workspace = Workspace(tmp, "bench", "bench")
        workspace.ensure()
        ctx = ToolContext(workspace=workspace, tool_call_id="c", session_id="bench", run_id="r",
                          agent_id="a")  # fmt: skip
        limits = SandboxLimits(timeout_s=30)
        runners: dict[str, CodeRunner] = {
            "sandbox": BwrapRunner(SandboxConfig()),
            "direct": DirectRunner(SandboxConfig()),
        }
        tools = {name: RunPythonTool(runner, limits) for name, runner in runners.items()}
        times: dict[str, list[float]] = {name: [] for name in tools}
        for i in range(WARMUP + CALLS):
            for name, tool in tools.items():
                elapsed = await _call(tool, ctx)
                if i >= WARMUP:
                    times[name].append(elapsed)

    def pct(values: list[float], q: int) -> float:
        return round(statistics.quantiles(values, n=100)[q - 1], 1)

    sandbox_p50 = statistics.median(times["sandbox"])
    direct_p50 = statistics.median(times["direct"])
    print(
        json.dumps(
            {
                "sandbox_p50_ms": round(sandbox_p50, 1),
                "direct_p50_ms": round(direct_p50, 1),
                "sandbox_added_p50_ms": round(sandbox_p50 - direct_p50, 1),
                "sandbox_p90_ms": pct(times["sandbox"], 90),
                "direct_p90_ms": pct(times["direct"], 90),
                "calls": CALLS,
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
