"""list_dir, glob and grep: success and failure paths."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from agent_core.tools import (
    MemoryArtifactSink,
    PermissionGate,
    PermissionRules,
    ToolExecutor,
    ToolRegistry,
    Workspace,
    builtin_tools,
)
from agent_core.tools.builtin.search import glob_to_regex
from agent_core.types.protocol import TextBlock, ToolCall


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    workspace = Workspace(tmp_path, "acct_1", "sess_1")
    workspace.ensure()
    out = workspace.root / "output"
    (out / "a").mkdir()
    (out / "a" / "one.py").write_text("import os\nprint('TODO: x')\n")
    (out / "a" / "two.txt").write_text("todo later\n")
    (out / "top.py").write_text("x = 1\n")
    (out / "blob.bin").write_bytes(b"\x00TODO")
    (tmp_path / "outside.py").write_text("TODO outside\n")
    os.symlink(tmp_path, out / "escape")
    return workspace


async def call(ws: Workspace, name: str, **arguments: Any) -> tuple[bool, str]:
    executor = ToolExecutor(
        ToolRegistry(builtin_tools()),
        workspace=ws,
        run_id="run_1",
        agent_id="agent_1",
        permissions=PermissionGate(PermissionRules()),
        artifacts=MemoryArtifactSink(),
    )
    result = await executor.execute(ToolCall(id="c1", name=name, arguments=arguments))
    block = result.content[0]
    assert isinstance(block, TextBlock)
    return result.is_error, block.text


async def test_list_dir(ws: Workspace) -> None:
    err, text = await call(ws, "list_dir", path="output")
    assert not err
    assert text.splitlines() == [
        "output/ (4 entries)",
        "a/",
        "blob.bin  5 bytes",
        "escape  (symlink)",
        "top.py  6 bytes",
    ]
    err, text = await call(ws, "list_dir")
    assert not err and text == "scratchpad/ is empty"
    err, text = await call(ws, "list_dir", path="output/top.py")
    assert err and "not a directory" in text
    err, text = await call(ws, "list_dir", path="output/escape")
    assert err and "outside the session" in text


async def test_glob(ws: Workspace) -> None:
    err, text = await call(ws, "glob", pattern="**/*.py", path="output")
    assert not err
    assert text.splitlines() == ["output/a/one.py", "output/top.py"]  # not through the symlink
    err, text = await call(ws, "glob", pattern="*.py", path="output")
    assert text.splitlines() == ["output/top.py"]
    err, text = await call(ws, "glob", pattern="*.rs", path="output")
    assert not err and "No paths" in text
    err, text = await call(ws, "glob", pattern="*", path="output/missing")
    assert err and "does not exist" in text


async def test_grep(ws: Workspace) -> None:
    err, text = await call(ws, "grep", pattern="TODO", path="output")
    assert not err and text.splitlines() == ["output/a/one.py:2: print('TODO: x')"]
    err, text = await call(
        ws, "grep", pattern="todo", path="output", ignore_case=True, glob="*.txt"
    )
    assert text.splitlines() == ["output/a/two.txt:1: todo later"]
    err, text = await call(ws, "grep", pattern="x", path="output/top.py")
    assert text.splitlines() == ["output/top.py:1: x = 1"]
    err, text = await call(ws, "grep", pattern="(", path="output")
    assert err and "invalid regular expression" in text
    err, text = await call(ws, "grep", pattern="zzz", path="output")
    assert not err and "No matches" in text


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("**/*.py", "a/b/c.py", True),
        ("**/*.py", "c.py", True),
        ("*.py", "a/c.py", False),
        ("a/?.py", "a/c.py", True),
        ("[ab].txt", "a.txt", True),
        ("[!ab].txt", "a.txt", False),
        ("data.(csv)", "data.(csv)", True),
        ("data.csv", "dataxcsv", False),
    ],
)
def test_glob_to_regex(pattern: str, path: str, matches: bool) -> None:
    assert bool(glob_to_regex(pattern).match(path)) is matches


async def test_grep_with_a_backtracking_pattern_over_the_largest_file_is_linear(
    ws: Workspace,
) -> None:
    """``(a+)+$`` over a 4 MiB line of ``a`` and one ``!`` would never end with Python's re."""
    (ws.root / "output" / "evil.txt").write_text("a" * (4 * 1024 * 1024 - 2) + "!\n")
    # A hang guard: linear matching takes a few ms each; backtracking would never end.
    async with asyncio.timeout(120):
        err, text = await call(ws, "grep", pattern="(a+)+$", path="output/evil.txt")
    assert not err and text.startswith("No matches")
    async with asyncio.timeout(120):
        err, text = await call(ws, "grep", pattern="(a|aa)*!", path="output/evil.txt")
    assert not err and "evil.txt:1:" in text and len(text) < 400  # the line is cut
    async with asyncio.timeout(120):
        err, text = await call(ws, "glob", pattern="**/**/**/**/**/**/*x", path="output")
    assert not err


async def test_patterns_re2_cannot_take_are_clear_errors(ws: Workspace) -> None:
    err, text = await call(ws, "grep", pattern=r"(a)\1", path="output")
    assert err and "no backreferences" in text
    err, text = await call(ws, "grep", pattern="x" * 5000, path="output")
    assert err and "4096" in text
