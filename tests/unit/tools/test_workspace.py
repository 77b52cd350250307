"""The workspace layout and its id checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_core.errors import SchemaError
from agent_core.tools.paths import (
    Area,
    PathErrorCode,
    PathEscapeError,
    SessionPath,
    WriteProtectedError,
)
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


def _with_project(tmp_path: Path) -> tuple[Workspace, Path]:
    project = tmp_path / "srv" / "acme"
    (project / "sales").mkdir(parents=True)
    (project / "sales" / "facts.csv").write_text("a,b\n")
    ws = Workspace(tmp_path / "home", "acct_1", "sess_1")
    ws.ensure()
    ws.use_project(project)
    return ws, project


def test_a_project_folder_is_the_working_folder(tmp_path: Path) -> None:
    ws, project = _with_project(tmp_path)
    assert ws.resolve("sales/facts.csv") == SessionPath(("project", "sales", "facts.csv"))
    assert ws.resolve("project/sales") == SessionPath(("project", "sales"))
    assert ws.resolve(str(project / "sales")) == SessionPath(("project", "sales"))
    assert ws.resolve("output/r.md") == SessionPath(("output", "r.md"))  # the areas stay
    assert ws.host_path(ws.resolve("sales/facts.csv")) == project / "sales" / "facts.csv"
    data, real = ws.fs.read_bytes(ws.resolve("sales/facts.csv"))
    assert data == b"a,b\n" and real == SessionPath(("project", "sales", "facts.csv"))
    listed = [str(e.path) for e in ws.fs.walk(SessionPath(("project",)), max_entries=10)]
    assert listed == ["project/sales", "project/sales/facts.csv"]
    with pytest.raises(PathEscapeError):
        ws.resolve("../output/r.md")  # '..' does not climb out of the project


def test_writes_into_the_project_need_platform_work(tmp_path: Path) -> None:
    ws, project = _with_project(tmp_path)
    path = ws.resolve("sales/new.csv")
    with pytest.raises(WriteProtectedError) as info:
        ws.fs.write_bytes(path, b"x", check=ws.check_write)
    assert info.value.code == PathErrorCode.PROJECT_READ_ONLY and "output/" in info.value.message
    assert not (project / "sales" / "new.csv").exists()
    ws.fs.write_bytes(ws.resolve("output/r.md"), b"ok", check=ws.check_write)
    assert (ws.root / "output" / "r.md").read_bytes() == b"ok"
    ws.allow_platform_work = True
    assert ws.fs.write_bytes(path, b"x", check=ws.check_write) == path
    assert (project / "sales" / "new.csv").read_bytes() == b"x"


def test_links_stay_inside_their_own_root(tmp_path: Path) -> None:
    ws, project = _with_project(tmp_path)
    (project / "to_session").symlink_to(ws.root / "output")
    (ws.root / "scratchpad" / "to_project").symlink_to(project)
    with pytest.raises(PathEscapeError):
        ws.fs.list_dir(ws.resolve("to_session"))
    with pytest.raises(PathEscapeError):
        ws.fs.list_dir(ws.resolve("scratchpad/to_project"))


def test_the_workspace_as_its_own_project_changes_nothing(tmp_path: Path) -> None:
    ws = Workspace(tmp_path, "acct_1", "sess_1")
    ws.ensure()
    ws.use_project(ws.root)
    assert ws.project is None and ws.resolve("x.py") == SessionPath(("scratchpad", "x.py"))
