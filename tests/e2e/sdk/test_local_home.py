"""Local mode in a given home: the home is kept, and a later block on it serves again.

``up`` prints a home's development key only when it makes it, so a block on a home that has one
gets a key of its own, revoked when the block ends; the home's development key keeps working.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import soong_agent
from agent_core.types.enums import RunStatus
from tests.e2e.sdk.test_sdk import _processes_of

# Three stack start-ups: ~20 s each on a quiet machine.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(400)]


async def _completes(client: soong_agent.AsyncClient, session_id: str) -> None:
    async with client.session(session_id).send("again") as stream:
        finished = await stream.wait()
    assert finished.status is RunStatus.COMPLETED


async def test_a_given_home_is_kept_and_serves_again(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with soong_agent.local(home, fake_provider=True) as first:
        session = await first.create_session(metadata={"title": "kept"})
        await _completes(first, session.id)
        dev_key = first.api_key
    assert _processes_of(home) == []
    assert (home / "dev_key.json").exists()  # the home is kept, with its development key

    async with soong_agent.local(home, fake_provider=True) as again:
        block_key = again.api_key
        assert block_key != dev_key
        assert (await again.session(session.id).get()).metadata["title"] == "kept"
        await _completes(again, session.id)
        async with soong_agent.AsyncClient(again.base_url, dev_key) as with_dev_key:
            await _completes(with_dev_key, session.id)  # the home's key is untouched
    assert _processes_of(home) == []

    async with soong_agent.local(home, fake_provider=True) as third:
        assert third.api_key not in (dev_key, block_key)
        async with soong_agent.AsyncClient(third.base_url, block_key, max_retries=0) as old:
            with pytest.raises(soong_agent.AuthenticationError):
                await old.session(session.id).get()  # the last block's key was revoked
        assert [r.status for r in await third.session(session.id).runs()] == [
            RunStatus.COMPLETED
        ] * 3
    assert _processes_of(home) == []
