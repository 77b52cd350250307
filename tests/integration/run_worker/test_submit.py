"""Submitting through the real storage-writer: what the queued run carries, and runs queued
before it carried the session's working directory."""

from __future__ import annotations

from typing import Any

from agent_core.bus.contracts.storage import CreateRun, UpdateSession
from agent_core.ids import new_id
from agent_core.runqueue import QueuedRun
from agent_core.types.protocol import TextBlock
from agent_core.types.runtime import SESSION_CONFIG_KEY
from tests.integration.run_worker.harness import BusClient, text_answer


def _answer(_request: Any) -> Any:
    return text_answer("done")


async def test_queued_run_carries_the_cwd_and_the_session_config_under_the_message(
    make_cluster: Any, client: BusClient
) -> None:
    make_cluster(_answer, workers=0)  # nothing takes the run: it stays queued to be read
    await client.wait_ready(("storage_writer",))
    sid = await client.new_session()
    stored = {"max_turns": 7, "system_prompt": "from the session"}
    receipt = await client.storage.send(
        UpdateSession(
            command_id=new_id("cmd"), session_id=sid, metadata={SESSION_CONFIG_KEY: stored}
        )
    )
    assert receipt.ok, receipt.error
    submitted = await client.send(sid, "hello", overrides={"max_turns": 3})
    [queued] = await client.queue.queued(sid)
    assert queued.run_id == submitted.run_id
    assert queued.cwd == "workspace"  # the session's project, named logically
    # The message's overrides win over the session's; the session's others stay.
    assert queued.config_overrides == {"max_turns": 3, "system_prompt": "from the session"}


async def test_a_run_queued_without_the_cwd_still_runs(
    make_cluster: Any, client: BusClient
) -> None:
    cluster = make_cluster(_answer, workers=1)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()
    run_id, node_id = new_id("run"), new_id("node")
    created = await client.storage.send(
        CreateRun(command_id=new_id("cmd"), session_id=sid, run_id=run_id, start_node_id=node_id)
    )
    assert created.ok, created.error
    # As a gateway of the previous release queued it: no cwd, so the worker reads the session.
    await client.queue.enqueue(
        QueuedRun(
            run_id=run_id,
            session_id=sid,
            account_id="acct1",
            agent_id=str(created.result["agent_id"]),
            start_node_id=node_id,
            content=[TextBlock(text="hello")],
        )
    )
    run = (await client.wait_terminal([run_id]))[run_id]
    assert run["status"] == "completed", cluster.log_text()
    assert [n["role"] for n in await client.tree(sid)] == ["user", "assistant"]
