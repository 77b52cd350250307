"""read_file, write_file and edit_file through the executor: success and failure paths."""

from __future__ import annotations

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
from agent_core.tools.builtin.files import is_binary
from agent_core.types.protocol import TextBlock, ToolCall, ToolResult


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    workspace = Workspace(tmp_path, "acct_1", "sess_1")
    workspace.ensure()
    (workspace.root / "input" / "notes.txt").write_text("one\ntwo\nthree\nfour\n")
    (workspace.root / "input" / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
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
    result: ToolResult = await executor.execute(ToolCall(id="c1", name=name, arguments=arguments))
    block = result.content[0]
    assert isinstance(block, TextBlock)
    return result.is_error, block.text


async def test_read_file_whole_and_range(ws: Workspace) -> None:
    err, text = await call(ws, "read_file", path="input/notes.txt")
    assert not err
    assert text.splitlines() == [
        "input/notes.txt (lines 1-4 of 4)",
        "     1\tone",
        "     2\ttwo",
        "     3\tthree",
        "     4\tfour",
    ]
    err, text = await call(ws, "read_file", path="inputs/notes.txt", start_line=2, end_line=3)
    assert not err and text.splitlines()[1:] == ["     2\ttwo", "     3\tthree"]


async def test_read_file_failures(ws: Workspace) -> None:
    err, text = await call(ws, "read_file", path="input/image.png")
    assert not err and "binary file (image/png" in text
    err, text = await call(ws, "read_file", path="input/missing.txt")
    assert err and "does not exist" in text
    err, text = await call(ws, "read_file", path="../../../etc/passwd")
    assert err and "leave the session" in text
    err, text = await call(ws, "read_file", path="input/notes.txt", start_line=3, end_line=2)
    assert err and "end_line must not be smaller" in text
    err, text = await call(ws, "read_file", path="input/notes.txt", start_line=9)
    assert err and "has 4 lines" in text


async def test_write_file_creates_parents_and_refuses_input_and_platform(ws: Workspace) -> None:
    err, text = await call(ws, "write_file", path="output/deep/r.md", content="héllo")
    assert not err and text == "Wrote 6 bytes to output/deep/r.md"
    assert (ws.root / "output" / "deep" / "r.md").read_text() == "héllo"
    err, text = await call(ws, "write_file", path="input/notes.txt", content="x")
    assert err and "read-only" in text
    assert (ws.root / "input" / "notes.txt").read_text().startswith("one")
    err, text = await call(ws, "write_file", path=str(ws.root / "src" / "app.py"), content="x")
    assert err and "platform code folder" in text
    assert not (ws.root / "src").exists()


async def test_edit_file_unique_missing_and_ambiguous(ws: Workspace) -> None:
    target = ws.root / "output" / "f.txt"
    target.write_text("alpha\nbeta\nbeta\ngamma\n")
    err, text = await call(ws, "edit_file", path="output/f.txt", old_text="gamma", new_text="GAMMA")
    assert not err and text == "Edited output/f.txt at line 4"
    assert target.read_text() == "alpha\nbeta\nbeta\nGAMMA\n"
    err, text = await call(ws, "edit_file", path="output/f.txt", old_text="delta", new_text="x")
    assert err and "not found" in text
    err, text = await call(ws, "edit_file", path="output/f.txt", old_text="beta", new_text="x")
    assert err and "occurs 2 times" in text
    err, text = await call(ws, "edit_file", path="output/f.txt", old_text="", new_text="x")
    assert err and "old_text" in text
    assert target.read_text() == "alpha\nbeta\nbeta\nGAMMA\n"


async def test_edit_file_refuses_input_binary_and_symlinked_input(ws: Workspace) -> None:
    err, text = await call(ws, "edit_file", path="input/notes.txt", old_text="one", new_text="1")
    assert err and "read-only" in text
    (ws.root / "output" / "blob.bin").write_bytes(b"\x00\x01abc")
    err, text = await call(ws, "edit_file", path="output/blob.bin", old_text="abc", new_text="x")
    assert err and "binary" in text
    os.symlink("../input/notes.txt", ws.root / "output" / "notes")
    err, text = await call(ws, "edit_file", path="output/notes", old_text="one", new_text="1")
    assert err and "read-only" in text
    assert (ws.root / "input" / "notes.txt").read_text().startswith("one")


def test_is_binary() -> None:
    assert is_binary(b"ab\x00c")
    assert is_binary(b"\xff\xfe\xfa" * 10)
    assert not is_binary("héllo".encode())
    assert not is_binary("héllo".encode()[:-1])  # cut inside a character at a read limit
