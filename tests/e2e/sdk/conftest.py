"""One stack for the SDK's end-to-end tests, started and stopped by the SDK's own local mode."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass

import pytest

import soong_agent
from agent_core.bus import BusNames, RpcClient, make_redis
from agent_core.bus.contracts.storage import CreateArtifact
from agent_core.ids import new_id
from agent_core.storage_client import StorageClient, raise_for_receipt

# A rate limit the tests can reach on purpose (the SDK retries 429s, so the others only slow down
# for a moment when they get near it).
CONFIG = """
[gateway]
rate_limit_per_s = 10.0
rate_limit_burst = 30
max_sse_streams_per_key = 16
max_body_bytes = 65536
"""


@dataclass
class SdkStack:
    """The running local stack; ``stop()`` ends it (the last test checks that it ends cleanly)."""

    client: soong_agent.LocalClient
    exits: AsyncExitStack

    async def stop(self) -> None:
        await self.exits.aclose()

    async def seed_artifact(self, session_id: str, path: str, data: bytes) -> str:
        """Write ``path`` in the session's workspace and record it as an artifact (what a tool
        that makes a file does; the scripted model has no such tool)."""
        workspace = self.client.home / "accounts" / "dev" / "sessions" / session_id
        (workspace / path).write_bytes(data)
        stack = json.loads((self.client.home / "run" / "stack.json").read_text())
        redis = make_redis(stack["redis_url"])
        names = BusNames("soong")
        rpc = RpcClient(redis, names.reply_channel(f"test-{new_id('cmd')}"))
        await rpc.start()
        try:
            artifact_id = new_id("artifact")
            command = CreateArtifact(
                command_id=new_id("cmd"),
                session_id=session_id,
                artifact_id=artifact_id,
                path=path,
                filename=path.rsplit("/", 1)[-1],
                mime_type="text/markdown",
                size_bytes=len(data),
            )
            raise_for_receipt(await StorageClient(rpc, names).send(command))
            return artifact_id
        finally:
            await rpc.stop()
            await redis.aclose()


@pytest.fixture(scope="module")
async def sdk() -> AsyncIterator[SdkStack]:
    """``soong_agent.local`` with the scripted model, in a temporary home."""
    exits = AsyncExitStack()
    client = await exits.enter_async_context(
        soong_agent.local(workers=2, fake_provider=True, config=CONFIG)
    )
    try:
        yield SdkStack(client, exits)
    finally:
        await exits.aclose()
