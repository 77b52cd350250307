"""Task tools in a real run: the WAL in the session's project, a task_board node, task events."""

from __future__ import annotations

from typing import Any

from tests.integration.run_worker.harness import BusClient, Cluster, text_answer, tool_calls_turn


def _planner(request: Any) -> Any:
    tool_turns = sum(1 for m in request["messages"] if m["role"] == "tool")
    if tool_turns == 0:
        return tool_calls_turn(("call_list", "task_create_list", {"list_name": "release"}))
    if tool_turns == 1:
        return tool_calls_turn(
            ("call_a", "task_add", {"list_name": "release", "title": "write notes"}),
            ("call_b", "task_add", {"list_name": "release", "title": "tag version"}),
        )
    return text_answer("Planned two tasks.")


async def test_task_tools_write_the_wal_and_the_board(make_cluster: Any, client: BusClient) -> None:
    cluster: Cluster = make_cluster(_planner, workers=1)
    cluster.start_service("task_wal")
    await client.wait_ready(("storage_writer", "run_worker", "task_wal"))
    sid = await client.new_session()
    submitted = await client.send(sid, "plan the release")
    events = await client.events(sid, submitted.run_id)
    run = await client.run(submitted.run_id)
    assert run["status"] == "completed", cluster.log_text()[-3000:]

    wal = client.home / "accounts" / "acct1" / "sessions" / sid / ".soong-agent" / "tasks" / sid
    files = list(wal.glob("*.wal.jsonl"))
    assert len(files) == 1 and len(files[0].read_text().splitlines()) == 3  # list + two tasks

    tree = await client.tree(sid)
    kinds = [(n["role"], n["node_type"]) for n in tree]
    assert kinds.count(("system", "task_board")) == 2  # after each changing turn
    board = [n for n in tree if n["node_type"] == "task_board"][-1]
    assert "write notes" in board["preview"] or "release" in board["preview"]
    changed = [e for _, e in events if e.type == "task_changed"]
    assert [c.list_name for c in changed] == ["release"] * 3
    timeline = await client.timeline(sid, submitted.run_id)
    assert [e["event_type"] for e in timeline].count("task_changed") == 3
    # The model saw the newest board as system context in its last request.
    last = cluster.fake.requests[-1].json
    system = " ".join(m["content"] for m in last["messages"] if m["role"] == "system")
    assert "tag version" in system
