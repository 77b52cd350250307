"""Static check of docker-compose.yml: no Docker engine runs here, so we check what we can.

Every service that runs our image must run a real ``soong-agent`` subcommand, and every environment
variable it sets must be one that the configuration (or the CLI) actually reads.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shlex
from pathlib import Path
from typing import Any

import yaml

from agent_core.config import ENV_VARS, ModelSettings

__all__ = ["CLI_ENV_VARS", "check_compose"]

# Read by the CLI rather than the settings loader.
CLI_ENV_VARS = frozenset({"SOONG_INSTANCE"})


def _known_env() -> set[str]:
    known = set(ENV_VARS) | CLI_ENV_VARS
    if ModelSettings().api_key_env:
        known.add(ModelSettings().api_key_env)  # type: ignore[arg-type]
    known.add("ANTHROPIC_API_KEY")  # read when model.api_key_env names it (anthropic provider)
    return known


def _env_names(env: Any) -> list[str]:
    if isinstance(env, dict):
        return [str(k) for k in env]
    if isinstance(env, list):
        return [str(item).split("=", 1)[0] for item in env]
    return []


def check_compose(path: Path, parser: argparse.ArgumentParser) -> list[str]:
    """Problems found in the compose file (empty when it is consistent with this code)."""
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        return [f"{path}: cannot read: {exc}"]
    if not isinstance(doc, dict) or not isinstance(doc.get("services"), dict):
        return [f"{path}: no services"]
    problems: list[str] = []
    known = _known_env()
    ours = 0
    for name, svc in doc["services"].items():
        command = svc.get("command")
        if command is None:
            continue
        argv = shlex.split(command) if isinstance(command, str) else [str(c) for c in command]
        if not argv or argv[0] != "soong-agent":
            continue
        ours += 1
        with contextlib.redirect_stderr(io.StringIO()) as err:
            try:
                parser.parse_args(argv[1:])
            except SystemExit:
                problems.append(
                    f"{name}: not a soong-agent command: {argv} ({err.getvalue().strip()})"
                )
        for var in _env_names(svc.get("environment")):
            if var not in known:
                problems.append(f"{name}: environment variable {var} is not read by soong-agent")
    if ours == 0:
        problems.append(f"{path}: no service runs soong-agent")
    return problems
