"""One stack for the SDK's end-to-end tests, started and stopped by the SDK's own local mode."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass

import pytest

import soong_agent
from tests.e2e.gateway.conftest import seed_artifact

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
        """Write ``path`` in the session's workspace and record it as an artifact."""
        workspace = self.client.home / "accounts" / "dev" / "sessions" / session_id
        (workspace / path).write_bytes(data)
        stack = json.loads((self.client.home / "run" / "stack.json").read_text())
        return await seed_artifact(stack["redis_url"], session_id, path, size_bytes=len(data))


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
