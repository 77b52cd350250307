"""Skills in real runs: the model loads one (body in the next context, tools narrowed), and a
user's ``/name`` invokes one the model may not load."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from tests.integration.run_worker.harness import BusClient, Cluster, text_answer, tool_calls_turn

BODY = "When writing poems, use exactly three lines. POEM-BODY-91c"
DEPLOY_BODY = "Deploy checklist: tag, push, watch. DEPLOY-BODY-44e"


def _write(root: Path, name: str, front: str, body: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "SKILL.md").write_text(f"---\nname: {name}\n{front}\n---\n{body}\n")


def _model(request: Any) -> Any:
    tool_turns = sum(1 for m in request["messages"] if m["role"] == "tool")
    user = next(m for m in request["messages"] if m["role"] == "user")
    if "poem" in str(user["content"]) and tool_turns == 0:
        return tool_calls_turn(("call_skill", "load_skill", {"name": "poems"}))
    if "poem" in str(user["content"]) and tool_turns == 1:
        return tool_calls_turn(("call_write", "write_file", {"path": "x.txt", "content": "x"}))
    return text_answer("done")


def _system(request: Any) -> str:
    return "\n".join(str(m["content"]) for m in request["messages"] if m["role"] == "system")


def _tools(request: Any) -> list[str]:
    return sorted(t["function"]["name"] for t in request.get("tools") or [])


async def test_load_skill_brings_the_body_and_narrows_the_tools(
    make_cluster: Any, client: BusClient
) -> None:
    skills = client.home / "accounts" / "acct1" / "skills"
    _write(skills, "poems", "description: Write poems.\nallowed_tools: [read_file]", BODY)
    _write(skills, "deploy", "description: Deploy.\nmodel_invocable: false", DEPLOY_BODY)
    _write(skills, "broken", "description: [oops", "never seen")
    cluster: Cluster = make_cluster(_model, workers=1)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()

    submitted = await client.send(sid, "a poem about rain")
    run = (await client.wait_terminal([submitted.run_id]))[submitted.run_id]
    assert run["status"] == "completed", cluster.log_text()[-3000:]
    first, second, third = [r.json for r in cluster.fake.requests]
    # Before loading: names and descriptions only; every tool, load_skill among them.
    assert "poems: Write poems." in _system(first) and "POEM-BODY" not in _system(first)
    assert "deploy" not in _system(first)  # the model may not load it: not listed
    assert {"load_skill", "read_file", "write_file"} <= set(_tools(first))
    # After loading: the body is in the context and the tools are narrowed.
    assert BODY in _system(second)
    assert _tools(second) == ["load_skill", "read_file"]
    # A call outside the narrowed tools is refused, not run.
    refused = [m for m in third["messages"] if m.get("tool_call_id") == "call_write"]
    assert "not available while the skill" in str(refused[0]["content"])
    workspace = client.home / "accounts" / "acct1" / "sessions" / sid
    assert not (workspace / "scratchpad" / "x.txt").exists()
    tree = await client.tree(sid)
    assert [n["node_type"] for n in tree].count("skill_context") == 1
    assert "broken" in cluster.log_text() and "invalid_yaml" in cluster.log_text()

    # `/deploy`: the user invokes a skill the model may not load.
    before = len(cluster.fake.requests)
    submitted = await client.send(sid, "/deploy the api")
    run = (await client.wait_terminal([submitted.run_id]))[submitted.run_id]
    assert run["status"] == "completed", cluster.log_text()[-3000:]
    request = cluster.fake.requests[before].json
    assert DEPLOY_BODY in _system(request)
    assert BODY in _system(request)  # loaded earlier in the session: still on the path
    assert "read_file" in _tools(request) and "write_file" in _tools(request)  # a new run
    tree = await client.tree(sid)
    assert [n["node_type"] for n in tree].count("skill_context") == 2


async def test_loaded_skills_feed_memory_extraction_and_injection(
    make_cluster: Any, client: BusClient
) -> None:
    """A skill the model loaded counts as a named skill: its memory joins the run from the load
    on, the interaction names it (extraction files its lessons under it), and the session's next
    run gets that skill's memory. The skill goes with its description and the tools it owns, so
    a lesson about one of them is filed under it."""
    front = "description: Poems.\nallowed_tools: [write_file]"
    _write(client.home / "accounts" / "acct1" / "skills", "poems", front, BODY)
    memory = client.home / "accounts" / "acct1" / "memory" / "skills"
    memory.mkdir(parents=True)
    (memory / "poems.md").write_text("---\nscope: skill:poems\n---\n- Rhyme every line\n")
    cluster: Cluster = make_cluster(_model, workers=1, memory=True)
    cluster.start_service("memory_extraction")
    await client.wait_ready(("storage_writer", "run_worker", "memory_extraction"))
    sid = await client.new_session()
    first = await client.send(sid, "a poem about snow")
    await client.wait_terminal([first.run_id])
    # No skill was named by the client: the first request has no skill memory; once the model
    # loaded the skill, the run's next request has it (a memory_context node after the skill's).
    assert "Rhyme every line" not in json.dumps(cluster.fake.requests[0].json)
    assert "Rhyme every line" in _system(cluster.fake.requests[1].json)
    kinds = [n["node_type"] for n in await client.tree(sid)]
    loaded_at = kinds.index("skill_context")
    assert "memory_context" in kinds[loaded_at:]

    deadline = asyncio.get_running_loop().time() + 10
    interactions: list[dict[str, Any]] = []
    while not interactions:
        entries = await client.ctx.redis.xrange(client.ctx.names.memory_interactions)
        interactions = [json.loads(e[1][b"__data__"]) for e in entries]
        assert asyncio.get_running_loop().time() < deadline, "no interaction published"
        await asyncio.sleep(0.05)
    assert interactions[0]["run_id"] == first.run_id
    assert interactions[0]["skills"] == [
        {"name": "poems", "description": "Poems.", "tools": ["write_file"]}
    ]

    before = len(cluster.fake.requests)
    second = await client.send(sid, "and one more")
    await client.wait_terminal([second.run_id])
    assert "Rhyme every line" in _system(cluster.fake.requests[before].json)
