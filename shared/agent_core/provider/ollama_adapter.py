"""Ollama ``/api/chat`` streaming (NDJSON) over httpx.

Tool calls are mapped when the model supports them. When a request needs tools and the adapter
knows the model cannot call them — ``supports_tools=False`` in the settings, or the server's
``/api/show`` capabilities lack ``tools`` — the call fails with a ``capability_unsupported``
:class:`~agent_core.errors.ProviderError` before any chat request is sent. Tools are never
emulated with prompt conventions.

Ollama parses tool calls itself. When the model's call does not parse, its parser ends the
stream with ``{"error": "error parsing tool call: raw='…', err=…"}`` (a line mid-stream, or an
HTTP 500 when nothing was sent yet); that becomes the call's ``tool_call_invalid`` with the raw
text and Ollama's reason, and the response ends normally — it is the model's to fix, not a
failure. Calls without an id (Ollama before 0.12) get a fresh one. The request says
``truncate: false`` (see :mod:`agent_core.provider.ollama_mapping`), so a prompt over the context
window is a ``context_length_exceeded`` error instead of silently lost messages.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import httpx

from agent_core.errors import ProviderError
from agent_core.provider.base import ProviderSettings
from agent_core.provider.errors import (
    capability_error,
    connection_error,
    incomplete_error,
    malformed_error,
    status_error,
    stream_error,
    timeout_error,
)
from agent_core.provider.ollama_mapping import build_body, needs_tools
from agent_core.provider.retry import RetryPolicy, stream_with_retries
from agent_core.provider.toolcalls import ToolCallAssembler
from agent_core.provider.wire import LineSplitter, body_chunks, loads, text_delta
from agent_core.types.enums import StopReason
from agent_core.types.protocol import (
    MessageEndEvent,
    MessageStartEvent,
    ModelEvent,
    ModelRequest,
    Usage,
    UsageEvent,
)

__all__ = ["DEFAULT_OLLAMA_URL", "OllamaProviderAdapter"]

PROVIDER = "ollama"
DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434"

# Ollama's own tool-call parser failing on the model's output (harmony/gpt-oss wording). The raw
# text may itself contain "', err=": the greedy group ends at the last one (linear time).
_TOOL_PARSE_ERROR = re.compile(r"error parsing tool call: raw='(.*)', err=(.*)\Z", re.DOTALL)


class _LineState:
    """Turns ``/api/chat`` NDJSON objects into normalized events."""

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.calls = ToolCallAssembler()
        self.started = False
        self.done = False

    def feed_line(self, line: bytes) -> list[ModelEvent]:
        """Events of one NDJSON line (blank lines are skipped); ValueError when not JSON."""
        return self.feed(loads(line)) if line.strip() else []

    def feed(self, obj: Any) -> list[ModelEvent]:
        if not isinstance(obj, dict):
            raise malformed_error(self.provider, "line is not a JSON object")
        if "error" in obj:
            error = str(obj["error"])
            if (bad := _TOOL_PARSE_ERROR.match(error)) is not None:
                return self.unparsed_tool_call(bad.group(1), bad.group(2))
            raise stream_error(self.provider, None, error)
        out: list[ModelEvent] = []
        if not self.started:
            self.started = True
            out.append(MessageStartEvent(model=obj.get("model")))
        message = obj.get("message") or {}
        if content := message.get("content"):
            out.append(text_delta(content))
        for call in message.get("tool_calls") or ():
            out.extend(self._tool_call(call))
        if obj.get("done"):
            self.done = True
            if "prompt_eval_count" in obj or "eval_count" in obj:  # else: no usage reported
                usage = Usage(
                    input_tokens=obj.get("prompt_eval_count") or 0,
                    output_tokens=obj.get("eval_count") or 0,
                )
                out.append(UsageEvent(usage=usage))
            out.append(self._end(obj.get("done_reason")))
        return out

    def unparsed_tool_call(self, raw: str, why: str) -> list[ModelEvent]:
        """The events of a call Ollama could not parse; the response ends with it (Ollama sends
        no done line after its parser's error, so no usage either)."""
        out: list[ModelEvent] = []
        if not self.started:
            self.started = True
            out.append(MessageStartEvent())
        key = f"unparsed-{self.calls.count}"
        out.append(self.calls.start(key, "", ""))  # Ollama's message does not name the tool
        if raw:
            out.append(self.calls.add(key, raw))
        out.append(self.calls.reject(key, f"not valid JSON: {why}"))
        self.done = True
        out.append(MessageEndEvent(stop_reason=StopReason.TOOL_USE, raw_stop_reason=None))
        return out

    def _tool_call(self, call: dict[str, Any]) -> list[ModelEvent]:
        # Ollama sends each call whole; it still goes through start/delta/end like the others.
        fn = call.get("function") or {}
        key = self.calls.count
        args = fn.get("arguments")
        raw = args if isinstance(args, str) else json.dumps(args if args is not None else {})
        return [
            self.calls.start(key, str(call.get("id") or ""), str(fn.get("name") or "")),
            self.calls.add(key, raw),
            self.calls.finish(key),
        ]

    def _end(self, reason: Any) -> MessageEndEvent:
        raw = str(reason) if reason is not None else None
        if raw == "length":  # num_predict, or the context window with shift off
            stop = StopReason.MAX_TOKENS
        elif raw in (None, "stop"):
            stop = StopReason.TOOL_USE if self.calls.count else StopReason.END_TURN
        else:  # "load" / "unload": no answer was generated
            stop = StopReason.OTHER
        return MessageEndEvent(stop_reason=stop, raw_stop_reason=raw)


class OllamaProviderAdapter:
    """Streams ``/api/chat``; the httpx client is created on first use (no I/O in __init__)."""

    provider = PROVIDER

    def __init__(
        self, settings: ProviderSettings, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.settings = settings
        self.policy = RetryPolicy.from_settings(settings)
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._tools_support: dict[str, bool | None] = {}

    def warm_up(self) -> None:
        """Build the client now (CPU only, no I/O), so the first run does not pay for it."""
        self._get_client()

    def _get_client(self) -> httpx.AsyncClient:
        if self._client is None:
            s = self.settings
            headers = {}
            if s.api_key is not None:  # a proxy or hosted Ollama in front; local needs none
                headers["Authorization"] = f"Bearer {s.api_key.get_secret_value()}"
            self._client = httpx.AsyncClient(
                base_url=s.base_url or DEFAULT_OLLAMA_URL,
                timeout=httpx.Timeout(s.timeout_s, connect=s.connect_timeout_s),
                headers=headers,
                transport=self._transport,
            )
        return self._client

    async def supports_tools(self, model: str) -> bool | None:
        """Whether ``model`` can call tools: settings first, else ``/api/show`` (cached); None = unknown."""
        if self.settings.supports_tools is not None:
            return self.settings.supports_tools
        if model not in self._tools_support:
            self._tools_support[model] = await self._ask_capabilities(model)
        return self._tools_support[model]

    async def _ask_capabilities(self, model: str) -> bool | None:
        try:
            resp = await self._get_client().post("/api/show", json={"model": model})
        except httpx.HTTPError:
            return None  # unknown: let the chat request itself decide
        if resp.status_code != 200:
            return None
        try:
            caps = resp.json().get("capabilities")
        except (ValueError, AttributeError):
            return None
        return "tools" in caps if isinstance(caps, list) else None  # older servers omit it

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one response (contract in :mod:`agent_core.provider.base`)."""
        return stream_with_retries(lambda: self._attempt(request), self.policy)

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        if needs_tools(request) and await self.supports_tools(request.model) is False:
            raise capability_error(self.provider, request.model, "tools")
        body = build_body(request, self.settings)
        state = _LineState(self.provider)
        try:
            async with self._get_client().stream("POST", "/api/chat", json=body) as resp:
                if resp.status_code >= 400:
                    message = await self._error_message(resp)
                    if (bad := _TOOL_PARSE_ERROR.match(message)) is not None:
                        for event in state.unparsed_tool_call(bad.group(1), bad.group(2)):
                            yield event
                        return
                    raise self._status_error(resp, message, request)
                # NDJSON split as bytes (see agent_core.provider.wire), one json parse a line.
                lines = LineSplitter()
                async for raw in body_chunks(resp):
                    for line in lines.feed(raw):
                        for event in state.feed_line(line):
                            yield event
                for line in lines.flush():  # a last line without its newline
                    for event in self._last_line(state, line):
                        yield event
        except httpx.TimeoutException as err:
            raise timeout_error(self.provider, err) from err
        except httpx.HTTPError as err:
            raise connection_error(self.provider, err) from err
        except (ValueError, TypeError, KeyError, AttributeError) as err:  # not JSON / wrong shape
            raise malformed_error(self.provider, "line is not valid JSON", err) from err
        if not state.done:
            raise incomplete_error(self.provider, "without a done line")

    def _last_line(self, state: _LineState, line: bytes) -> list[ModelEvent]:
        """A last line without its newline: whole JSON from a lenient server is fine; anything
        else is a body cut short mid-line (Ollama ends every line), which a retry may fix."""
        try:
            return state.feed_line(line)
        except ValueError as err:
            raise incomplete_error(self.provider, "mid-line, without a done line") from err

    @staticmethod
    async def _error_message(resp: httpx.Response) -> str:
        """The ``error`` of an error answer (``{"error": "..."}``), or its text."""
        await resp.aread()
        try:
            return str(resp.json().get("error", resp.text))
        except (ValueError, AttributeError):
            return resp.text or f"HTTP {resp.status_code}"

    def _status_error(
        self, resp: httpx.Response, message: str, request: ModelRequest
    ) -> ProviderError:
        if resp.status_code == 400 and "does not support tools" in message:
            return capability_error(self.provider, request.model, "tools")
        return status_error(self.provider, resp.status_code, message, headers=dict(resp.headers))

    async def aclose(self) -> None:
        """Close the httpx client."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None
