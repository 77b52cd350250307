"""The provider adapter contract and the settings every built-in adapter is built from.

Contract of :meth:`ProviderAdapter.stream` (all built-in adapters hold it):

- It yields normalized :data:`~agent_core.types.protocol.ModelEvent`\\ s: ``message_start``
  first, then text / tool-call / ``usage`` events, and ``message_end`` last. Usage may come in
  several events, each with what the earlier ones did not carry: their sum is the response's.
- Every ``tool_call_start`` is closed, before ``message_end``, by exactly one ``tool_call_end``
  (its arguments are a JSON object) or ``tool_call_invalid`` (``invalid_arguments``: the model
  wrote something else, with the raw text and the parse error; ``truncated``: the output limit
  cut it off). A ``tool_call_invalid`` must never be executed, and it does not fail the
  response: it is the model's to fix.
- ``message_end.stop_reason`` is one :class:`~agent_core.types.enums.StopReason`: every output
  limit (OpenAI ``length``, Anthropic ``max_tokens``, Ollama ``length``) is ``max_tokens``.
- A failure *before the first event* raises :class:`~agent_core.errors.ProviderError` with a
  :class:`~agent_core.provider.errors.ProviderErrorCode` (after the adapter's retries, which
  only happen then). A prompt over the model's context window is ``context_length_exceeded``,
  never retried.
- A failure *after the first event* (an error event from the provider, a dropped connection, a
  malformed chunk, a stream cut short) ends the stream with one
  :class:`~agent_core.types.protocol.ErrorEvent`; it is never retried silently, because a new
  request would repeat text that was already delivered. Tool calls still open then are not
  closed: nothing of a failed response is executed.
- Cancelling the consuming task, or closing the iterator (``contextlib.aclosing``), closes the
  HTTP stream.
- No official SDK type is ever yielded or raised.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from agent_core.types.protocol import ModelEvent, ModelRequest

__all__ = ["ProviderAdapter", "ProviderSettings", "aclose_adapter"]


@runtime_checkable
class ProviderAdapter(Protocol):
    """Streams one model response for a provider-neutral request."""

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Yield the normalized events of one response (see the module docstring)."""
        ...


class ProviderSettings(BaseModel):
    """How to reach one provider: what ``model.provider`` + credentials in the config resolve to.

    ``provider`` is the registry key. ``api_key`` is passed explicitly to the SDKs so they never
    read the environment themselves. Retries apply only before a response's first event.
    """

    model_config = ConfigDict(extra="forbid")

    provider: str = "openai"
    base_url: str | None = None
    api_key: SecretStr | None = None
    timeout_s: float = Field(default=120.0, gt=0)
    connect_timeout_s: float = Field(default=10.0, gt=0)
    max_retries: int = Field(default=2, ge=0)
    retry_base_delay_s: float = Field(default=0.5, ge=0)
    retry_max_delay_s: float = Field(default=30.0, ge=0)
    # A Retry-After longer than this is not waited for: the error is raised instead.
    max_retry_after_s: float = Field(default=60.0, ge=0)
    # Anthropic requires max_tokens; used when the request does not set it.
    default_max_tokens: int = Field(default=4096, gt=0)
    # OpenAI: which field carries max_tokens. None = max_completion_tokens on api.openai.com,
    # max_tokens on other (OpenAI-compatible) servers, which mostly know only the older name.
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] | None = None
    # Ollama: whether the model can call tools. None = ask the server (/api/show) once.
    supports_tools: bool | None = None
    provider_options: dict[str, Any] = Field(default_factory=dict)

    def api_key_value(self, placeholder: str = "not-set") -> str:
        """The key as a string; a placeholder when unset (local servers need none)."""
        return self.api_key.get_secret_value() if self.api_key is not None else placeholder


async def aclose_adapter(adapter: ProviderAdapter) -> None:
    """Close an adapter's HTTP clients if it has an ``aclose`` method (custom ones may not)."""
    close = getattr(adapter, "aclose", None)
    if close is not None:
        await close()
