"""An agent's configuration: the deployment's model settings with a session's or run's overrides.

One function for every place that needs it — the gateway checks a session's and a message's
overrides with it (a config that cannot be built answers 422, before any run exists), the
run-worker builds each run's config with it — so what is accepted is what runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from agent_core.config.providers import key_env
from agent_core.config.schema import Settings
from agent_core.errors import ConfigError
from agent_core.types.enums import PermissionPolicy
from agent_core.types.runtime import AgentConfig, merge_overrides

__all__ = ["agent_config"]


def agent_config(settings: Settings, overrides: Mapping[str, Any]) -> AgentConfig:
    """The model settings an agent asks for, with ``overrides`` on top.

    ``overrides["provider"]`` names a ``[providers.<name>]`` endpoint (its kind, URL, key variable
    and output limit; ``model`` must be one of its models, its default when absent) or the
    ``[model]`` section's provider; without it, the ``[model]`` section is the base.

    Raises :class:`ConfigError`: ``unknown_provider`` when the overrides name a provider the
    deployment does not serve, ``unknown_model`` when a named provider does not offer the model,
    ``invalid_config`` when the result is not a valid config.
    """
    m = settings.model
    asked = overrides.get("provider")
    named = settings.providers.get(asked) if isinstance(asked, str) else None
    if asked is not None and named is None and asked != m.provider:
        known = [m.provider, *sorted(settings.providers)]
        raise ConfigError(
            "unknown_provider",
            f"this deployment serves providers {known}, not {str(asked)[:64]!r}",
            details={"key": "agent_config.provider", "known": known},
        )
    base: dict[str, Any] = {
        "provider": m.provider,
        "model": m.name,
        "base_url": m.base_url,
        "api_key_env": key_env(m.provider, m.api_key_env),
        "max_output_tokens": m.max_output_tokens,
        "context_window": m.context_window,
        "tool_policy": {"default": PermissionPolicy.ALLOW.value},
        "accepts": None if m.accepts is None else list(m.accepts),
    }
    if named is not None:
        model = overrides.get("model", named.model)
        if named.models and model not in named.models:
            raise ConfigError(
                "unknown_model",
                f"provider {asked!r} offers models {list(named.models)}, not {str(model)[:64]!r}",
                details={"key": "agent_config.model", "known": list(named.models)},
            )
        base |= {
            "provider": named.kind,
            "model": named.model,
            "base_url": named.base_url,
            "api_key_env": key_env(named.kind, named.api_key_env),
            "max_output_tokens": named.max_output_tokens,
            "context_window": named.context_window,
            "accepts": None if named.accepts is None else list(named.accepts),
            "metadata": {"provider_name": asked},
        }
        overrides = {k: v for k, v in overrides.items() if k != "provider"}
    try:
        return AgentConfig.model_validate(merge_overrides(base, overrides))
    except ValidationError as exc:
        # Every invalid field with its reason (``details.errors``, the form of the gateway's
        # request validation errors), so a person fixes them all at once; the first one keys it.
        errors = [
            {
                "field": ".".join(["agent_config", *(str(p) for p in e["loc"])]),
                "message": e["msg"],
                "type": e["type"],
            }
            for e in exc.errors(include_input=False, include_url=False)
        ]
        said = "; ".join(
            f"{e['field'].removeprefix('agent_config.')}: {e['message']}" for e in errors
        )
        raise ConfigError(
            "invalid_config",
            f"the agent configuration is invalid: {said}",
            details={"key": errors[0]["field"], "errors": errors},
        ) from exc
