"""A worker's start-up decision about code: offered in a working sandbox, not offered (and why,
with the fix) where bubblewrap cannot run, offered unsandboxed only when the operator says so —
loudly. The trial call is real: a real bubblewrap, or a stand-in that fails as a kernel would."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from agent_core.config import Settings, load_settings
from agent_core.tools import Workspace
from agent_core.tools.builtin import builtin_tools
from agent_core.tools.paths import Area
from agent_core.tools.sandbox import runners
from agent_core.tools.sandbox.setup import CodeSandbox, prepare_sandbox


def _settings(home: Path, sandbox: str = "") -> Settings:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f"[sandbox]\nmin_free_disk_mb = 0\n{sandbox}")
    return load_settings(env={"SOONG_AGENT_HOME": str(home)})


def _tool_names(sandbox: CodeSandbox) -> set[str]:
    """The built-in tools a worker offers with this decision (as the run-worker builds them)."""
    tools = builtin_tools(sandbox.runner, limits=sandbox.limits, run_command=sandbox.run_command)
    return {t.name for t in tools}


def _bwrap_is(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    real = runners._tool
    monkeypatch.setattr(runners, "_tool", lambda name: path if name == "bwrap" else real(name))


async def test_a_working_sandbox_offers_the_code_tools(tmp_path: Path) -> None:
    sandbox = await prepare_sandbox(_settings(tmp_path / "home", "run_command = true\n"))
    assert sandbox.status == "bwrap" and sandbox.runner is not None
    assert {"run_python", "run_command"} <= _tool_names(sandbox)
    plain = await prepare_sandbox(_settings(tmp_path / "other"))
    assert "run_python" in _tool_names(plain) and "run_command" not in _tool_names(plain)


async def test_without_bubblewrap_no_code_tool_is_offered_and_the_log_says_how_to_fix_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _bwrap_is(monkeypatch, str(tmp_path / "missing" / "bwrap"))
    with caplog.at_level(logging.ERROR, logger="soong.sandbox"):
        sandbox = await prepare_sandbox(_settings(tmp_path / "home", "run_command = true\n"))
    assert sandbox.runner is None and sandbox.status.startswith("unavailable")
    assert not {"run_python", "run_command"} & _tool_names(sandbox)
    assert "read_file" in _tool_names(sandbox)  # the rest of the tools stay
    assert "NOT offered" in caplog.text and "apt-get install bubblewrap" in caplog.text


async def test_a_kernel_that_refuses_namespaces_is_reported_with_its_fix(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    request: pytest.FixtureRequest,
) -> None:
    # Where a program the sandbox's user starts may lie (as /usr/bin/bwrap does): not below the
    # test's own folder, which only its owner may enter.
    bin_dir = Path(tempfile.mkdtemp(prefix="soong-fake-bwrap-"))
    bin_dir.chmod(0o755)
    request.addfinalizer(lambda: shutil.rmtree(bin_dir, ignore_errors=True))
    fake = bin_dir / "bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace, likely because the "
        "kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    _bwrap_is(monkeypatch, str(fake))
    with caplog.at_level(logging.ERROR, logger="soong.sandbox"):
        sandbox = await prepare_sandbox(_settings(tmp_path / "home"))
    assert sandbox.runner is None and "run_python" not in _tool_names(sandbox)
    assert "user namespace" in sandbox.status and "unprivileged_userns_clone" in caplog.text


async def test_sandbox_off_is_an_explicit_choice_logged_as_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="soong.sandbox"):
        sandbox = await prepare_sandbox(_settings(tmp_path / "home", 'mode = "off"\n'))
    assert sandbox.status == "off" and sandbox.runner is not None
    assert sandbox.runner.mode == "off" and "run_python" in _tool_names(sandbox)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert any("SANDBOX OFF" in r.getMessage() for r in warnings), caplog.text


async def test_a_root_worker_runs_code_for_a_home_only_root_may_enter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """The default home of a root-run worker is below /root (mode 0700), as is any `mktemp -d`:
    the sandbox's user (uid 65534) may not pass through, yet code runs and sees its session's
    areas. (Run by any other user, the home is that user's own and reachable anyway.)"""
    # The calls' staging folders go to a /tmp of this test's own, to see that none is left.
    tmp_root = Path(tempfile.mkdtemp(prefix="soong-test-tmp-"))
    tmp_root.chmod(0o1777)
    request.addfinalizer(lambda: shutil.rmtree(tmp_root, ignore_errors=True))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_root))
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    sandbox = await prepare_sandbox(_settings(private / "home"))
    assert sandbox.status == "bwrap" and sandbox.runner is not None, sandbox.status
    workspace = Workspace(private / "home", "acct_1", "sess_1")
    workspace.ensure()
    (workspace.area_dir(Area.INPUT) / "in.txt").write_text("from input")
    code = (
        "import pathlib; print(pathlib.Path('/workspace/input/in.txt').read_text()); "
        "pathlib.Path('/workspace/output/out.txt').write_text('made')"
    )
    stages = _count_stagings(monkeypatch)
    result = await sandbox.runner.run(["python3", "-c", code], workspace, sandbox.limits)
    assert result.ok, result.stderr
    assert result.stdout.strip() == "from input"
    assert (workspace.area_dir(Area.OUTPUT) / "out.txt").read_text() == "made"
    assert list(tmp_root.iterdir()) == [], "a staging folder was left behind"
    assert stages == ([1] if os.geteuid() == 0 else [])


async def test_a_home_the_sandbox_user_may_reach_is_bound_without_staging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """Staging costs a process per call: a home whose path uid 65534 may pass through is bound
    straight from its descriptors, and code sees the same areas."""
    open_root = Path(tempfile.mkdtemp(prefix="soong-test-open-"))
    open_root.chmod(0o711)
    request.addfinalizer(lambda: shutil.rmtree(open_root, ignore_errors=True))
    sandbox = await prepare_sandbox(_settings(open_root / "home"))
    assert sandbox.status == "bwrap" and sandbox.runner is not None, sandbox.status
    workspace = Workspace(open_root / "home", "acct_1", "sess_1")
    workspace.ensure()
    (workspace.area_dir(Area.INPUT) / "in.txt").write_text("from input")
    stages = _count_stagings(monkeypatch)
    code = "import pathlib; print(pathlib.Path('/workspace/input/in.txt').read_text())"
    result = await sandbox.runner.run(["python3", "-c", code], workspace, sandbox.limits)
    assert result.ok, result.stderr
    assert result.stdout.strip() == "from input"
    assert stages == []


def _count_stagings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that gets an entry each time a call stages its areas (the real staging runs)."""
    made: list[int] = []
    real = runners.stage_folder

    def counted() -> contextlib.AbstractContextManager[str]:
        made.append(1)
        return real()

    monkeypatch.setattr(runners, "stage_folder", counted)
    return made
