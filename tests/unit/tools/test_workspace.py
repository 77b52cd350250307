"""The workspace layout and its id checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_core.errors import SchemaError
from agent_core.tools.paths import Area, SessionPath
from agent_core.tools.workspace import Workspace


def test_layout_is_created_under_account_and_session(tmp_path: Path) -> None:
    ws = Workspace(tmp_path, "acct_1", "sess_20260101_000000_abcd")
    assert not ws.root.exists()  # no I/O until ensure()
    ws.ensure()
    ws.ensure()  # idempotent
    assert ws.root == tmp_path / "accounts" / "acct_1" / "sessions" / "sess_20260101_000000_abcd"
    assert sorted(p.name for p in ws.root.iterdir()) == ["input", "output", "scratchpad"]
    assert ws.scratchpad == ws.root / "scratchpad"
    assert ws.area_dir(Area.OUTPUT) == ws.root / "output"


@pytest.mark.parametrize("bad", ["..", "a/b", "", "sess 1", "../sess_2", "ä"])
def test_ids_that_could_alias_another_folder_are_refused(tmp_path: Path, bad: str) -> None:
    with pytest.raises(SchemaError):
        Workspace(tmp_path, "acct_1", bad)
    with pytest.raises(SchemaError):
        Workspace(tmp_path, bad, "sess_1")


def test_resolve_uses_scratchpad_as_cwd_and_accepts_absolute_inside(tmp_path: Path) -> None:
    ws = Workspace(tmp_path, "acct_1", "sess_1")
    assert ws.resolve("x.py") == SessionPath(("scratchpad", "x.py"))
    assert ws.resolve(str(ws.root / "output" / "r.md")) == SessionPath(("output", "r.md"))
    assert ws.host_path(SessionPath(("output", "r.md"))) == ws.root / "output" / "r.md"


def test_cwd_is_configurable(tmp_path: Path) -> None:
    ws = Workspace(tmp_path, "acct_1", "sess_1", cwd=Area.OUTPUT)
    assert ws.resolve("x.md") == SessionPath(("output", "x.md"))
