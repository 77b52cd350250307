"""An agent's config: the deployment's model settings with overrides; what cannot run is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_core.config import Settings, agent_config
from agent_core.config.schema import ModelSettings
from agent_core.errors import ConfigError


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
