"""Staging folders of workers that died mid-call are removed at the next worker's start; those
of live workers, folders with content and names of other kinds are left alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from agent_core.tools.sandbox.staging import sweep_stale_stages


def _stage(tmp: Path, pid: int, name: str = "x") -> Path:
    stage = tmp / f"soong-stage-{pid}-{name}"
    for area in ("input", "scratchpad", "output"):
        (stage / area).mkdir(parents=True)
    return stage


def _dead_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(done.stdout)


def test_only_a_dead_workers_empty_stages_go(tmp_path: Path) -> None:
    dead = _dead_pid()
    stale = _stage(tmp_path, dead, "a")
    mine = _stage(tmp_path, os.getpid(), "b")  # a live worker's call in progress
    kept = _stage(tmp_path, dead, "c")
    (kept / "output" / "left.txt").write_text("not a bare mount point")
    older = tmp_path / "soong-stage-abcdef"  # an older version's name: no pid in it
    older.mkdir()
    other = tmp_path / "something-else"
    other.mkdir()
    assert sweep_stale_stages(str(tmp_path)) == 1
    assert not stale.exists()
    assert mine.exists() and kept.exists() and older.exists() and other.exists()
    assert (kept / "output" / "left.txt").read_text() == "not a bare mount point"
    assert sweep_stale_stages(str(tmp_path)) == 0
