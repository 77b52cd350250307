"""The per-runtime provider registry."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agent_core.errors import ConfigError
from agent_core.provider import ProviderAdapter, ProviderRegistry, ProviderSettings
from agent_core.provider.anthropic_adapter import AnthropicProviderAdapter
from agent_core.provider.ollama_adapter import OllamaProviderAdapter
from agent_core.provider.openai_adapter import OpenAIProviderAdapter
from agent_core.types.protocol import MessageStartEvent, ModelEvent, ModelRequest


class EchoAdapter:
    def __init__(self, settings: ProviderSettings) -> None:
        self.settings = settings

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield MessageStartEvent(model=request.model)


def test_builtin_keys_create_their_adapters() -> None:
    registry = ProviderRegistry()
    assert list(registry.keys()) == ["anthropic", "ollama", "openai"]
    expected = {
        "openai": OpenAIProviderAdapter,
        "anthropic": AnthropicProviderAdapter,
        "ollama": OllamaProviderAdapter,
    }
    for key, cls in expected.items():
        adapter = registry.create(ProviderSettings(provider=key))
        assert type(adapter) is cls
        assert isinstance(adapter, ProviderAdapter)


def test_unknown_key_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as info:
        ProviderRegistry().create(ProviderSettings(provider="nope"))
    assert info.value.code == "unknown_provider"
    assert info.value.details == {"key": "model.provider", "value": "nope"}


def test_register_provider_and_instances_are_isolated() -> None:
    a, b = ProviderRegistry(), ProviderRegistry()
    a.register_provider("echo", EchoAdapter)
    assert "echo" in a and "echo" not in b
    adapter = a.create(ProviderSettings(provider="echo", base_url="http://x"))
    assert isinstance(adapter, EchoAdapter) and adapter.settings.base_url == "http://x"
    with pytest.raises(ConfigError):
        b.create(ProviderSettings(provider="echo"))


def test_duplicate_key_needs_replace() -> None:
    registry = ProviderRegistry()
    with pytest.raises(ConfigError) as info:
        registry.register_provider("openai", EchoAdapter)
    assert info.value.code == "duplicate_provider"
    registry.register_provider("openai", EchoAdapter, replace=True)
    assert isinstance(registry.create(ProviderSettings(provider="openai")), EchoAdapter)


def test_constructor_providers_and_no_builtins() -> None:
    registry = ProviderRegistry({"echo": EchoAdapter}, builtins=False)
    assert list(registry.keys()) == ["echo"]
    with pytest.raises(ConfigError):
        registry.register_provider(" ", EchoAdapter)
