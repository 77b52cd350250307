"""``make run`` and ``make demo`` install what running needs, not the test and lint tools (a new
user's virtualenv was 390 MB of pytest, mypy and playwright before). Read with ``make -n``
against a virtualenv that does not exist: nothing is installed by this test."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO


def _planned(target: str, venv: Path) -> str:
    done = subprocess.run(
        ["make", "-n", target, f"VENV={venv}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("target", ["run", "demo"])
def test_running_installs_the_runtime_lock_only(tmp_path: Path, target: str) -> None:
    plan = _planned(target, tmp_path / ".venv")
    assert "-r requirements-runtime.lock" in plan
    assert "-r requirements.lock" not in plan


@pytest.mark.parametrize(("target", "command"), [("run", "up"), ("demo", "up --fake-provider")])
def test_run_starts_the_stack_and_demo_starts_it_with_the_demo_model(
    tmp_path: Path, target: str, command: str
) -> None:
    # The banner of `make run` without a key names `make demo`: it must start the demo model.
    venv = tmp_path / ".venv"
    # Under `make test` the inner make also prints "Entering/Leaving directory" lines.
    started = [line for line in _planned(target, venv).splitlines() if "/bin/soong-agent" in line]
    assert started == [f"{venv}/bin/soong-agent {command}"]


def test_testing_installs_everything(tmp_path: Path) -> None:
    plan = _planned("test", tmp_path / ".venv")
    assert "-r requirements.lock" in plan


def test_install_compiles_the_packages_and_our_sources(tmp_path: Path) -> None:
    # Service processes run with PYTHONDONTWRITEBYTECODE: bytecode exists only if install wrote it.
    plan = _planned("install", tmp_path / ".venv")
    lines = plan.splitlines()
    (locked,) = [i for i, line in enumerate(lines) if "-r requirements.lock" in line]
    compiles = [i for i, line in enumerate(lines) if "-m compileall" in line]
    assert len(compiles) == 2
    site, ours = (lines[i] for i in compiles)
    # site-packages, right after they are installed, but for what nothing here imports
    assert compiles[0] == locked + 1 and 'get_path("purelib")' in site
    assert "-x '/(sympy|networkx|cfnlint)/'" in site
    assert {"shared", "services", "tests"} <= set(ours.split())


def test_install_compiles_changed_sources_when_the_packages_are_up_to_date(
    tmp_path: Path,
) -> None:
    venv = tmp_path / ".venv"
    venv.mkdir()
    (venv / ".installed").touch()  # newer than the locks: nothing to install
    plan = _planned("install", venv)
    assert "pip install" not in plan
    assert f"{venv}/bin/python -m compileall" in plan
