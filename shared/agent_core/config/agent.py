"""An agent's configuration: the deployment's model settings with a session's or run's overrides.

One function for every place that needs it — the gateway checks a session's and a message's
overrides with it (a config that cannot be built answers 422, before any run exists), the
run-worker builds each run's config with it — so what is accepted is what runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from agent_core.config.schema import Settings
from agent_core.errors import ConfigError
from agent_core.types.enums import PermissionPolicy
from agent_core.types.runtime import AgentConfig

__all__ = ["agent_config"]


def agent_config(settings: Settings, overrides: Mapping[str, Any]) -> AgentConfig:
    """The deployment's default model settings with ``overrides`` on top.

    Raises :class:`ConfigError`: ``unknown_provider`` when the overrides name a provider the
    deployment does not serve (it serves the provider of its ``[model]`` section, with that
    section's endpoint and key), ``invalid_config`` when the result is not a valid config.
    """
    m = settings.model
    asked = overrides.get("provider")
    if asked is not None and asked != m.provider:
        raise ConfigError(
            "unknown_provider",
            f"this deployment serves provider {m.provider!r}, not {str(asked)[:64]!r}",
            details={"key": "agent_config.provider", "known": [m.provider]},
        )
    base: dict[str, Any] = {
        "provider": m.provider,
        "model": m.name,
        "base_url": m.base_url,
        "api_key_env": m.api_key_env,
        "max_output_tokens": m.max_output_tokens,
        "context_window": m.context_window,
        "tool_policy": {"default": PermissionPolicy.ALLOW.value},
    }
    try:
        return AgentConfig.model_validate({**base, **overrides})
    except ValidationError as exc:
        error = exc.errors(include_input=False, include_url=False)[0]
        field = ".".join(str(p) for p in error["loc"]) or "agent_config"
        raise ConfigError(
            "invalid_config",
            f"the agent configuration is invalid: {field}: {error['msg']}",
            details={"key": f"agent_config.{field}" if error["loc"] else "agent_config"},
        ) from exc
