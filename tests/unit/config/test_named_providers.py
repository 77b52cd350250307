"""Named providers: several model endpoints in one deployment, picked by name per agent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_core.config import Settings, agent_config, load_settings
from agent_core.errors import ConfigError

ENDPOINTS = {
    "vllm": {
        "kind": "openai",
        "base_url": "http://127.0.0.1:8001/v1",
        "api_key_env": "VLLM_KEY",
        "models": ["qwen2.5-coder", "llama-3.1-8b"],
        "max_output_tokens": 2048,
    },
    "claude": {"kind": "anthropic", "api_key_env": "ANTHROPIC_API_KEY", "default_model": "c-4"},
}


def settings(tmp_path: Path, providers: Any = ENDPOINTS) -> Settings:
    return Settings.model_validate({"home": str(tmp_path), "providers": providers})


def test_an_agent_picks_an_endpoint_by_name(tmp_path: Path) -> None:
    chosen = settings(tmp_path)
    config = agent_config(chosen, {"provider": "vllm", "model": "llama-3.1-8b", "max_turns": 3})
    assert (config.provider, config.model, config.base_url, config.api_key_env) == (
        "openai",
        "llama-3.1-8b",
        "http://127.0.0.1:8001/v1",
        "VLLM_KEY",
    )
    assert config.max_output_tokens == 2048 and config.max_turns == 3
    assert config.metadata["provider_name"] == "vllm"
    # No model named: the endpoint's default (its first model, or default_model).
    assert agent_config(chosen, {"provider": "vllm"}).model == "qwen2.5-coder"
    claude = agent_config(chosen, {"provider": "claude"})
    assert (claude.provider, claude.model, claude.base_url) == ("anthropic", "c-4", None)
    # Without a provider the [model] section serves, as before.
    default = agent_config(chosen, {})
    assert (default.provider, default.base_url) == (chosen.model.provider, chosen.model.base_url)


def test_unknown_names_and_models_are_refused_with_what_is_known(tmp_path: Path) -> None:
    chosen = settings(tmp_path)
    with pytest.raises(ConfigError) as info:
        agent_config(chosen, {"provider": "mistral"})
    assert info.value.code == "unknown_provider"
    assert info.value.details["known"] == ["openai", "claude", "vllm"]
    with pytest.raises(ConfigError) as info:
        agent_config(chosen, {"provider": "vllm", "model": "gpt-4o"})
    assert info.value.code == "unknown_model"
    assert info.value.details["known"] == ["qwen2.5-coder", "llama-3.1-8b"]


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ('kind = "openai"', "name its models, or a default_model"),
        ('kind = "openai"\nmodels = ["a"]\ndefault_model = "b"', "is not one of its models"),
        ('kind = "openai"\nmodels = ["a"]\nbase_url = "ftp://x"', "providers.local.base_url"),
        ('kind = "openai"\nmodels = ["a"]\napi_key = "sk-inline"', "providers.local.api_key"),
    ],
)
def test_bad_endpoints_are_refused_at_load(tmp_path: Path, entry: str, says: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f"[providers.local]\n{entry}\n")
    with pytest.raises(ConfigError) as info:
        load_settings(env={"SOONG_AGENT_HOME": str(tmp_path)}, config_file=config)
    assert says in info.value.message
