"""Provider adapters: the streaming contract, the per-runtime registry, and the built-ins.

The official ``openai`` and ``anthropic`` SDKs are imported only inside this package, and only
by the adapter modules (which the registry loads on first use); no SDK type leaves it.
Adapters: ``agent_core.provider.openai_adapter.OpenAIProviderAdapter``,
``agent_core.provider.anthropic_adapter.AnthropicProviderAdapter``,
``agent_core.provider.ollama_adapter.OllamaProviderAdapter``.
"""

from agent_core.provider.base import ProviderAdapter, ProviderSettings, aclose_adapter
from agent_core.provider.errors import ProviderErrorCode
from agent_core.provider.registry import (
    BUILTIN_PROVIDERS,
    DEMO_PROVIDER,
    ProviderFactory,
    ProviderRegistry,
    check_provider_key,
)
from agent_core.provider.retry import RetryPolicy, stream_with_retries

__all__ = [
    "BUILTIN_PROVIDERS",
    "DEMO_PROVIDER",
    "ProviderAdapter",
    "ProviderErrorCode",
    "ProviderFactory",
    "ProviderRegistry",
    "ProviderSettings",
    "RetryPolicy",
    "aclose_adapter",
    "check_provider_key",
    "stream_with_retries",
]
