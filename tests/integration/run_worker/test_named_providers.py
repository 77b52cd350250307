"""Named providers in real runs: one deployment, three endpoints (the default OpenAI fake, a
second OpenAI-compatible server and an Anthropic server), each message served by the endpoint
its agent names, with that endpoint's own key and model."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import text_turn
from tests.integration.run_worker.harness import BusClient, Cluster, text_answer

SECOND_KEY = "sk-second-endpoint-0000000000"
CLAUDE_KEY = "sk-ant-test-endpoint-000000000"


@pytest.fixture
def endpoints() -> Iterator[tuple[FakeOpenAIServer, FakeAnthropicServer]]:
    second = FakeOpenAIServer(default=lambda _r: text_turn("from the second endpoint"))
    claude = FakeAnthropicServer(default=lambda _r: text_turn("from claude"))
    second.start_in_thread()
    claude.start_in_thread()
    yield second, claude
    second.stop_thread()
    claude.stop_thread()


async def test_each_message_goes_to_the_endpoint_its_agent_names(
    make_cluster: Any, client: BusClient, endpoints: tuple[FakeOpenAIServer, FakeAnthropicServer]
) -> None:
    second, claude = endpoints
    config = f"""
[providers.second]
kind = "openai"
base_url = "{second.sdk_base_url}"
api_key_env = "SECOND_KEY"
models = ["m2", "m2-large"]

[providers.claude]
kind = "anthropic"
base_url = "{claude.sdk_base_url}"
api_key_env = "CLAUDE_KEY"
default_model = "claude-test"
"""
    cluster: Cluster = make_cluster(
        lambda _r: text_answer("from the default endpoint"),
        workers=1,
        extra_config=config,
        env={"SECOND_KEY": SECOND_KEY, "CLAUDE_KEY": CLAUDE_KEY},
    )
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()

    sent = [
        await client.send(sid, "one", overrides={"provider": "second", "model": "m2-large"}),
        await client.send(sid, "two", overrides={"provider": "claude"}),
        await client.send(sid, "three"),
    ]
    runs = await client.wait_terminal([s.run_id for s in sent])
    assert all(r["status"] == "completed" for r in runs.values()), cluster.log_text()[-3000:]

    (to_second,) = second.requests
    assert to_second.json["model"] == "m2-large"
    assert to_second.headers["authorization"] == f"Bearer {SECOND_KEY}"
    (to_claude,) = claude.requests
    assert to_claude.json["model"] == "claude-test"
    # The SDK sends the key as x-api-key or as a bearer token, by version.
    sent_key = to_claude.headers.get("x-api-key") or to_claude.headers["authorization"][7:]
    assert sent_key == CLAUDE_KEY
    (to_default,) = cluster.fake.requests
    assert to_default.json["model"] == "fake-model"
    answers = [
        (await client.path(sid, r["end_node_id"]))[-1]["content_json"] for r in runs.values()
    ]
    assert any("from the second endpoint" in a for a in answers)
    assert any("from claude" in a for a in answers)
    assert any("from the default endpoint" in a for a in answers)
