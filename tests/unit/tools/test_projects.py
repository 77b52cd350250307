"""A session's project: logical names only, resolved on the server inside its root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_core.tools.projects import InvalidProjectError, normalize_project, project_dir
from services.task_wal.location import project_guard


@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "data" / "reports").mkdir(parents=True)
    (tmp_path / "secret").mkdir()
    os.symlink(tmp_path / "secret", tmp_path / "data" / "link")
    return {"data": tmp_path / "data"}


def test_names_resolve_inside_their_root(roots: dict[str, Path], tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    assert normalize_project(None, roots) == "workspace"
    assert project_dir("", roots=roots, workspace_root=ws) == ws
    assert project_dir("data", roots=roots, workspace_root=ws) == roots["data"]
    assert project_dir("data/reports/", roots=roots, workspace_root=ws) == roots["data"] / "reports"


@pytest.mark.parametrize(
    "bad",
    ["/etc", "/tmp/x", "data/../secret", "data/./reports", "other", "data/link", "data/missing",
     "data//reports", "x\x00y"],
)  # fmt: skip
def test_anything_else_is_refused(roots: dict[str, Path], tmp_path: Path, bad: str) -> None:
    with pytest.raises(InvalidProjectError) as err:
        project_dir(bad, roots=roots, workspace_root=tmp_path / "ws")
    assert err.value.code == "invalid_cwd" and str(tmp_path) not in err.value.message


def test_task_wal_keeps_lists_only_in_the_servers_folders(tmp_path: Path) -> None:
    home, root = tmp_path / "home", tmp_path / "data"
    guard = project_guard(home, [root])
    session = home / "accounts" / "acct" / "sessions" / "sess_1"
    assert guard("sess_1", session) and guard("sess_1", root / "sub")
    assert not guard("sess_2", session)  # another session's workspace
    assert not guard("sess_1", home) and not guard("sess_1", tmp_path / "elsewhere")
    assert not guard("sess_1", home / "accounts" / "acct" / "sessions" / "sess_1" / "input")
