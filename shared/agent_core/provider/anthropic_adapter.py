"""Anthropic Messages streaming through the official ``anthropic`` SDK.

Raw stream events (``message_start``, ``content_block_*``, ``message_delta``, ``message_stop``)
are handled here only; the core sees normalized events. The SDK's retries are off: ours happen
only before the first event. SDK types stay inside this module.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import anthropic
import httpx2
import msgspec

from agent_core.errors import ProviderError
from agent_core.provider.anthropic_mapping import build_params
from agent_core.provider.base import ProviderSettings
from agent_core.provider.errors import (
    connection_error,
    incomplete_error,
    malformed_error,
    status_error,
    stream_error,
    timeout_error,
)
from agent_core.provider.retry import RetryPolicy, stream_with_retries
from agent_core.provider.toolcalls import ToolCallAssembler
from agent_core.provider.wire import SSEDecoder, body_chunks, loads, struct_loads, text_delta
from agent_core.types.enums import StopReason
from agent_core.types.protocol import (
    MessageEndEvent,
    MessageStartEvent,
    ModelEvent,
    ModelRequest,
    Usage,
    UsageEvent,
)

__all__ = ["AnthropicProviderAdapter", "map_anthropic_error"]

PROVIDER = "anthropic"

_STOP_REASONS = {
    "end_turn": StopReason.END_TURN,
    "tool_use": StopReason.TOOL_USE,
    "max_tokens": StopReason.MAX_TOKENS,
    "stop_sequence": StopReason.STOP_SEQUENCE,
    "refusal": StopReason.REFUSAL,
    # The answer filled the context window: cut short, like the output limit.
    "model_context_window_exceeded": StopReason.MAX_TOKENS,
}


def map_anthropic_error(err: anthropic.AnthropicError, provider: str = PROVIDER) -> ProviderError:
    """Translate an SDK exception into a redacted ``ProviderError``."""
    if isinstance(err, anthropic.APITimeoutError):
        return timeout_error(provider, err)
    if isinstance(err, anthropic.APIConnectionError):
        return connection_error(provider, err)
    if isinstance(err, anthropic.APIStatusError):
        return status_error(
            provider,
            err.status_code,
            err.api_message or err.message,
            headers=dict(err.response.headers),
            error_type=err.type,
            error_code=getattr(err, "error_code", None),  # error.details.error_code (newer SDKs)
            body=err.body,
            cause=err,
        )
    return ProviderError("provider_error", f"{provider}: {type(err).__name__}", provider=provider)


def _event_error(provider: str, data: bytes) -> ProviderError:
    """An ``event: error`` inside a 200 stream: ``{"type": "error", "error": {type, message}}``."""
    try:
        body = loads(data)
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        text = data.decode(errors="replace") or "error event without a body"
        return stream_error(provider, None, text)
    error_type, message = error.get("type"), error.get("message")
    return stream_error(
        provider,
        error_type if isinstance(error_type, str) else None,
        message if isinstance(message, str) and message else str(body),
    )


class _Event(msgspec.Struct, gc=False):
    """One Messages stream event, as far as it is read; the rest of it is skipped unbuilt.

    ``type`` is required; the others belong to some kinds only, so an absent one is ``None`` and
    :meth:`_EventState.feed` refuses it where its kind needs it (as a missing key did).
    """

    type: Any
    index: Any = None
    delta: Any = None
    content_block: Any = None
    message: Any = None
    usage: Any = None


_parse_event = struct_loads(_Event)


def _index(event: _Event) -> Any:
    """The event's block index, which its kind requires."""
    if event.index is None:
        raise KeyError("index")
    return event.index


class _EventState:
    """Turns raw Messages stream events into normalized events.

    Events are parsed into :class:`_Event`, not the SDK's typed event models: those cost more
    to build than everything else per event, and check fields nothing here reads. Usage is
    reported as it arrives: the input tokens with ``message_start`` (so a stream that fails
    later still counts them), the rest with ``message_delta``. The API closes a tool call's
    block before it says why the message stopped, so a call whose arguments do not parse waits
    for ``message_delta``: ``max_tokens`` means the limit cut it off.
    """

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.calls = ToolCallAssembler()
        self.usage = Usage()  # cumulative, as the API reports it
        self.reported = Usage()  # what UsageEvents carried so far
        self.stop_reason: str | None = None
        self.stopped = False

    def feed(self, event: _Event) -> list[ModelEvent]:
        """The normalized events of one; a field its kind needs is missing: ``KeyError`` or
        ``TypeError`` (the adapter reports either as a malformed stream)."""
        kind = event.type
        if kind == "content_block_delta":
            delta = event.delta
            if delta["type"] == "text_delta":
                return [text_delta(delta["text"])] if delta["text"] else []
            if delta["type"] == "input_json_delta" and delta["partial_json"]:
                return [self.calls.add(_index(event), delta["partial_json"])]
            return []  # thinking, signature and citation deltas are not part of the protocol
        if kind == "content_block_start":
            out: list[ModelEvent] = list(self.calls.settle(cut=False))  # a block followed
            block = event.content_block
            if block["type"] == "tool_use":
                out.append(self.calls.start(_index(event), block["id"], block["name"]))
            elif block["type"] == "text" and block.get("text"):
                out.append(text_delta(block["text"]))
            return out
        if kind == "content_block_stop":
            index = _index(event)
            end = self.calls.close(index) if self.calls.is_open(index) else None
            return [end] if end is not None else []
        if kind == "message_start":
            msg = event.message
            self.usage = _usage(msg.get("usage"), self.usage)
            return [
                MessageStartEvent(model=msg.get("model"), response_id=msg.get("id")),
                self._report(),
            ]
        if kind == "message_delta":
            self.stop_reason = (event.delta or {}).get("stop_reason")
            self.usage = _usage(event.usage, self.usage)
            cut = _STOP_REASONS.get(self.stop_reason or "") is StopReason.MAX_TOKENS
            return [*self.calls.settle(cut=cut), self._report()]
        if kind == "message_stop":
            self.stopped = True
            stop = _STOP_REASONS.get(self.stop_reason or "", StopReason.OTHER)
            return [MessageEndEvent(stop_reason=stop, raw_stop_reason=self.stop_reason)]
        return []

    def _report(self) -> UsageEvent:
        """The usage not reported yet (the API's figures are cumulative)."""
        new, old = self.usage, self.reported
        self.reported = new
        return UsageEvent(
            usage=Usage(
                input_tokens=max(new.input_tokens - old.input_tokens, 0),
                output_tokens=max(new.output_tokens - old.output_tokens, 0),
                cache_read_tokens=max(new.cache_read_tokens - old.cache_read_tokens, 0),
                cache_write_tokens=max(new.cache_write_tokens - old.cache_write_tokens, 0),
            )
        )

    def check_complete(self) -> None:
        if not self.stopped:
            raise incomplete_error(self.provider, "before message_stop")


def _usage(raw: Any, prev: Usage) -> Usage:
    """Merge a usage object (message_start or message_delta; fields may be missing or null)."""
    raw = raw or {}

    def pick(name: str, old: int) -> int:
        value = raw.get(name)
        return old if value is None else int(value)

    return Usage(
        input_tokens=pick("input_tokens", prev.input_tokens),
        output_tokens=pick("output_tokens", prev.output_tokens),
        cache_read_tokens=pick("cache_read_input_tokens", prev.cache_read_tokens),
        cache_write_tokens=pick("cache_creation_input_tokens", prev.cache_write_tokens),
    )


class AnthropicProviderAdapter:
    """Streams Messages; the SDK client is created on first use (no I/O in __init__)."""

    provider = PROVIDER

    def __init__(self, settings: ProviderSettings) -> None:
        self.settings = settings
        self.policy = RetryPolicy.from_settings(settings)
        self._client: anthropic.AsyncAnthropic | None = None

    def warm_up(self) -> None:
        """Build the client now (CPU only, no I/O), so the first run does not pay for it."""
        self._get_client()

    def _get_client(self) -> anthropic.AsyncAnthropic:
        if self._client is None:
            s = self.settings
            self._client = anthropic.AsyncAnthropic(
                api_key=s.api_key_value(),
                base_url=s.base_url,
                timeout=httpx2.Timeout(s.timeout_s, connect=s.connect_timeout_s),
                max_retries=0,
            )
        return self._client

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one response (contract in :mod:`agent_core.provider.base`)."""
        return stream_with_retries(lambda: self._attempt(request), self.policy)

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        params = build_params(request, self.settings)
        client = self._get_client()
        try:
            # The SDK's low-level post with cast_to=httpx2.Response: its transport, auth, headers
            # and HTTP status errors, with the body left unread; the SSE is decoded here (see
            # agent_core.provider.wire for why not through the SDK's stream class).
            response = await client.post(
                "/v1/messages", body=params, cast_to=httpx2.Response, stream=True
            )
        except anthropic.AnthropicError as err:
            raise map_anthropic_error(err) from err
        state = _EventState(self.provider)
        decoder = SSEDecoder()
        try:
            async for raw in body_chunks(response):
                for name, data in decoder.feed(raw):
                    # As the SDK reads the stream: unnamed events and pings are skipped.
                    if name is None or name == b"ping" or not data:
                        continue
                    if name == b"error":
                        raise _event_error(self.provider, data)
                    for normalized in state.feed(_parse_event(data)):
                        yield normalized
        except httpx2.TimeoutException as err:
            raise timeout_error(self.provider, err) from err
        except httpx2.HTTPError as err:
            raise connection_error(self.provider, err) from err
        except (ValueError, TypeError, KeyError, AttributeError) as err:  # not JSON / wrong shape
            raise malformed_error(self.provider, "event is not valid JSON", err) from err
        finally:
            await response.aclose()
        state.check_complete()

    async def aclose(self) -> None:
        """Close the SDK client and its connection pool."""
        if self._client is not None:
            await self._client.close()
            self._client = None
