"""An agent's config: the deployment's model settings with overrides; what cannot run is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_core.config import Settings, agent_config
from agent_core.config.schema import ModelSettings
from agent_core.errors import ConfigError
from agent_core.types.enums import PermissionPolicy
from agent_core.types.runtime import AgentConfigOverrides, merge_overrides


def _settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path, model=ModelSettings(provider="anthropic", name="m1"))


def test_overrides_go_on_top_of_the_deployments_model(tmp_path: Path) -> None:
    config = agent_config(_settings(tmp_path), {"model": "m2", "max_turns": 3})
    assert (config.provider, config.model, config.max_turns) == ("anthropic", "m2", 3)
    assert agent_config(_settings(tmp_path), {"provider": "anthropic"}).provider == "anthropic"


def test_a_provider_the_deployment_does_not_serve_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        agent_config(_settings(tmp_path), {"provider": "openia"})
    assert info.value.code == "unknown_provider"
    assert info.value.details == {"key": "agent_config.provider", "known": ["anthropic"]}


def test_a_config_no_run_could_start_with_is_refused_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        agent_config(_settings(tmp_path), {"temperature": 5})
    assert info.value.code == "invalid_config"
    assert "temperature" in info.value.message


def test_an_output_limit_past_the_budget_is_the_budget(tmp_path: Path) -> None:
    overrides = {"max_output_tokens": 5000, "budget": {"max_total_tokens": 1000}}
    assert agent_config(_settings(tmp_path), overrides).max_output_tokens == 1000


def test_a_policy_that_lists_tools_to_ask_about_leaves_every_other_tool_at_its_default(
    tmp_path: Path,
) -> None:
    asked = AgentConfigOverrides.model_validate({"tool_policy": {"ask": ["write_file"]}})
    policy = agent_config(_settings(tmp_path), asked.overrides()).tool_policy
    assert policy.policy_for("write_file") is PermissionPolicy.ASK
    assert policy.policy_for("read_file") is PermissionPolicy.ALLOW  # the deployment's default


def test_a_messages_policy_keeps_the_sessions_default_and_lists() -> None:
    session = AgentConfigOverrides.model_validate(
        {"tool_policy": {"default": "deny", "allow": ["read_file"]}}
    ).overrides()
    message = AgentConfigOverrides.model_validate({"tool_policy": {"ask": ["write_file"]}})
    merged = merge_overrides(session, message.overrides())
    assert merged["tool_policy"] == {
        "default": "deny",
        "allow": ["read_file"],
        "ask": ["write_file"],
    }


def test_every_invalid_field_is_named_with_its_reason(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        agent_config(_settings(tmp_path), {"temperature": 5, "max_turns": 0})
    fields = {e["field"]: e["message"] for e in info.value.details["errors"]}
    assert set(fields) == {"agent_config.temperature", "agent_config.max_turns"}
    assert all(fields.values())
    assert "temperature" in info.value.message and "max_turns" in info.value.message
