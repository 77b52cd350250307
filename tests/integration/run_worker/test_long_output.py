"""A tool output above the inline cap is cut for the model and saved whole as an artifact."""

from __future__ import annotations

from typing import Any

from agent_core.bus.contracts.storage import ListArtifacts
from tests.integration.run_worker.harness import BusClient, last_role, text_answer, tool_calls_turn


def _model(request: Any) -> Any:
    if last_role(request) == "tool":
        return text_answer("seen it")
    code = "print('\\n'.join(f'line {i:06d} ' + 'x' * 40 for i in range(2000)))"
    return tool_calls_turn(("call_long", "run_python", {"code": code}))


async def test_long_tool_output_is_saved_whole(make_cluster: Any, client: BusClient) -> None:
    cluster = make_cluster(_model, workers=1)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()
    submitted = await client.send(sid, "print a lot")
    await client.events(sid, submitted.run_id)
    assert (await client.run(submitted.run_id))["status"] == "completed", cluster.log_text()[-2000:]

    reply = await client.storage.query(ListArtifacts(session_id=sid))
    saved = [a for a in reply.data if a["tool_call_id"] == "call_long"]
    assert len(saved) == 1 and saved[0]["path"] == "scratchpad/tool-outputs/call_long.txt"
    text = (client.home / "accounts/acct1/sessions" / sid / saved[0]["path"]).read_text()
    assert "line 000000" in text and "line 001999" in text
    assert saved[0]["size_bytes"] == len(text.encode())

    tree = await client.tree(sid)
    tool = next(n for n in tree if n["role"] == "tool")
    node = (await client.path(sid, tool["node_id"]))[-1]
    assert "[truncated" in node["content_json"] and saved[0]["artifact_id"] in node["content_json"]
    # What the model got is the cut copy, not the whole text.
    sent = cluster.fake.requests[-1].json["messages"][-1]["content"]
    assert "line 001999" not in sent and len(sent) < len(text)
