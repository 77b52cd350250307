"""Ollama: a request that needs tools fails before any chat request when the model cannot."""

from __future__ import annotations

import pytest

from agent_core.errors import ProviderError
from agent_core.provider import ProviderSettings
from agent_core.provider.ollama_adapter import OllamaProviderAdapter
from tests.fakes import script as s
from tests.fakes.ollama_server import FakeOllamaServer
from tests.integration.provider.harness import collect, request, text_of


async def test_configured_without_tools_fails_before_any_request() -> None:
    async with FakeOllamaServer([s.text_turn("no")]) as server:
        adapter = OllamaProviderAdapter(
            ProviderSettings(provider="ollama", base_url=server.base_url, supports_tools=False)
        )
        with pytest.raises(ProviderError) as info:
            await collect(adapter, request(tools=True))
        await adapter.aclose()
    assert info.value.code == "capability_unsupported" and not info.value.retryable
    assert server.requests == []


async def test_server_capabilities_without_tools_fail_before_the_chat_request() -> None:
    caps = {"fake-model": ["completion"]}
    async with FakeOllamaServer([s.text_turn("no")], capabilities=caps) as server:
        adapter = OllamaProviderAdapter(
            ProviderSettings(provider="ollama", base_url=server.base_url)
        )
        for _ in range(2):
            with pytest.raises(ProviderError) as info:
                await collect(adapter, request(tools=True))
            assert info.value.code == "capability_unsupported"
        await adapter.aclose()
    assert [r.path for r in server.requests] == ["/api/show"], "asked once, then cached"


async def test_tools_not_needed_without_tools_or_with_tool_choice_none() -> None:
    caps = {"fake-model": ["completion"]}
    turns = [s.text_turn("plain"), s.text_turn("none")]
    async with FakeOllamaServer(turns, capabilities=caps) as server:
        adapter = OllamaProviderAdapter(
            ProviderSettings(provider="ollama", base_url=server.base_url)
        )
        assert text_of(await collect(adapter, request())) == "plain"
        assert text_of(await collect(adapter, request(tools=True, tool_choice="none"))) == "none"
        await adapter.aclose()
    assert [r.path for r in server.requests] == ["/api/chat", "/api/chat"]
    assert "tools" not in server.requests[1].json


async def test_server_refusing_tools_is_a_capability_error() -> None:
    refusal = s.ScriptedStatus(
        status=400, body={"error": "registry.ollama.ai/x does not support tools"}
    )
    async with FakeOllamaServer([refusal]) as server:
        adapter = OllamaProviderAdapter(
            ProviderSettings(provider="ollama", base_url=server.base_url, supports_tools=True)
        )
        with pytest.raises(ProviderError) as info:
            await collect(adapter, request(tools=True))
        await adapter.aclose()
    assert info.value.code == "capability_unsupported"
    assert len(server.requests) == 1


async def test_malformed_first_line_raises_provider_error() -> None:
    turn = s.ScriptedTurn(steps=[s.Malformed(), s.Text(text="x"), s.Finish()])
    async with FakeOllamaServer([turn]) as server:
        adapter = OllamaProviderAdapter(
            ProviderSettings(provider="ollama", base_url=server.base_url)
        )
        with pytest.raises(ProviderError) as info:
            await collect(adapter, request())
        await adapter.aclose()
    assert info.value.code == "malformed_response" and not info.value.retryable
