"""The runs a reconciler may queue again: accepted, never claimed, untouched for a while; each
rebuilt as its queue entry from what the writer recorded (both backends)."""

from __future__ import annotations

import time

from agent_core.bus.contracts.storage import CreateRun, ListStrandedRuns
from agent_core.ids import new_id
from agent_core.types.protocol import TextBlock
from agent_core.types.queued import QueuedRun
from services.storage_writer.queries import QueryEngine
from services.storage_writer.writer import Writer
from tests.unit.storage_writer.factories import claim_run, create_session


def _accepted(session_id: str, agent_id: str, text: str) -> CreateRun:
    """A run as the gateway records it before queueing it: its message kept in its metadata."""
    return CreateRun(
        command_id=new_id("cmd"),
        session_id=session_id,
        run_id=new_id("run"),
        agent_id=agent_id,
        start_node_id=new_id("node"),
        metadata={
            "kind": "main",
            "strategy": "enqueue",
            "parent_node_id": None,
            "message": [{"type": "text", "text": text}],
        },
    )


def _stranded(engine: QueryEngine, idle_s: float = 1) -> list[QueuedRun]:
    query = ListStrandedRuns(idle_s=idle_s)
    return query.reply_of(engine.answer(query))


def test_stranded_runs_are_accepted_runs_never_claimed_and_idle(
    writer: Writer, engine: QueryEngine
) -> None:
    a, b = create_session(), create_session(account="acct_b")
    waiting = _accepted(a.session_id, a.root_agent_id, "still waiting")
    claimed = _accepted(b.session_id, b.root_agent_id, "taken by a worker")
    writer.apply_batch([a, b, waiting, claimed, claim_run(b, claimed.run_id)])
    assert _stranded(engine) == []  # accepted a moment ago: the gateway may be queueing it

    time.sleep(1.1)
    rows = _stranded(engine)
    assert [r.run_id for r in rows] == [waiting.run_id]
    entry = rows[0]  # a queue entry, rebuilt whole from the run's row
    assert entry.content == [TextBlock(text="still waiting")]
    assert (entry.session_id, entry.account_id, entry.agent_id, entry.start_node_id) == (
        a.session_id,
        a.account_id,
        a.root_agent_id,
        waiting.start_node_id,
    )
    assert _stranded(engine, idle_s=3600) == []
