"""What an MCP tool call adds over a built-in tool doing the same work, measured in one run.

In one process on uvloop (as a run-worker runs): a real MCP server written with the official SDK
(``tests/fakes/mcp_server.py``) over stdio, and its ``upper`` tool called through the same
``ToolExecutor`` path as a built-in ``upper`` tool (validation, permission, timeout, output cap),
alternating call by call so that load on the machine hits both alike. The server is started (and
its tools listed) before the clock starts: what is measured is a call on a running server.

Printed last, one JSON line: ``mcp_added_p50_ms`` (median MCP call minus median built-in call;
goal ≤ 2 ms), ``mcp_p50_ms`` / ``mcp_p90_ms``, ``builtin_p50_ms`` / ``builtin_p90_ms``, ``calls``
(each), ``start_ms`` (starting the server and listing its tools, the first use's cost),
``mcp_added_pairs_p50_ms`` (median of call-by-call differences) and ``load_1m`` (the machine's
load average: two processes take turns per call, so a saturated machine adds its scheduling
delay to every MCP call and to none of the built-in ones).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# This file is named like the SDK's package: drop its own folder from the path, or ``import mcp``
# would import this script.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path[:0] = [str(ROOT), str(ROOT / "shared")]

import uvloop  # noqa: E402

from agent_core.ids import new_session_id  # noqa: E402
from agent_core.mcp import McpServerSettings, McpSettings  # noqa: E402
from agent_core.mcp.tools import McpServers  # noqa: E402
from agent_core.tools import (  # noqa: E402
    MemoryArtifactSink,
    PermissionGate,
    PermissionRules,
    Tool,
    ToolArgs,
    ToolContext,
    ToolExecutor,
    ToolOutput,
    ToolRegistry,
    Workspace,
)
from agent_core.types.protocol import ToolCall  # noqa: E402
from tests.fakes.mcp_server import COMMAND  # noqa: E402

CALLS = 1000
WARM = 50
TEXT = "the quick brown fox jumps over the lazy dog " * 4


class UpperArgs(ToolArgs):
    text: str


class UpperTool(Tool[UpperArgs]):
    """The built-in twin of the fake server's ``upper``."""

    name = "upper"
    description = "The text in upper case."
    input_model = UpperArgs
    repeatable = True

    async def run(self, args: UpperArgs, ctx: ToolContext) -> ToolOutput:
        return ToolOutput(args.text.upper())


def _p(samples: list[float], q: float) -> float:
    return sorted(samples)[min(len(samples) - 1, int(q * len(samples)))]


async def main() -> dict[str, float]:
    server = McpServerSettings(transport="stdio", command=COMMAND, cwd=ROOT)
    servers = McpServers(McpSettings(servers={"bench": server}))
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Workspace(tmp, "acct", new_session_id())
        workspace.ensure()
        try:
            started = time.perf_counter()
            mcp_tools = await servers.tools_for(None)
            start_ms = (time.perf_counter() - started) * 1000
            executor = ToolExecutor(
                ToolRegistry([UpperTool(), *mcp_tools]),
                workspace=workspace,
                run_id="run_bench",
                agent_id="agent_bench",
                permissions=PermissionGate(PermissionRules()),
                artifacts=MemoryArtifactSink(),
            )
            timings: dict[str, list[float]] = {"upper": [], "mcp__bench__upper": []}
            for i in range(WARM + CALLS):
                for name in timings:
                    call = ToolCall(id=f"call_{i}", name=name, arguments={"text": TEXT})
                    t = time.perf_counter()
                    result = await executor.execute(call)
                    elapsed = (time.perf_counter() - t) * 1000
                    assert not result.is_error and result.content[0].text == TEXT.upper(), result
                    if i >= WARM:
                        timings[name].append(elapsed)
        finally:
            await servers.close()
    builtin, mcp = timings["upper"], timings["mcp__bench__upper"]
    return {
        "mcp_added_p50_ms": round(statistics.median(mcp) - statistics.median(builtin), 3),
        # The median of call-by-call differences: the same figure, robust to load that drifts.
        "mcp_added_pairs_p50_ms": round(
            statistics.median(m - b for m, b in zip(mcp, builtin, strict=True)), 3
        ),
        "mcp_p50_ms": round(statistics.median(mcp), 3),
        "mcp_p90_ms": round(_p(mcp, 0.9), 3),
        "builtin_p50_ms": round(statistics.median(builtin), 3),
        "builtin_p90_ms": round(_p(builtin, 0.9), 3),
        "calls": CALLS,
        "start_ms": round(start_ms, 1),
        "load_1m": round(os.getloadavg()[0], 1),  # the machine's load: the figures depend on it
    }


if __name__ == "__main__":
    print(json.dumps(uvloop.run(main())))
