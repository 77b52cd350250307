"""MCP tools in real runs: a run-worker starts the configured server (stdio, and HTTP), offers its
tools namespaced by server, and runs the model's calls through the tool executor — a crash
mid-call, a huge result and a denied tool included — and the run completes."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from agent_core.bus.contracts.storage import ListArtifacts
from tests.conftest import REPO
from tests.fakes.mcp_server import http_server
from tests.integration.run_worker.harness import BusClient, Cluster, text_answer, tool_calls_turn

pytestmark = pytest.mark.timeout(240)

STDIO = f"""
[mcp.servers.fake]
transport = "stdio"
command = {json.dumps([sys.executable, "-m", "tests.fakes.mcp_server"])}
cwd = {json.dumps(str(REPO))}
env = {{ FAKE_MCP_VALUE = "configured" }}
deny = ["secret"]

[mcp.servers.broken]
transport = "stdio"
command = {json.dumps([sys.executable, "-m", "tests.fakes.mcp_server", "--crash-on-start"])}
cwd = {json.dumps(str(REPO))}
"""


def _model(request: Any) -> Any:
    """Crash the server, then echo and a huge result in parallel, then a denied tool, then
    answer; the run goes on through each."""
    turns = sum(1 for m in request["messages"] if m["role"] == "assistant")
    if turns == 0:
        return tool_calls_turn(("call_crash", "mcp__fake__crash", {}))
    if turns == 1:
        return tool_calls_turn(
            ("call_echo", "mcp__fake__echo", {"text": "hello over mcp"}),
            ("call_huge", "mcp__fake__huge", {"size": 200_000}),
        )
    if turns == 2:
        return tool_calls_turn(("call_secret", "mcp__fake__secret", {}))
    return text_answer("done with mcp")


def _results(path: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for node in path:
        if node["role"] == "tool":
            for block in json.loads(node["content_json"]):
                if block["type"] == "tool_result":
                    out[block["tool_call_id"]] = block
    return out


def _text(block: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in block["content"])


async def test_mcp_tools_in_a_run_over_stdio(make_cluster: Any, client: BusClient) -> None:
    cluster: Cluster = make_cluster(_model, workers=1, extra_config=STDIO)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()
    submitted = await client.send(sid, "use the mcp tools")
    events = await client.events(sid, submitted.run_id, timeout_s=120)
    run = await client.run(submitted.run_id)
    assert run["status"] == "completed", cluster.log_text()[-4000:]

    offered = {t["function"]["name"] for t in cluster.fake.requests[0].json["tools"]}
    assert {"mcp__fake__echo", "mcp__fake__crash", "read_file"} <= offered
    assert "mcp__fake__secret" not in offered  # denied: never offered
    assert not any(n.startswith("mcp__broken__") for n in offered)  # it never started
    assert "mcp server broken offers no tools to this run" in cluster.log_text()

    path = await client.path(sid, run["end_node_id"])
    results = _results(path)
    crash = results["call_crash"]
    assert crash["is_error"] and "stopped while running 'crash'" in _text(crash)
    echo = results["call_echo"]  # the next call started the server again
    assert not echo["is_error"] and _text(echo) == "hello over mcp"
    huge = results["call_huge"]
    assert not huge["is_error"] and "[truncated" in _text(huge)
    secret = results["call_secret"]
    assert secret["is_error"] and "Unknown tool 'mcp__fake__secret'" in _text(secret)

    reply = await client.storage.query(ListArtifacts(session_id=sid))
    saved = [a for a in reply.data if a["tool_call_id"] == "call_huge"]
    assert len(saved) == 1 and saved[0]["size_bytes"] == 200_000

    kinds = [e.type for _, e in events]
    assert kinds.count("tool_started") == 4 and kinds.count("tool_result") == 4
    failed = [
        e for e in await client.timeline(sid, submitted.run_id) if e["event_type"] == "tool_failed"
    ]
    codes = sorted(json.loads(e["payload_json"]).get("error_code", "") for e in failed)
    assert codes == ["mcp_server_crashed", "unknown_tool"], failed


def _whoami(request: Any) -> Any:
    if request["messages"][-1]["role"] == "tool":
        return text_answer("that is me")
    return tool_calls_turn(("call_who", "mcp__fake__whoami", {}))


@pytest.mark.parametrize("how", ["stopped", "killed"])
async def test_an_agent_enables_mcp_tools_and_the_worker_ends_its_server(
    make_cluster: Any, client: BusClient, how: str
) -> None:
    cluster: Cluster = make_cluster(
        _whoami, workers=1, extra_config=STDIO.split("[mcp.servers.broken]")[0]
    )
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()
    submitted = await client.send(
        sid, "who are you", overrides={"enabled_tools": ["mcp__fake__whoami", "read_file"]}
    )
    await client.events(sid, submitted.run_id, timeout_s=120)
    run = await client.run(submitted.run_id)
    assert run["status"] == "completed", cluster.log_text()[-4000:]
    offered = {t["function"]["name"] for t in cluster.fake.requests[0].json["tools"]}
    assert offered == {"mcp__fake__whoami", "read_file"}
    result = _results(await client.path(sid, run["end_node_id"]))["call_who"]
    pid, cwd, value = _text(result).split()
    assert cwd == str(REPO) and value == "configured"
    server = psutil.Process(int(pid))
    assert server.ppid() == cluster.worker_pid(0)  # the worker's own child
    if how == "stopped":
        cluster.stop()  # the worker stops: it ends its MCP server
    else:
        cluster.signal_worker(0, signal.SIGKILL)  # the server sees its stdin close, and exits
    gone, _ = psutil.wait_procs([server], timeout=30)
    assert gone == [server]


async def test_mcp_tools_in_a_run_over_http(make_cluster: Any, client: BusClient) -> None:
    with http_server() as url:
        config = f'[mcp.servers.web]\ntransport = "http"\nurl = "{url}"\nallow = ["add"]\n'

        def model(request: Any) -> Any:
            if request["messages"][-1]["role"] == "tool":
                return text_answer("sum known")
            return tool_calls_turn(("call_add", "mcp__web__add", {"a": 20, "b": 22}))

        cluster: Cluster = make_cluster(model, workers=1, extra_config=config)
        await client.wait_ready(("storage_writer", "run_worker"))
        sid = await client.new_session()
        submitted = await client.send(sid, "add")
        await client.events(sid, submitted.run_id, timeout_s=120)
        run = await client.run(submitted.run_id)
        assert run["status"] == "completed", cluster.log_text()[-4000:]
        offered = {t["function"]["name"] for t in cluster.fake.requests[0].json["tools"]}
        assert {n for n in offered if n.startswith("mcp__")} == {"mcp__web__add"}
        result = _results(await client.path(sid, run["end_node_id"]))["call_add"]
        assert not result["is_error"] and _text(result) == "42"


def _hang_then_grow(request: Any) -> Any:
    """Run 1: a call that hangs, then ``grow``; run 2: the tool ``grow`` added."""
    calls = [m for m in request["messages"] if m["role"] == "tool"]
    if len(calls) == 0:
        return tool_calls_turn(("call_hang", "mcp__fake__hang", {}))
    if len(calls) == 1:
        return tool_calls_turn(("call_grow", "mcp__fake__grow", {}))
    if len(calls) == 2 and request["messages"][-1]["role"] == "user":
        return tool_calls_turn(("call_extra", "mcp__fake__extra", {}))
    return text_answer("ok")


async def test_a_hanging_call_times_out_and_a_changed_list_reaches_the_next_run(
    make_cluster: Any, client: BusClient
) -> None:
    config = STDIO.split("[mcp.servers.broken]")[0] + "call_timeout_s = 1.0\n"
    cluster: Cluster = make_cluster(_hang_then_grow, workers=1, extra_config=config)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()
    first = await client.send(sid, "hang, then grow")
    await client.events(sid, first.run_id, timeout_s=120)
    run = await client.run(first.run_id)
    assert run["status"] == "completed", cluster.log_text()[-4000:]
    results = _results(await client.path(sid, run["end_node_id"]))
    hang = results["call_hang"]
    assert hang["is_error"] and "did not answer 'hang' within 1 s" in _text(hang)
    assert _text(results["call_grow"]) == "grown"
    assert "mcp__fake__extra" not in {
        t["function"]["name"] for t in cluster.fake.requests[-1].json["tools"]
    }  # a run keeps the list it started with

    for _ in range(100):  # the refresh follows the notification
        if "mcp server fake: tool list refreshed" in cluster.log_text():
            break
        await asyncio.sleep(0.1)
    second = await client.send(sid, "use the new tool")
    await client.events(sid, second.run_id, timeout_s=120)
    run = await client.run(second.run_id)
    assert run["status"] == "completed", cluster.log_text()[-4000:]
    offered = {t["function"]["name"] for t in cluster.fake.requests[-1].json["tools"]}
    assert "mcp__fake__extra" in offered
    extra = _results(await client.path(sid, run["end_node_id"]))["call_extra"]
    assert not extra["is_error"] and _text(extra) == "extra!"


HOOK = r"""
import json, sys
data = json.load(sys.stdin)
if data["phase"] == "pre_tool_use" and data["tool_call"]["name"] == "mcp__fake__add":
    print(json.dumps({"decision": "deny", "reason": "no sums over MCP"}))
"""


def _add_then_echo(request: Any) -> Any:
    tools = sum(1 for m in request["messages"] if m["role"] == "tool")
    if tools == 0:
        return tool_calls_turn(
            ("call_add", "mcp__fake__add", {"a": 1, "b": 2}),
            ("call_echo", "mcp__fake__echo", {"text": "hooked"}),
        )
    return text_answer("done")


async def test_hooks_see_mcp_tools_by_their_names(
    make_cluster: Any, client: BusClient, tmp_path: Path
) -> None:
    hook = tmp_path / "hook.py"
    hook.write_text(HOOK)
    argv = json.dumps([sys.executable, str(hook)])
    config = STDIO.split("[mcp.servers.broken]")[0]
    config += f'\n[[hooks.PreToolUse]]\nname = "sums"\nmatcher = "mcp__*"\ncommand = {argv}\n'
    cluster: Cluster = make_cluster(_add_then_echo, workers=1, extra_config=config)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()
    submitted = await client.send(sid, "add and echo")
    await client.events(sid, submitted.run_id, timeout_s=120)
    run = await client.run(submitted.run_id)
    assert run["status"] == "completed", cluster.log_text()[-4000:]
    results = _results(await client.path(sid, run["end_node_id"]))
    assert results["call_add"]["is_error"] and "no sums over MCP" in _text(results["call_add"])
    assert not results["call_echo"]["is_error"] and _text(results["call_echo"]) == "hooked"
    executed = [
        json.loads(e["payload_json"])
        for e in await client.timeline(sid, submitted.run_id)
        if e["event_type"] == "hook_executed"
    ]
    assert sorted(e["decision"] for e in executed if e["event"] == "PreToolUse") == [
        "allow",
        "deny",
    ], executed
