"""A run-worker's command tools: registered beside the built-ins, refused when a name is taken,
left out (and said so) without a sandbox to run them in."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from agent_core.config import load_settings
from agent_core.errors import ConfigError
from agent_core.tools import ToolRegistry, builtin_tools
from agent_core.tools.sandbox import SandboxLimits
from agent_core.tools.sandbox.runners import DirectRunner, SandboxConfig
from agent_core.tools.sandbox.setup import CodeSandbox
from services.run_worker.service import _add_command_tools


def _ctx(tmp_path: Path, name: str) -> Any:
    text = f'[tools.{name}]\ndescription = "d"\ncommand = ["/bin/true"]\n'
    (tmp_path / "config.toml").write_text(text)
    settings = load_settings(env={"SOONG_AGENT_HOME": str(tmp_path)})
    return SimpleNamespace(settings=settings, log=logging.getLogger("test"))


def _sandbox(runner: DirectRunner | None) -> CodeSandbox:
    return CodeSandbox(runner, SandboxLimits(), run_command=False, status="test")


def test_a_declared_tool_joins_the_registry(tmp_path: Path) -> None:
    tools = ToolRegistry(builtin_tools())
    _add_command_tools(_ctx(tmp_path, "stamp"), _sandbox(DirectRunner(SandboxConfig())), tools)
    stamp = tools.get("stamp")
    assert stamp is not None and stamp.definition().description == "d" and stamp.writes


def test_a_built_in_name_stops_the_worker_with_the_key(tmp_path: Path) -> None:
    tools = ToolRegistry(builtin_tools())
    with pytest.raises(ConfigError) as info:
        _add_command_tools(
            _ctx(tmp_path, "read_file"), _sandbox(DirectRunner(SandboxConfig())), tools
        )
    assert info.value.code == "duplicate_tool" and info.value.details["key"] == "tools.read_file"


def test_without_a_sandbox_no_command_tool_is_offered(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tools = ToolRegistry(builtin_tools())
    with caplog.at_level(logging.WARNING):
        _add_command_tools(_ctx(tmp_path, "stamp"), _sandbox(None), tools)
    assert tools.get("stamp") is None and "stamp are not offered" in caplog.text
