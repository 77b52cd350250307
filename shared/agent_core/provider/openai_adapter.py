"""OpenAI Chat Completions streaming through the official ``openai`` SDK.

``base_url`` is configurable, so any OpenAI-compatible server (vLLM, llama.cpp, LM Studio) works.
The SDK's own retries are off (``max_retries=0``): retries are ours, and happen only before the
first event (see :mod:`agent_core.provider.retry`). SDK types stay inside this module.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import httpx2
import msgspec
import openai

from agent_core.errors import ProviderError
from agent_core.provider.base import ProviderSettings
from agent_core.provider.errors import (
    connection_error,
    incomplete_error,
    malformed_error,
    status_error,
    stream_error,
    timeout_error,
)
from agent_core.provider.openai_mapping import build_params
from agent_core.provider.retry import RetryPolicy, stream_with_retries
from agent_core.provider.toolcalls import ToolCallAssembler
from agent_core.provider.wire import SSEDecoder, body_chunks, struct_loads, text_delta
from agent_core.types.enums import StopReason
from agent_core.types.protocol import (
    MessageEndEvent,
    MessageStartEvent,
    ModelEvent,
    ModelRequest,
    Usage,
    UsageEvent,
)

__all__ = ["OpenAIProviderAdapter", "map_openai_error"]

PROVIDER = "openai"

_STOP_REASONS = {
    "stop": StopReason.END_TURN,
    "length": StopReason.MAX_TOKENS,
    "tool_calls": StopReason.TOOL_USE,
    "function_call": StopReason.TOOL_USE,
    "content_filter": StopReason.CONTENT_FILTER,
}


def map_openai_error(err: openai.OpenAIError, provider: str = PROVIDER) -> ProviderError:
    """Translate an SDK exception into a redacted ``ProviderError``."""
    if isinstance(err, openai.APITimeoutError):
        return timeout_error(provider, err)
    if isinstance(err, openai.APIConnectionError):
        return connection_error(provider, err)
    if isinstance(err, openai.APIStatusError):
        return status_error(
            provider,
            err.status_code,
            err.message,
            headers=dict(err.response.headers),
            error_type=err.type,
            error_code=err.code,
            body=err.body,
            cause=err,
        )
    if isinstance(err, openai.APIError):  # an API error without an HTTP status
        return stream_error(provider, err.type, err.message)
    return ProviderError("provider_error", f"{provider}: {type(err).__name__}", provider=provider)


def _stream_error(provider: str, error: Any) -> ProviderError:
    """The error the API reports as a chunk mid-stream (as the SDK reads it)."""
    message = error.get("message") if isinstance(error, dict) else None
    if not message or not isinstance(message, str):
        message = "An error occurred during streaming"
    error_type = error.get("type") if isinstance(error, dict) else None
    return stream_error(provider, error_type if isinstance(error_type, str) else None, message)


class _Delta(msgspec.Struct, gc=False):
    """``choices[].delta``: the fields read (any more a server sends are skipped unbuilt)."""

    content: Any = None
    refusal: Any = None
    tool_calls: Any = None  # a list of dicts: the tool-call assembler reads them


class _Choice(msgspec.Struct, gc=False):
    index: Any = 0
    delta: _Delta | None = None
    finish_reason: Any = None


class _Chunk(msgspec.Struct, gc=False):
    """One streamed Chat Completions chunk, as far as it is read (``Any`` where servers vary)."""

    id: Any = None
    model: Any = None
    choices: list[_Choice] | None = None
    usage: Any = None
    error: Any = None  # {"error": {...}} inside a 200 stream


_parse_chunk = struct_loads(_Chunk)


class _ChunkState:
    """Turns Chat Completions chunks into normalized events.

    Chunks are parsed into the small structs above, not the SDK's typed chunk models: those cost
    ~70 µs each to build, several times the cost of everything else per chunk, and check fields
    nothing here reads. A refusal (``delta.refusal``) is delivered as text and ends the response
    as ``refusal``; tool calls still open at ``finish_reason: "length"`` were cut by the output
    limit.
    """

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.started = False
        self.refused = False
        self.produced = False  # any text, refusal or tool call
        self.calls = ToolCallAssembler()
        self.finish_reason: str | None = None

    def feed(self, chunk: _Chunk) -> list[ModelEvent]:
        if chunk.error:
            raise _stream_error(self.provider, chunk.error)
        out: list[ModelEvent] = []
        if not self.started:
            self.started = True
            out.append(MessageStartEvent(model=chunk.model, response_id=chunk.id))
        opened = len(out)
        for choice in chunk.choices or ():
            if choice.index != 0:
                continue  # n > 1 is never requested; ignore stray choices from odd servers
            if (delta := choice.delta) is not None:
                if content := delta.content:
                    out.append(text_delta(content))
                if refusal := delta.refusal:
                    self.refused = True
                    out.append(text_delta(refusal))
                for tc in delta.tool_calls or ():
                    out.extend(self._tool_call(tc))
            if (finish := choice.finish_reason) is not None:
                self.finish_reason = str(finish)
                out.extend(self.calls.finish_all(cut=self.finish_reason == "length"))
        # A length check, not a scan of the events: this runs once per streamed chunk.
        if len(out) > opened:
            self.produced = True
        if usage := chunk.usage:
            details = usage.get("prompt_tokens_details") or {}
            normalized = Usage(
                input_tokens=usage.get("prompt_tokens") or 0,
                output_tokens=usage.get("completion_tokens") or 0,
                cache_read_tokens=details.get("cached_tokens") or 0,
            )
            out.append(UsageEvent(usage=normalized))
        return out

    def _tool_call(self, tc: Any) -> list[ModelEvent]:
        out: list[ModelEvent] = []
        key = tc.get("index", 0)
        fn = tc.get("function") or {}
        if not self.calls.is_open(key):
            out.append(self.calls.start(key, tc.get("id") or "", fn.get("name") or ""))
        if arguments := fn.get("arguments"):
            out.append(self.calls.add(key, arguments))
        return out

    def end(self) -> MessageEndEvent:
        if self.finish_reason is None:
            raise incomplete_error(self.provider, "without a finish_reason")
        stop = _STOP_REASONS.get(self.finish_reason, StopReason.OTHER)
        if stop == StopReason.END_TURN and self.refused:
            stop = StopReason.REFUSAL
        elif stop == StopReason.END_TURN and self.calls.count:
            stop = StopReason.TOOL_USE  # some compatible servers say "stop" after tool calls
        return MessageEndEvent(stop_reason=stop, raw_stop_reason=self.finish_reason)


class OpenAIProviderAdapter:
    """Streams Chat Completions; the SDK client is created on first use (no I/O in __init__)."""

    provider = PROVIDER

    def __init__(self, settings: ProviderSettings) -> None:
        self.settings = settings
        self.policy = RetryPolicy.from_settings(settings)
        self._client: openai.AsyncOpenAI | None = None

    def warm_up(self) -> None:
        """Build the client now (CPU only, no I/O), so the first run does not pay for it."""
        self._get_client()

    def _get_client(self) -> openai.AsyncOpenAI:
        if self._client is None:
            s = self.settings
            self._client = openai.AsyncOpenAI(
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
                "/chat/completions", body=params, cast_to=httpx2.Response, stream=True
            )
        except openai.OpenAIError as err:
            raise map_openai_error(err) from err
        state = _ChunkState(self.provider)
        decoder = SSEDecoder()
        try:
            chunks = body_chunks(response)
            async for raw in chunks:
                for _name, data in decoder.feed(raw):
                    if data.startswith(b"[DONE]"):
                        # HTTP/1.1 reuses the connection only once the body was read to its
                        # end; draining also ends the outer loop.
                        async for _rest in chunks:
                            pass
                        break
                    if data:
                        for event in state.feed(_parse_chunk(data)):
                            yield event
        except httpx2.TimeoutException as err:
            raise timeout_error(self.provider, err) from err
        except httpx2.HTTPError as err:
            raise connection_error(self.provider, err) from err
        except (ValueError, TypeError, KeyError, AttributeError) as err:  # not JSON / wrong shape
            raise malformed_error(self.provider, "chunk is not valid JSON", err) from err
        finally:
            await response.aclose()
        if state.finish_reason is None and not state.produced:
            # Nothing but (at most) an opening role chunk: llama-cpp-python opens the stream
            # before it meets an overflow, llama.cpp's server sends nothing at all.
            await self._ask_without_streaming(params)
        yield state.end()

    async def _ask_without_streaming(self, params: dict[str, Any]) -> None:
        """A 200 stream with no data (or only its opening role chunk) is how some OpenAI-compatible servers answer an error
        they met while streaming (llama.cpp's, on a prompt over its window): the same request
        without streaming gets the real status, raised here as its typed error (an overflow is
        then compacted, not retried blindly). A 200 answer leaves the empty stream what it was,
        an incomplete response."""
        plain = {k: v for k, v in params.items() if k not in ("stream", "stream_options")}
        try:
            response = await self._get_client().post(
                "/chat/completions",
                body={**plain, "stream": False},
                cast_to=httpx2.Response,
                # The server may have closed the kept-alive connection the failed stream came
                # on (llama-cpp-python does): one retry goes out on a fresh connection.
                options={"max_retries": 1},
            )
        except openai.APIStatusError as err:
            raise map_openai_error(err) from err
        except openai.OpenAIError:  # unreachable now: the empty stream stays the error
            return
        await response.aclose()

    async def aclose(self) -> None:
        """Close the SDK client and its connection pool."""
        if self._client is not None:
            await self._client.close()
            self._client = None
