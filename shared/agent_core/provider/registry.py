"""The provider registry: one per runtime instance, never a global singleton.

Keys select an adapter factory (``model.provider`` in the config). The built-in keys are
``openai``, ``anthropic`` and ``ollama``; their modules are imported only when one is created,
so a runtime that uses one provider does not pay for importing the other SDKs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping

from agent_core.errors import ConfigError
from agent_core.provider.base import ProviderAdapter, ProviderSettings

__all__ = [
    "BUILTIN_PROVIDERS",
    "DEMO_PROVIDER",
    "ProviderFactory",
    "ProviderRegistry",
    "check_provider_key",
]

ProviderFactory = Callable[[ProviderSettings], ProviderAdapter]
"""Builds an adapter from its settings (an adapter class taking settings is a factory)."""

# The scripted demo model (``soong-agent up --fake-provider``), which run-workers register
# themselves when it is configured.
DEMO_PROVIDER = "fake"

BUILTIN_PROVIDERS: Mapping[str, str] = {
    "openai": "agent_core.provider.openai_adapter:OpenAIProviderAdapter",
    "anthropic": "agent_core.provider.anthropic_adapter:AnthropicProviderAdapter",
    "ollama": "agent_core.provider.ollama_adapter:OllamaProviderAdapter",
}


def _lazy(target: str) -> ProviderFactory:
    module_name, _, attr = target.partition(":")

    def factory(settings: ProviderSettings) -> ProviderAdapter:
        cls: ProviderFactory = getattr(importlib.import_module(module_name), attr)
        return cls(settings)

    return factory


class ProviderRegistry:
    """Maps provider keys to adapter factories for one runtime instance."""

    def __init__(
        self,
        providers: Mapping[str, ProviderFactory] | None = None,
        *,
        builtins: bool = True,
    ) -> None:
        self._factories: dict[str, ProviderFactory] = {}
        if builtins:
            for key, target in BUILTIN_PROVIDERS.items():
                self._factories[key] = _lazy(target)
        for key, factory in (providers or {}).items():
            self.register_provider(key, factory, replace=True)

    def register_provider(
        self, key: str, factory: ProviderFactory, *, replace: bool = False
    ) -> None:
        """Register ``factory`` under ``key``; an existing key needs ``replace=True``."""
        if not key or not key.strip():
            raise ConfigError("invalid_provider_key", "a provider key must be a non-empty string")
        if key in self._factories and not replace:
            raise ConfigError(
                "duplicate_provider",
                f"provider {key!r} is already registered (pass replace=True to override it)",
                details={"key": key},
            )
        self._factories[key] = factory

    def keys(self) -> Iterable[str]:
        """The registered keys, sorted."""
        return sorted(self._factories)

    def __contains__(self, key: object) -> bool:
        return key in self._factories

    def create(self, settings: ProviderSettings) -> ProviderAdapter:
        """Build the adapter ``settings.provider`` names; an unknown key is a ``ConfigError``."""
        factory = self._factories.get(settings.provider)
        if factory is None:
            raise ConfigError(
                "unknown_provider",
                f"unknown provider {settings.provider!r}; known: {', '.join(self.keys())}",
                details={"key": "model.provider", "value": settings.provider},
            )
        return factory(settings)


def check_provider_key(key: str, plugins: Iterable[str] = ()) -> None:
    """Raise the registry's ``unknown_provider`` :class:`ConfigError` unless ``key`` is a
    provider a deployment can configure (a built-in one, the demo model, or one of the
    ``plugins`` keys — whether a plug-in's factory works is the run-workers' check)."""
    if key != DEMO_PROVIDER and key not in set(plugins):
        registry = ProviderRegistry()
        if key not in registry:
            registry.create(ProviderSettings(provider=key))  # raises, naming the known keys
