"""Command tools declared in ``[tools.<name>]``, called by the model in real runs.

JSON in on stdin, JSON out on stdout, through the same executor as the built-ins: the schema
check, the sandbox and its timeout, the permission policy and the PreToolUse hooks.
"""

from __future__ import annotations

import json
from typing import Any

from tests.integration.run_worker.harness import (
    BusClient,
    last_role,
    last_user_text,
    text_answer,
    tool_calls_turn,
)

TOOLS = """
[tools.weather]
description = "Today's weather for a city"
command = ["/usr/bin/python3", "-I", "-c", 'import json, sys; a = json.load(sys.stdin); print(json.dumps({"city": a["city"], "temp_c": 21}))']
input_schema = { type = "object", properties = { city = { type = "string" } }, required = ["city"], additionalProperties = false }
writes = false

[tools.slow]
description = "Never answers in time"
command = ["/bin/sleep", "60"]
timeout_s = 1

[tools.chatty]
description = "Answers in words, not JSON"
command = ["/bin/echo", "sunny and mild"]

[[hooks.PreToolUse]]
name = "no-mordor"
matcher = "weather"
command = "grep -q Mordor && { echo 'one does not simply walk into Mordor' >&2; exit 2; }; exit 0"
shell = true
"""

CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "oslo": ("weather", {"city": "Oslo"}),
    "slow": ("slow", {}),
    "chatty": ("chatty", {}),
    "mordor": ("weather", {"city": "Mordor"}),
    "town": ("weather", {"town": "Oslo"}),
}


def _model(request: Any) -> Any:
    if last_role(request) == "tool":
        return text_answer("done")
    word = last_user_text(request).split()[0]
    name, arguments = CALLS[word]
    return tool_calls_turn((f"call_{word}", name, arguments))


async def _result(client: BusClient, word: str, **overrides: Any) -> dict[str, Any]:
    """Run one message in a new session; the tool result the model got back."""
    sid = await client.new_session()
    submitted = await client.send(sid, word, overrides=overrides or None)
    await client.events(sid, submitted.run_id, timeout_s=60)
    assert (await client.run(submitted.run_id))["status"] == "completed"
    tool = next(n for n in await client.tree(sid) if n["role"] == "tool")
    (block,) = json.loads((await client.path(sid, tool["node_id"]))[-1]["content_json"])
    return dict(block)


def _text(block: dict[str, Any]) -> str:
    return "".join(part.get("text", "") for part in block["content"])


async def test_declared_command_tools_run_like_built_ins(
    make_cluster: Any, client: BusClient
) -> None:
    cluster = make_cluster(_model, workers=1, extra_config=TOOLS)
    await client.wait_ready(("storage_writer", "run_worker"))

    # The model saw the declared schema; the call's JSON came back as the result.
    oslo = await _result(client, "oslo")
    assert not oslo["is_error"] and json.loads(_text(oslo)) == {"city": "Oslo", "temp_c": 21}
    offered = {t["function"]["name"]: t["function"] for t in cluster.fake.requests[0].json["tools"]}
    assert offered["weather"]["parameters"]["required"] == ["city"]

    # The declared timeout stops the command: an error result that says so.
    slow = await _result(client, "slow")
    assert slow["is_error"] and "timed out after 1 s" in _text(slow)

    # Words on stdout are not an answer: a clear tool error, with what it printed.
    chatty = await _result(client, "chatty")
    assert chatty["is_error"] and "not JSON" in _text(chatty) and "sunny" in _text(chatty)

    # Arguments outside the schema never reach the command.
    town = await _result(client, "town")
    assert town["is_error"] and "'city' is a required property" in _text(town)

    # The PreToolUse hook matched by the tool's name refuses this call, with its reason ...
    mordor = await _result(client, "mordor")
    assert mordor["is_error"] and "one does not simply walk into Mordor" in _text(mordor)
    # ... and the agent's tool policy applies to it by name.
    denied = await _result(client, "oslo", tool_policy={"deny": ["weather"]})
    assert denied["is_error"] and "Permission denied" in _text(denied), _text(denied)
    assert "temp_c" not in _text(denied)
