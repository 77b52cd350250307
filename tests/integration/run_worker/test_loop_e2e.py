"""End to end through real Valkey, the storage-writer and the OpenAI fake: two parallel tool calls,
then a final answer; the tree, the timeline, the run record and the event stream agree."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.fakes.script import ScriptedStatus, invalid_tool_call_turn
from tests.integration.run_worker.harness import (
    BusClient,
    last_role,
    text_answer,
    tool_calls_turn,
)


def _model(request: Any) -> Any:
    if last_role(request) == "tool":
        return text_answer("All done: report written.", pieces=3)
    return tool_calls_turn(
        ("call_write", "write_file", {"path": "output/report.md", "content": "# Report\nok\n"}),
        ("call_list", "list_dir", {"path": "scratchpad"}),
    )


async def test_two_parallel_tool_calls_then_answer(make_cluster: Any, client: BusClient) -> None:
    cluster = make_cluster(_model, memory=True)  # no memory service runs: injection times out
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()
    submitted = await client.send(
        sid, "please write the report; my key is sk-abcdefghijklmnopqrstuvwx"
    )
    events = await client.events(sid, submitted.run_id)

    run = await client.run(submitted.run_id)
    assert run["status"] == "completed" and run["end_reason"] == "completed", cluster.log_text()
    assert run["turn_count"] == 2 and run["attempt"] == 1
    assert '"input_tokens":18' in run["usage_json"] and '"output_tokens":8' in run["usage_json"]

    tree = await client.tree(sid)
    assert [(n["role"], n["parent_id"]) for n in tree] == [
        ("user", None),
        ("assistant", tree[0]["node_id"]),
        ("tool", tree[1]["node_id"]),
        ("assistant", tree[2]["node_id"]),
    ]
    assert tree[0]["node_id"] == submitted.node_id
    assert run["end_node_id"] == tree[3]["node_id"]
    path = await client.path(sid, tree[3]["node_id"])
    assistant, tool = path[1]["content_json"], path[2]["content_json"]
    assert assistant.count('"type":"tool_call"') == 2
    assert tool.count('"type":"tool_result"') == 2 and '"is_error":true' not in tool
    assert "All done" in path[3]["content_json"]
    assert (
        client.home / "accounts/acct1/sessions" / sid / "output/report.md"
    ).read_text() == "# Report\nok\n"

    timeline = await client.timeline(sid, submitted.run_id)
    kinds = [e["event_type"] for e in timeline]
    assert kinds == [
        "run_queued",
        "run_started",
        "node_created",  # the message
        "node_created",  # the tool calls
        "artifact_created",  # output/report.md, as the write made it
        "node_created",  # the results, with each call's start and end in the same write
        *["tool_started", "tool_completed"] * 2,
        "node_created",
        "run_completed",
    ]
    seqs = [e["seq"] for e in timeline]
    assert seqs == sorted(seqs) and [e["run_seq"] for e in timeline] == list(range(1, 13))

    types = [e.type for _, e in events]
    assert types[0] == "run_status_changed" and types[-1] == "run_finished"
    assert types.count("tool_started") == 2 and types.count("tool_result") == 2
    assert types.count("node_created") == 4
    first_result = types.index("tool_result")
    assert types.index("tool_started") < first_result < types.index("node_created", first_result)
    assert (
        "".join(e.text for _, e in events if e.type == "text_delta") == "All done: report written."
    )
    ids = [entry_id for entry_id, _ in events]
    assert ids == sorted(ids, key=lambda i: tuple(int(p) for p in i.split("-")))
    finished = events[-1][1]
    assert finished.status == "completed" and finished.last_node_id == tree[3]["node_id"]

    requests = [r.json for r in cluster.fake.requests]
    assert len(requests) == 2
    assert {t["function"]["name"] for t in requests[0]["tools"]} >= {"write_file", "list_dir"}
    assert [m["role"] for m in requests[1]["messages"]] == ["user", "assistant", "tool", "tool"]


async def test_finished_main_run_hands_its_interaction_to_memory(
    make_cluster: Any, client: BusClient
) -> None:
    make_cluster(_model, memory=True)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()
    submitted = await client.send(sid, "write it; password=hunter2hunter2 please")
    await client.events(sid, submitted.run_id)
    stream = client.ctx.names.memory_interactions
    deadline = asyncio.get_running_loop().time() + 10
    entries: list[Any] = []
    while not entries:
        entries = await client.ctx.redis.xrange(stream)
        assert asyncio.get_running_loop().time() < deadline, "no interaction published"
        await asyncio.sleep(0.05)
    interaction = json.loads(entries[0][1][b"__data__"])
    assert interaction["run_id"] == submitted.run_id and interaction["account_id"] == "acct1"
    roles = [t["role"] for t in interaction["turns"]]
    assert roles == ["user", "tool", "tool", "assistant"]
    assert "hunter2hunter2" not in json.dumps(interaction)
    assert {t["tool_name"] for t in interaction["turns"] if t["role"] == "tool"} == {
        "write_file",
        "list_dir",
    }


def _failing_model(request: Any) -> Any:
    if last_role(request) == "tool":
        return ScriptedStatus(status=400, body={"error": {"message": "bad request (fake)"}})
    return tool_calls_turn(("call_read", "read_file", {"path": "input/missing.csv"}))


async def test_a_failed_main_run_hands_its_interaction_to_memory_too(
    make_cluster: Any, client: BusClient
) -> None:
    make_cluster(_failing_model, memory=True)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()
    submitted = await client.send(sid, "read the missing file")
    run = (await client.wait_terminal([submitted.run_id]))[submitted.run_id]
    assert run["status"] == "failed"
    stream = client.ctx.names.memory_interactions
    deadline = asyncio.get_running_loop().time() + 10
    entries: list[Any] = []
    while not entries:
        entries = await client.ctx.redis.xrange(stream)
        assert asyncio.get_running_loop().time() < deadline, "no interaction published"
        await asyncio.sleep(0.05)
    interaction = json.loads(entries[0][1][b"__data__"])
    assert interaction["status"] == "failed" and interaction["run_id"] == submitted.run_id
    tool = next(t for t in interaction["turns"] if t["role"] == "tool")
    assert tool["is_error"] and tool["arguments"] == {"path": "input/missing.csv"}


async def test_the_memory_block_reaches_the_model(make_cluster: Any, client: BusClient) -> None:
    memory = client.home / "accounts" / "acct1" / "memory"
    memory.mkdir(parents=True)
    (memory / "user.md").write_text("---\nscope: user\n---\n- Dates as YYYY-MM-DD\n")
    cluster = make_cluster(lambda _: text_answer("ok"), memory=True)
    cluster.start_service("memory_extraction")
    await client.wait_ready(("storage_writer", "run_worker", "memory_extraction"))
    sid = await client.new_session()
    submitted = await client.send(sid, "hello")
    await client.wait_terminal([submitted.run_id])
    sent = json.dumps(cluster.fake.requests[0].json, ensure_ascii=False)
    assert "# Personal memory" in sent and "Dates as YYYY-MM-DD" in sent  # English memory


async def _sent(client: BusClient, stream: str, kind: str) -> int:
    entries = await client.ctx.redis.xrange(stream)
    return sum(1 for _, fields in entries if json.loads(fields[b"__data__"])["type"] == kind)


async def test_turns_take_their_path_from_the_claim_and_reuse_rendered_memory(
    make_cluster: Any, client: BusClient
) -> None:
    """A first attempt's claim returns the path to the message it placed (no path query), and a
    worker reuses the memory it rendered for the account while ``render_cache_s`` lasts: three
    turns, one render, the memory and the whole history in every request."""
    memory = client.home / "accounts" / "acct1" / "memory"
    memory.mkdir(parents=True)
    (memory / "user.md").write_text("---\nscope: user\n---\n- Dates as YYYY-MM-DD\n")
    cluster = make_cluster(
        lambda r: text_answer(f"answer {len(r['messages'])}"),
        workers=1,
        memory=True,
        memory_config="render_cache_s = 60",
    )
    cluster.start_service("memory_extraction")
    await client.wait_ready(("storage_writer", "run_worker", "memory_extraction"))
    sid = await client.new_session()
    for text in ("one", "two", "three"):
        submitted = await client.send(sid, text)
        await client.wait_terminal([submitted.run_id])
    names = client.ctx.names
    assert await _sent(client, names.storage_queries, "get_active_path") == 0
    assert await _sent(client, names.memory_queries, "render_memory") == 1
    requests = [json.dumps(r.json, ensure_ascii=False) for r in cluster.fake.requests]
    assert len(requests) == 3 and all("Dates as YYYY-MM-DD" in r for r in requests)
    last = requests[-1]
    assert all(f'"{w}"' in last for w in ("one", "two", "three")), last
    assert "answer " in last
    tree = await client.tree(sid)
    assert [n["role"] for n in tree if n["node_type"] == "message"] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]


def _invalid_then_fixed(request: Any) -> Any:
    results = [m for m in request["messages"] if m["role"] == "tool"]
    if not results:  # a trailing comma: not JSON, so the call is refused unrun
        return invalid_tool_call_turn("call_bad", "list_dir", '{"path": "output",}')
    if len(results) == 1:
        return tool_calls_turn(("call_good", "list_dir", {"path": "output"}))
    return text_answer("listed")


async def test_an_invalid_json_call_then_a_fixed_one_is_a_tool_lesson(
    make_cluster: Any, client: BusClient
) -> None:
    """The raw text of a call whose arguments were not JSON stays on its block and reaches
    memory, so extraction (rules only: the memory model has no key) learns from the invalid
    call and the fixed one after it."""
    no_key = 'model = { provider = "openai", name = "m", api_key_env = "SOONG_TEST_NO_SUCH_KEY" }'
    cluster = make_cluster(
        _invalid_then_fixed, workers=1, memory=True, memory_config=f"debounce_s = 0\n{no_key}"
    )
    cluster.start_service("memory_extraction")
    await client.wait_ready(("storage_writer", "run_worker", "memory_extraction"))
    sid = await client.new_session()
    submitted = await client.send(sid, "list what you wrote")
    run = (await client.wait_terminal([submitted.run_id]))[submitted.run_id]
    assert run["status"] == "completed", cluster.log_text()[-3000:]
    path = await client.path(sid, run["end_node_id"])
    assert '"raw_arguments":"{\\"path\\": \\"output\\",}"' in path[1]["content_json"]

    user_md = client.home / "accounts" / "acct1" / "memory" / "user.md"
    deadline = asyncio.get_running_loop().time() + 20
    while not user_md.exists() or "valid JSON" not in user_md.read_text():
        assert asyncio.get_running_loop().time() < deadline, cluster.log_text()[-3000:]
        await asyncio.sleep(0.1)
    assert "list_dir" in user_md.read_text()
