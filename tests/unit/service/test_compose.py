"""docker-compose.yml is consistent with the CLI and the configuration (no Docker engine here)."""

from __future__ import annotations

from pathlib import Path

import yaml

from agent_core.bus import SERVICE_NAMES
from agent_core.cli import build_parser
from agent_core.service.compose import check_compose

REPO = Path(__file__).resolve().parents[3]
COMPOSE = REPO / "docker-compose.yml"


def test_compose_file_is_consistent() -> None:
    assert check_compose(COMPOSE, build_parser()) == []


def test_compose_runs_every_service_with_persistence() -> None:
    doc = yaml.safe_load(COMPOSE.read_text())
    services = doc["services"]
    served = {
        svc["command"][2]
        for svc in services.values()
        if svc.get("command", [None])[0] == "soong-agent"
    }
    assert served == set(SERVICE_NAMES)
    assert services["run_worker"]["deploy"]["replicas"] >= 2
    assert "appendonly yes" in (REPO / "deploy" / "valkey.conf").read_text()
    assert {"redis", "sqlite", "workspaces", "memory"} <= set(doc["volumes"])
    assert "USER soong" in (REPO / "deploy" / "Dockerfile").read_text()


def test_check_finds_bad_commands_and_unknown_env(tmp_path: Path) -> None:
    bad = tmp_path / "compose.yml"
    bad.write_text(
        yaml.safe_dump(
            {
                "services": {
                    "a": {"command": ["soong-agent", "serve", "no_such_service"]},
                    "b": {
                        "command": "soong-agent serve gateway",
                        "environment": {"SOONG_TYPO": "1"},
                    },
                }
            }
        )
    )
    problems = check_compose(bad, build_parser())
    assert any("a: not a soong-agent command" in p for p in problems)
    assert any("SOONG_TYPO" in p for p in problems)
