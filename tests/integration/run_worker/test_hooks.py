"""Hooks in real runs: the storage-writer and run-workers as subprocesses, the OpenAI fake, and
one hook script (a real process per execution) configured in config.toml.

A PreToolUse hook denies a tool: the model gets an error result with the hook's reason. A Stop
hook denies the first answer: the loop goes on and the run ends on the second one, with a
``stop_hook_prevented`` event. A UserPromptSubmit hook adds context the model sees. The same
PreToolUse hook runs inside a child worker agent. Every execution is on the timeline.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from agent_core.bus.contracts.storage import ListRuns
from agent_core.types.enums import PermissionBehavior
from agent_core.types.protocol import PermissionDecision
from tests.integration.run_worker.harness import (
    BusClient,
    last_role,
    last_user_text,
    text_answer,
    tool_calls_turn,
)

HOOK = r"""
import json, sys
data = json.load(sys.stdin)
phase = data["phase"]
if phase == "user_prompt_submit" and "CONTEXT" in (data["prompt"] or ""):
    print(json.dumps({"additional_context": "The secret word is PINEAPPLE."}))
elif phase == "pre_tool_use" and data["tool_call"]["name"] == "list_dir":
    print(json.dumps({"decision": "deny", "reason": "listing is off for " + data["agent_type"]}))
elif phase == "pre_tool_use" and data["tool_call"]["name"] == "glob":
    print(json.dumps({"decision": "ask", "reason": "globbing needs a person"}))
elif phase == "stop" and (data["answer"] or "").startswith("first") and not data["stop_hook_active"]:
    sys.stderr.write("check your answer once more")
    sys.exit(2)
"""


def _system_text(request: Any) -> str:
    return " ".join(
        m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
        for m in request["messages"]
        if m["role"] == "system"
    )


def _first_user_text(request: Any) -> str:
    first = next(m for m in request["messages"] if m["role"] == "user")
    content = first["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def _model(request: Any) -> Any:
    first, last = _first_user_text(request), last_user_text(request)
    if first.startswith("TASK"):  # the worker: lists, then reports what it got
        if last_role(request) == "tool":
            return text_answer("worker saw: " + json.dumps(request["messages"][-1]["content"]))
        return tool_calls_turn(("call_w", "list_dir", {"path": "."}))
    if "DISPATCH" in first:
        if last_role(request) == "tool":
            return text_answer("main done")
        return tool_calls_turn(("call_d", "dispatch_worker", {"worker": "w1", "task": "TASK list"}))
    if "DENY" in first:
        if last_role(request) == "tool":
            return text_answer("saw: " + json.dumps(request["messages"][-1]["content"]))
        return tool_calls_turn(("call_l", "list_dir", {"path": "."}))
    if "ASK" in first:
        if last_role(request) == "tool":
            return text_answer("globbed: " + json.dumps(request["messages"][-1]["content"]))
        return tool_calls_turn(("call_g", "glob", {"pattern": "*.nothing"}))
    if "STOPTEST" in first:
        return text_answer("second answer" if "Do not stop yet" in last else "first answer")
    if "CONTEXT" in first:
        seen = "PINEAPPLE" in _system_text(request)
        return text_answer("the word is PINEAPPLE" if seen else "no word")
    return text_answer("ok")


def _config(tmp_path: Path) -> str:
    hook = tmp_path / "hook.py"
    hook.write_text(HOOK)
    argv = json.dumps([sys.executable, str(hook)])
    return "\n[hooks]\n" + "".join(
        f'\n[[hooks.{event}]]\nname = "policy"\ncommand = {argv}\ntimeout_s = 20\n'
        for event in ("UserPromptSubmit", "PreToolUse", "Stop")
    )


def _hook_events(timeline: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [json.loads(e["payload_json"]) for e in timeline if e["event_type"] == "hook_executed"]


async def test_hooks_decide_in_real_runs_of_main_and_worker_agents(
    make_cluster: Any, client: BusClient, tmp_path: Path
) -> None:
    cluster = make_cluster(_model, workers=1, extra_config=_config(tmp_path))
    await client.wait_ready(("storage_writer", "run_worker"))
    runs = {}
    for text in ("DENY: list the folder", "STOPTEST", "CONTEXT please", "DISPATCH a worker"):
        sid = await client.new_session()
        runs[text.split()[0].rstrip(":")] = (sid, (await client.send(sid, text)).run_id)
    done = await client.wait_terminal([r for _, r in runs.values()], timeout_s=120)
    assert all(r["status"] == "completed" for r in done.values()), cluster.log_text()

    # PreToolUse deny: the model saw an error result carrying the hook's reason.
    sid, run_id = runs["DENY"]
    path = await client.path(sid, done[run_id]["end_node_id"])
    assert "listing is off for main" in path[-1]["content_json"]
    tool_node = json.loads(path[-2]["content_json"])[0]
    assert tool_node["is_error"] is True and "Hook policy refused" in json.dumps(tool_node)
    events = _hook_events(await client.timeline(sid, run_id))
    pre = [e for e in events if e["event"] == "PreToolUse"]
    assert [(e["decision"], e["agent_type"]) for e in pre] == [("deny", "main")]
    assert len(pre[0]["input_sha256"]) == 64 and "list the folder" not in json.dumps(events)

    # Stop deny: the loop went on; the run ended on the second answer, two turns.
    sid, run_id = runs["STOPTEST"]
    assert done[run_id]["turn_count"] == 2 and done[run_id]["end_reason"] == "completed"
    path = await client.path(sid, done[run_id]["end_node_id"])
    assert [(n["role"], n["node_type"]) for n in path] == [
        ("user", "message"),
        ("assistant", "message"),
        ("user", "system_note"),
        ("assistant", "message"),
    ]
    assert "second answer" in path[-1]["content_json"]
    assert "check your answer once more" in path[2]["content_json"]
    timeline = await client.timeline(sid, run_id)
    assert [e["event_type"] for e in timeline].count("stop_hook_prevented") == 1
    stops = [e["decision"] for e in _hook_events(timeline) if e["event"] == "Stop"]
    assert stops == ["block", "allow"]

    # UserPromptSubmit context: a system_note the model read.
    sid, run_id = runs["CONTEXT"]
    path = await client.path(sid, done[run_id]["end_node_id"])
    assert [n["node_type"] for n in path] == ["message", "system_note", "message"]
    assert "the word is PINEAPPLE" in path[-1]["content_json"]

    # A child worker agent: the same hook ran for its tool call and denied it.
    sid, run_id = runs["DISPATCH"]
    reply = await client.storage.query(ListRuns(session_id=sid))
    children = [
        r
        for r in reply.data
        if json.loads(r["metadata_json"] or "{}").get("parent_run_id") == run_id
    ]
    assert len(children) == 1 and children[0]["status"] == "completed"
    child = children[0]["run_id"]
    child_events = _hook_events(await client.timeline(sid, child))
    pre = [e for e in child_events if e["event"] == "PreToolUse"]
    assert [(e["decision"], e["agent_type"]) for e in pre] == [("deny", "sub")]
    path = await client.path(sid, done[run_id]["end_node_id"])
    assert "listing is off for sub" in path[-2]["content_json"]  # the child's answer


async def test_a_hooks_ask_goes_through_the_permission_flow(
    make_cluster: Any, client: BusClient, tmp_path: Path
) -> None:
    cluster = make_cluster(_model, workers=1, extra_config=_config(tmp_path))
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()
    sent = await client.send(sid, "ASK to glob")
    asked = await client.wait_event(
        sid, sent.run_id, lambda e: e["type"] == "permission_requested", 60
    )
    assert asked is not None, cluster.log_text()
    request = asked["request"]
    assert request["reason"] == "hook policy asks: globbing needs a person"
    # The request is streamed before the run's status is stored (the prompt should not wait
    # for the writer): the status turns pending just after.
    async with asyncio.timeout(30):
        while (await client.run(sent.run_id))["status"] != "pending":
            await asyncio.sleep(0.02)
    # A person allows it, as POST …/permissions/{id} does.
    names, redis = client.ctx.names, client.ctx.redis
    decision = PermissionDecision(
        request_id=request["request_id"], behavior=PermissionBehavior.ALLOW, decided_by="test"
    )
    await redis.set(
        names.permission_decision(sid, request["request_id"]), decision.model_dump_json()
    )
    await redis.rpush(names.permission_wake(sid, request["request_id"]), b"1")
    done = await client.wait_terminal([sent.run_id], timeout_s=60)
    run = done[sent.run_id]
    assert run["status"] == "completed"
    path = await client.path(sid, run["end_node_id"])
    tool_node = json.loads(path[-2]["content_json"])[0]
    assert tool_node["is_error"] is False  # the call ran once a person allowed it
    events = _hook_events(await client.timeline(sid, sent.run_id))
    assert [(e["event"], e["decision"]) for e in events if e["event"] == "PreToolUse"] == [
        ("PreToolUse", "ask")
    ]
