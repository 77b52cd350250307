"""3 workers, 30 sessions x 5 messages posted at once: per session, runs execute one at a time in
arrival order, all complete, and no node is written twice."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.integration.run_worker.harness import BusClient, last_user_text, text_answer

SESSIONS = 30
MESSAGES = 5


def _echo(request: Any) -> Any:
    # A short pause per answer makes runs of different sessions overlap on the workers.
    return text_answer(f"echo: {last_user_text(request)}", delay_s=0.005, pieces=2)


async def test_per_session_order_with_three_workers(make_cluster: Any, client: BusClient) -> None:
    cluster = make_cluster(_echo, workers=3)
    await client.wait_ready(("storage_writer", "run_worker"))
    sessions = await asyncio.gather(*(client.new_session() for _ in range(SESSIONS)))

    async def post_all(sid: str) -> list[str]:
        # In order within a session (arrival order is what we assert), all sessions at once.
        return [(await client.send(sid, f"{sid} message {k}")).run_id for k in range(MESSAGES)]

    runs_by_session = await asyncio.gather(*(post_all(s) for s in sessions))
    all_runs = [r for runs in runs_by_session for r in runs]
    finished = await client.wait_terminal(all_runs, timeout_s=120)
    assert {r["status"] for r in finished.values()} == {"completed"}, cluster.log_text()[-3000:]

    for sid, runs in zip(sessions, runs_by_session, strict=True):
        tree = await client.tree(sid)
        assert len(tree) == 2 * MESSAGES
        assert len({n["node_id"] for n in tree}) == len(tree)
        # One chain: u0 → a0 → u1 → a1 → …, each answer under its own message, each message
        # under the previous answer — so run k+1 started only after run k had answered.
        for i, node in enumerate(tree):
            assert node["parent_id"] == (tree[i - 1]["node_id"] if i else None)
            assert node["role"] == ("user", "assistant")[i % 2]
            assert node["run_id"] == runs[i // 2]
        for k in range(MESSAGES):
            assert tree[2 * k]["preview"] == f"{sid} message {k}"
            assert tree[2 * k + 1]["preview"].startswith(f"echo: {sid} message {k}"[:40])
        started = [finished[r]["created_at"] for r in runs]
        assert started == sorted(started)
