"""A model provider that cannot work stops start-up with the configuration error, at once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from agent_core.bus import BusNames
from agent_core.service import EXIT_CONFIG
from tests.conftest import REPO


def _cli(args: list[str], home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_core.cli", *args],
        cwd=REPO,
        env={**os.environ, "SOONG_AGENT_HOME": str(home), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_up_with_an_unknown_provider_stops_before_starting_anything(tmp_path: Path) -> None:
    done = _cli(["up", "--workers", "1"], tmp_path, SOONG_MODEL_PROVIDER="openia")
    assert done.returncode == 2, (
        done.stderr
    )  # the CLI's one-line failure, as for every config error
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and "unknown provider 'openia'" in line
    assert not (tmp_path / "redis").exists()  # no Valkey, no service was started


def test_a_worker_whose_provider_cannot_be_built_exits_with_the_config_error(
    tmp_path: Path, redis_url: str, names: BusNames
) -> None:
    done = _cli(
        ["serve", "run_worker", "--instance", "0"],
        tmp_path,
        SOONG_REDIS_URL=redis_url,
        SOONG_NAMESPACE=names.namespace,
        SOONG_MODEL_PROVIDER="openai",
        SOONG_MODEL_BASE_URL="http://[::1",
    )
    assert done.returncode == EXIT_CONFIG, done.stdout + done.stderr
    assert "provider 'openai' cannot be built" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr
