"""Many local servers send no usage: the adapters make none up (the loop then counts its own
estimate, marked ``estimated``: ``tests/unit/runtime/test_loop.py``). Anthropic's Messages API
always reports usage, so only the APIs local servers speak are here."""

from __future__ import annotations

import pytest

from agent_core.types.protocol import UsageEvent
from tests.fakes import script as s
from tests.integration.provider.harness import collect, request, running, text_of


@pytest.mark.parametrize("api", ["openai", "ollama"])
async def test_a_server_that_reports_no_usage_gives_no_usage_event(api: str) -> None:
    turn = s.text_turn("ok", usage=None)
    async with running(api, [turn]) as (_server, adapter):
        events = await collect(adapter, request())
    assert text_of(events) == "ok"
    assert [e for e in events if isinstance(e, UsageEvent)] == []
