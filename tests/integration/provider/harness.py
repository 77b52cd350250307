"""Runs a provider adapter against its wire-faithful fake server, for the contract tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

from agent_core.ids import new_id
from agent_core.provider import ProviderAdapter, ProviderRegistry, ProviderSettings, aclose_adapter
from agent_core.runtime import AgentLoop
from agent_core.types.enums import Role
from agent_core.types.protocol import (
    ModelEvent,
    ModelMessage,
    ModelRequest,
    TextBlock,
    TextDeltaEvent,
    ToolDefinition,
)
from agent_core.types.runtime import AgentConfig, Node, RunEnd, RunHandle
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.http_server import FakeHTTPServer
from tests.fakes.ollama_server import FakeOllamaServer
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import ScriptedResponse
from tests.unit.runtime.fakes import ListSink, MemoryStore

PROVIDERS = ("openai", "anthropic", "ollama")
API_KEY = "sk-test-abcdefghijklmnopqrstuvwx"

_SERVERS: dict[str, type[FakeHTTPServer]] = {
    "openai": FakeOpenAIServer,
    "anthropic": FakeAnthropicServer,
    "ollama": FakeOllamaServer,
}


def server_for(provider: str, script: Sequence[ScriptedResponse] = ()) -> FakeHTTPServer:
    """A fresh fake server of ``provider`` with ``script``."""
    return _SERVERS[provider](list(script))


def sdk_base_url(server: FakeHTTPServer) -> str:
    """The base URL an adapter of this server's provider takes."""
    url = getattr(server, "sdk_base_url", None)
    assert isinstance(url, str)
    return url


@contextlib.asynccontextmanager
async def running(
    provider: str, script: Sequence[ScriptedResponse] = (), **settings: Any
) -> AsyncIterator[tuple[FakeHTTPServer, ProviderAdapter]]:
    """A started fake server and an adapter (built through a registry) pointed at it."""
    server = server_for(provider, script)
    async with server:
        config = ProviderSettings(
            provider=provider,
            base_url=sdk_base_url(server),
            api_key=API_KEY,
            retry_base_delay_s=0.01,
            **settings,
        )
        adapter = ProviderRegistry().create(config)
        try:
            yield server, adapter
        finally:
            await aclose_adapter(adapter)


def request(*, tools: bool = False, text: str = "hi", **kwargs: Any) -> ModelRequest:
    """A one-message request, optionally with two tools."""
    defs = (
        [
            ToolDefinition(name="get_weather", description="Weather", input_schema=_SCHEMA),
            ToolDefinition(name="get_time", description="Time", input_schema=_SCHEMA),
        ]
        if tools
        else []
    )
    return ModelRequest(
        model="fake-model",
        messages=[ModelMessage(role="user", content=[TextBlock(text=text)])],
        tools=defs,
        **kwargs,
    )


_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}


async def collect(adapter: ProviderAdapter, req: ModelRequest) -> list[ModelEvent]:
    """Every event of one streamed response."""
    async with contextlib.aclosing(adapter.stream(req)) as events:  # type: ignore[type-var]
        return [event async for event in events]


def text_of(events: Sequence[ModelEvent]) -> str:
    """The concatenated text deltas."""
    return "".join(e.text for e in events if isinstance(e, TextDeltaEvent))


def types_of(events: Sequence[ModelEvent]) -> list[str]:
    """The event types, in order."""
    return [e.type for e in events]


async def run_loop(
    adapter: ProviderAdapter, tools: Any = None, store: MemoryStore | None = None
) -> RunEnd:
    """One run of the agent loop on ``adapter``, from a user message, with in-memory ports (the
    nodes and events land in ``store`` when given): the end it returns (what the run-worker
    writes with ``end_run``)."""
    handle = RunHandle(
        run_id=new_id("run"),
        session_id="sess_20260101_000000_abcd",
        agent_id=new_id("agent"),
        attempt=1,
    )
    user = Node(
        node_id=new_id("node"),
        agent_id=handle.agent_id,
        run_id=handle.run_id,
        role=Role.USER,
        content=[TextBlock(text="hi")],
    )
    loop = AgentLoop(
        handle=handle,
        config=AgentConfig(provider="fake", model="fake-model"),
        model=adapter,
        store=store if store is not None else MemoryStore(),
        events=ListSink(),
        tools=tools,
    )
    return (await loop.run([user])).end
