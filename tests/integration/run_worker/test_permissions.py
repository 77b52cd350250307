"""A run that asks for permission is ``pending`` while it waits, and not longer than its deadline:
a request nobody decides is denied, the model is told, the run goes on."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agent_core.bus import BusNames
from agent_core.runtime import LookupTool, ScriptedModel, tool_then_answer
from agent_core.types.protocol import ModelRequest, ToolResultBlock
from tests.integration.run_worker.harness import BusClient
from tests.integration.run_worker.inprocess import start_worker


class Recording(ScriptedModel):
    def __init__(self) -> None:
        super().__init__(tool_then_answer(answer="done"))
        self.requests: list[ModelRequest] = []

    def stream(self, request: ModelRequest) -> Any:
        self.requests.append(request)
        return super().stream(request)


async def test_an_undecided_permission_request_is_denied_at_its_deadline(
    make_cluster: Any, client: BusClient, redis_url: str, names: BusNames, tmp_path: Path
) -> None:
    make_cluster(lambda _: None, workers=0)  # the storage-writer alone
    await client.wait_ready(("storage_writer",), timeout_s=120)
    model = Recording()
    worker = await start_worker(
        redis_url,
        names,
        tmp_path,
        model,
        tools=[LookupTool()],
        extra_config="permission_timeout_s = 2.0",
    )
    try:
        sid = await client.new_session()
        ask = {"tool_policy": {"default": "allow", "ask": ["lookup"]}}
        sent = await client.send(sid, "look it up", overrides=ask)
        asked = await client.wait_event(
            sid, sent.run_id, lambda e: e["type"] == "permission_requested", 30
        )
        assert asked is not None and asked["request"]["expires_at"] is not None
        request_id = asked["request"]["request_id"]
        # Waiting: the run is pending (row and stream), the request is listed for the session.
        pending = await client.wait_event(
            sid, sent.run_id, lambda e: e.get("status") == "pending", 10
        )
        assert pending is not None and pending["type"] == "run_status_changed"
        assert (await client.run(sent.run_id))["status"] == "pending"
        listed = await client.ctx.redis.hkeys(names.session_permissions(sid))
        assert [k.decode() for k in listed] == [request_id]

        [run] = (await client.wait_terminal([sent.run_id], timeout_s=30)).values()
        assert run["status"] == "completed"
        # The deadline's denial is stored like a person's (a late decision is refused) and
        # the model was told why the call did not run.
        decision = json.loads(
            await client.ctx.redis.get(names.permission_decision(sid, request_id))
        )
        assert (decision["behavior"], decision["decided_by"]) == ("deny", "timeout")
        told = [
            c.text
            for r in model.requests
            for m in r.messages
            for b in m.content
            if isinstance(b, ToolResultBlock)
            for c in b.content
            if hasattr(c, "text")
        ]
        assert any("nobody decided within 2 s" in t for t in told), told
        timeline = await client.timeline(sid, sent.run_id)
        decided = [e for e in timeline if e["event_type"] == "permission_decided"]
        assert len(decided) == 1 and '"timed_out":true' in decided[0]["payload_json"]
        statuses = [
            e.status
            for _, e in await client.events(sid, sent.run_id, timeout_s=10)
            if e.type == "run_status_changed"
        ]
        assert statuses == ["running", "pending", "running"]
        assert not await client.ctx.redis.hkeys(names.session_permissions(sid))
    finally:
        await worker.close()


@pytest.mark.parametrize("n", [2])
async def test_parallel_requests_keep_the_run_pending_until_the_last_is_decided(
    n: int, make_cluster: Any, client: BusClient, redis_url: str, names: BusNames, tmp_path: Path
) -> None:
    from agent_core.runtime import ScriptedReply
    from agent_core.types.enums import Role
    from agent_core.types.protocol import ToolCall

    def reply(request: ModelRequest) -> ScriptedReply:
        if request.messages[-1].role is Role.TOOL:
            return ScriptedReply(text="both answered")
        return ScriptedReply(
            tool_calls=[ToolCall(id=f"call_{i}", name="lookup", arguments={}) for i in range(n)]
        )

    make_cluster(lambda _: None, workers=0)
    await client.wait_ready(("storage_writer",), timeout_s=120)
    worker = await start_worker(
        redis_url, names, tmp_path, ScriptedModel(reply), tools=[LookupTool()]
    )
    try:
        sid = await client.new_session()
        sent = await client.send(sid, "two", overrides={"tool_policy": {"ask": ["lookup"]}})
        redis = client.ctx.redis
        for _ in range(300):
            if len(await redis.hkeys(names.session_permissions(sid))) == n:
                break
            await asyncio.sleep(0.05)
        ids = sorted(k.decode() for k in await redis.hkeys(names.session_permissions(sid)))
        assert len(ids) == n
        for i, request_id in enumerate(ids):
            await redis.set(
                names.permission_decision(sid, request_id),
                json.dumps({"request_id": request_id, "behavior": "allow"}),
            )
            await redis.rpush(names.permission_wake(sid, request_id), b"1")
            if i < n - 1:
                await asyncio.sleep(0.5)
                assert (await client.run(sent.run_id))["status"] == "pending"
        [run] = (await client.wait_terminal([sent.run_id], timeout_s=30)).values()
        assert run["status"] == "completed"
    finally:
        await worker.close()


async def test_a_decision_answers_only_the_run_that_asked(
    make_cluster: Any, client: BusClient, redis_url: str, names: BusNames, tmp_path: Path
) -> None:
    """Two sessions whose model names its tool call alike (``call_0``, as Ollama does): allowing
    the first session's call must not allow the second's — its request waits for its own."""
    from agent_core.runtime import ScriptedReply
    from agent_core.types.enums import Role
    from agent_core.types.protocol import ToolCall

    def reply(request: ModelRequest) -> ScriptedReply:
        if request.messages[-1].role is Role.TOOL:
            return ScriptedReply(text="answered")
        return ScriptedReply(tool_calls=[ToolCall(id="call_0", name="lookup", arguments={})])

    make_cluster(lambda _: None, workers=0)
    await client.wait_ready(("storage_writer",), timeout_s=120)
    worker = await start_worker(
        redis_url, names, tmp_path, ScriptedModel(reply), tools=[LookupTool()]
    )
    ask = {"tool_policy": {"ask": ["lookup"]}}
    redis = client.ctx.redis

    async def asked(sid: str, run_id: str) -> str:
        event = await client.wait_event(
            sid, run_id, lambda e: e["type"] == "permission_requested", 30
        )
        assert event is not None
        return str(event["request"]["request_id"])

    async def decide(sid: str, request_id: str, behavior: str) -> None:  # as the gateway does
        decision = {"request_id": request_id, "behavior": behavior}
        assert await redis.set(
            names.permission_decision(sid, request_id), json.dumps(decision), nx=True
        )
        await redis.rpush(names.permission_wake(sid, request_id), b"1")

    try:
        first, second = await client.new_session(), await client.new_session()
        sent_a = await client.send(first, "a", overrides=ask)
        request_a = await asked(first, sent_a.run_id)
        await decide(first, request_a, "allow")
        await client.wait_terminal([sent_a.run_id], timeout_s=30)
        sent_b = await client.send(second, "b", overrides=ask)
        request_b = await asked(second, sent_b.run_id)
        assert request_b != request_a
        await decide(second, request_b, "deny")  # refused if the first decision had answered it
        await client.wait_terminal([sent_b.run_id], timeout_s=30)
        for sid, run_id, behavior in (
            (first, sent_a.run_id, "allow"),
            (second, sent_b.run_id, "deny"),
        ):
            decided = [
                json.loads(e["payload_json"])
                for e in await client.timeline(sid, run_id)
                if e["event_type"] == "permission_decided"
            ]
            assert [d["behavior"] for d in decided] == [behavior]
    finally:
        await worker.close()
