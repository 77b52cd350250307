"""run_python through the executor: artifacts, caps, timeouts, bad arguments, the loop goes on."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_core.tools import (
    BwrapRunner,
    ExecutorSettings,
    MemoryArtifactSink,
    PermissionGate,
    PermissionRules,
    SandboxConfig,
    SandboxLimits,
    ToolExecutor,
    ToolRegistry,
    Workspace,
    builtin_tools,
)
from agent_core.types.protocol import TextBlock, ToolCall, ToolResult


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    workspace = Workspace(tmp_path, "acct_1", "sess_1")
    workspace.ensure()
    (workspace.root / "input" / "data.csv").write_text("a,b\n1,2\n3,4\n")
    return workspace


def executor(ws: Workspace, sink: MemoryArtifactSink) -> ToolExecutor:
    limits = SandboxLimits(timeout_s=10, output_cap_bytes=64 * 1024, min_free_disk_bytes=0)
    return ToolExecutor(
        ToolRegistry(builtin_tools(BwrapRunner(SandboxConfig()), limits=limits)),
        workspace=ws,
        run_id="run_1",
        agent_id="agent_1",
        permissions=PermissionGate(PermissionRules()),
        artifacts=sink,
        settings=ExecutorSettings(output_cap_bytes=16 * 1024),
    )


def text(result: ToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextBlock)
    return block.text


async def test_script_reads_input_and_its_output_files_become_artifacts(ws: Workspace) -> None:
    sink = MemoryArtifactSink()
    code = """
import csv
rows = list(csv.DictReader(open('../input/data.csv')))
total = sum(int(r['b']) for r in rows)
open('../output/total.json', 'w').write('{"total": %d}' % total)
open('cache.tmp', 'w').write('scratch')
print('total', total)
"""
    result = await executor(ws, sink).execute(
        ToolCall(id="c1", name="run_python", arguments={"code": code})
    )
    assert not result.is_error, text(result)
    assert "total 6" in text(result)
    assert [(f.path, f.mime_type, f.size_bytes, f.tool_call_id) for f in sink.files] == [
        ("output/total.json", "application/json", 12, "c1")
    ]
    assert (ws.scratchpad / "cache.tmp").exists()


async def test_failing_script_is_an_error_result_and_the_loop_goes_on(ws: Workspace) -> None:
    ex = executor(ws, MemoryArtifactSink())
    bad = await ex.execute(ToolCall(id="c1", name="run_python", arguments={"code": "1/0"}))
    assert bad.is_error and "ZeroDivisionError" in text(bad) and "exit code 1" in text(bad)
    wrong = await ex.execute(ToolCall(id="c2", name="run_python", arguments={"script": "x"}))
    assert wrong.is_error and "code: Field required" in text(wrong)
    ok = await ex.execute(ToolCall(id="c3", name="run_python", arguments={"code": "print(2+2)"}))
    assert not ok.is_error and "4" in text(ok)


async def test_timeout_is_reported_with_partial_output(ws: Workspace) -> None:
    code = "import time\nprint('started', flush=True)\ntime.sleep(60)"
    result = await executor(ws, MemoryArtifactSink()).execute(
        ToolCall(id="c1", name="run_python", arguments={"code": code, "timeout_s": 1})
    )
    assert result.is_error
    assert "timed out after 1 s; all its processes were killed" in text(result)
    assert "started" in text(result)
    assert result.metadata["timed_out"] is True


async def test_fifty_megabytes_through_the_tool_are_capped_twice(ws: Workspace) -> None:
    sink = MemoryArtifactSink()
    code = "import sys\nfor _ in range(50): sys.stdout.write('y' * 1048576)\n"
    result = await executor(ws, sink).execute(
        ToolCall(id="c1", name="run_python", arguments={"code": code})
    )
    assert not result.is_error
    assert result.metadata["stdout_bytes"] == 50 * 1048576
    assert len(text(result).encode()) < 17 * 1024
    assert "[truncated" in text(result)
    (saved,) = sink.outputs
    assert len(saved.text) < 70 * 1024  # the sandbox's capped output, not 50 MB
