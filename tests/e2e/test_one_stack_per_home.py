"""One stack per home: a second ``up`` on a home in use exits non-zero, naming the holder, and the
first stack keeps serving untouched; the home's development key is made once and reused."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, run_one_message, start_stack, stop_stack

# Two stack start-ups: generous on a loaded machine, ~30 s on a quiet one.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def _up(home: Path, port: int, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SOONG_AGENT_HOME": str(home), "SOONG_GATEWAY_PORT": str(port)}
    env["SOONG_MODEL_PROVIDER"] = "fake"  # the refusal under test, not the missing model key
    env.pop("SOONG_REDIS_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "agent_core.cli", "up", "--workers", "1", *extra],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _one_run(url: str, key: str) -> str:
    return run_one_message(url, key)[2][-1]


def test_second_up_exits_and_the_first_keeps_serving(tmp_path: Path) -> None:
    home = tmp_path / "home"
    fake = {"SOONG_MODEL_PROVIDER": "fake"}
    first = start_stack(home, workers=1, extra_env=fake)
    try:
        stack_file = (home / "run" / "stack.json").read_text()
        assert "DEMO MODE" not in first.log()  # a provider set by the environment is no demo
        port = int(first.gateway_url.rsplit(":", 1)[1])
        second = _up(home, port)
        assert second.returncode == 2
        assert f"in use by another `soong-agent up` (pid {first.process.pid})" in second.stderr
        assert "Traceback" not in second.stderr + second.stdout
        assert len(second.stderr.strip().splitlines()) == 1
        # Nothing of the first was touched: its stack file, its gateway, its runs.
        assert (home / "run" / "stack.json").read_text() == stack_file
        assert first.process.poll() is None
        assert _one_run(first.gateway_url, first.api_key) == "event: run_finished"
    finally:
        assert stop_stack(first.process) == 0
    # The next `up` on this home reuses its development key: printed by id, never again in full.
    # It is `make demo`'s command this time, whose banner says what to send the demo model.
    again = start_stack(home, workers=1, new_key=False, args=["--fake-provider"])
    try:
        assert "development key " in again.log()
        assert "DEMO MODE — answers come from a scripted demo model: send it 'help'" in again.log()
        assert _one_run(again.gateway_url, first.api_key) == "event: run_finished"
        listing = subprocess.run(
            [sys.executable, "-m", "agent_core.cli", "keys", "list"],
            env={**os.environ, "SOONG_AGENT_HOME": str(home)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert listing.returncode == 0, listing.stderr
        row = [line for line in listing.stdout.splitlines() if " dev " in line]
        assert len(row) == 1 and "never" not in row[0] and row[0].endswith("live")
        assert first.api_key not in listing.stdout
    finally:
        assert stop_stack(again.process) == 0
