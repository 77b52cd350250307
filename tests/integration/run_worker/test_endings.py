"""How runs end when something other than their answer ends them: a cancel while being claimed,
the wall-clock budget, a worker lost again and again (the attempt cap)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent_core.bus import BusNames
from agent_core.runtime import LookupTool, ScriptedModel, ScriptedReply, tool_then_answer
from agent_core.types.enums import Role
from agent_core.types.protocol import ModelRequest, ToolResultBlock
from tests.integration.run_worker.harness import BusClient
from tests.integration.run_worker.inprocess import InProcessWorker, start_worker

TERMINAL = {"run_completed", "run_failed", "run_cancelled", "run_aborted"}


class Recording(ScriptedModel):
    """A scripted model that keeps the requests it answered."""

    def __init__(self, reply: Any) -> None:
        super().__init__(reply)
        self.requests: list[ModelRequest] = []

    def stream(self, request: ModelRequest) -> Any:
        self.requests.append(request)
        return super().stream(request)


@pytest.fixture
async def writer_ready(make_cluster: Any, client: BusClient) -> None:
    make_cluster(lambda _: None, workers=0)  # the storage-writer alone
    await client.wait_ready(("storage_writer",), timeout_s=120)


@contextlib.asynccontextmanager
async def _worker(
    redis_url: str, names: BusNames, home: Path, model: Any, extra: str = ""
) -> AsyncIterator[InProcessWorker]:
    worker = await start_worker(
        redis_url, names, home, model, tools=[LookupTool()], extra_config=extra
    )
    try:
        yield worker
    finally:
        await worker.close()


async def _terminal_events(client: BusClient, sid: str, run_id: str) -> list[str]:
    return [
        e["event_type"] for e in await client.timeline(sid, run_id) if e["event_type"] in TERMINAL
    ]


@pytest.mark.usefixtures("writer_ready")
async def test_a_run_cancelled_while_it_is_claimed_ends_cancelled_and_withdraws_its_message(
    client: BusClient, redis_url: str, names: BusNames, tmp_path: Path
) -> None:
    model = Recording(tool_then_answer())
    async with _worker(redis_url, names, tmp_path, model) as w:
        sid = await client.new_session()
        first = await client.send(sid, "first question")
        await client.wait_terminal([first.run_id])
        claim = w.executor.claimer.claim

        async def cancelled_meanwhile(item: Any, number: int) -> Any:
            await client.queue.request_cancel(item.run.run_id)  # after the prelude looked
            return await claim(item, number)

        w.executor.claimer.claim = cancelled_meanwhile  # type: ignore[method-assign]
        second = await client.send(sid, "never mind this one")
        [run] = (await client.wait_terminal([second.run_id])).values()
        w.executor.claimer.claim = claim  # type: ignore[method-assign]
        assert (run["status"], run["end_reason"], run["turn_count"]) == (
            "cancelled",
            "aborted_streaming",
            0,
        )
        assert await _terminal_events(client, sid, second.run_id) == ["run_cancelled"]
        events = await client.events(sid, second.run_id, timeout_s=10)
        assert events[-1][1].type == "run_finished" and events[-1][1].status == "cancelled"
        # The message is in the tree (the run's start node) but not on the active path: the
        # next message follows the first answer, not a request the user cancelled.
        tree = {n["node_id"] for n in await client.tree(sid)}
        assert second.node_id in tree
        before = len(model.requests)
        third = await client.send(sid, "the real question")
        [after] = (await client.wait_terminal([third.run_id])).values()
        assert after["status"] == "completed"
        texts = [
            getattr(b, "text", "")
            for r in model.requests[before:]
            for m in r.messages
            for b in m.content
        ]
        assert "the real question" in " ".join(texts)
        assert "never mind this one" not in " ".join(texts)


def _slow_answer(request: ModelRequest) -> ScriptedReply:
    last = request.messages[-1]
    if last.role is Role.TOOL or any(isinstance(b, ToolResultBlock) for b in last.content):
        return ScriptedReply(text="slowly " * 40, chunk_chars=7, delay_s=0.1)
    return tool_then_answer()(request)


@pytest.mark.usefixtures("writer_ready")
async def test_the_wall_clock_budget_ends_a_run_with_what_it_did_so_far(
    client: BusClient, redis_url: str, names: BusNames, tmp_path: Path
) -> None:
    async with _worker(redis_url, names, tmp_path, ScriptedModel(_slow_answer)):
        sid = await client.new_session()
        sent = await client.send(
            sid, "take your time", overrides={"budget": {"max_wall_clock_s": 1.0}}
        )
        [run] = (await client.wait_terminal([sent.run_id])).values()
        error = json.loads(run["error_json"])
        assert (run["status"], error["code"], error["details"]["limit"]) == (
            "failed",
            "budget_exceeded",
            "wall_clock",
        )
        # The tool turn counted, and what the answer had streamed stays as a partial answer.
        assert run["turn_count"] == 1
        assert json.loads(run["usage_json"])["input_tokens"] == 10
        last = (await client.path(sid, run["end_node_id"]))[-1]
        assert last["role"] == "assistant" and '"partial":true' in last["metadata_json"]
        assert "slowly" in last["content_json"]
        assert await _terminal_events(client, sid, sent.run_id) == ["run_failed"]


@pytest.mark.usefixtures("writer_ready")
async def test_a_run_that_keeps_losing_its_worker_ends_failed_with_a_clear_code(
    client: BusClient, redis_url: str, names: BusNames, tmp_path: Path
) -> None:
    model = ScriptedModel(tool_then_answer())
    extra = "max_attempts = 2"
    async with _worker(redis_url, names, tmp_path, model, extra) as w:
        claim = w.executor.claimer.claim
        lost: list[int] = []

        async def claimed_then_lost(item: Any, number: int) -> Any:
            attempt = await claim(item, number)
            if number <= 2:  # the worker is "lost" right after claiming: nobody ends the run
                lost.append(number)
                raise RuntimeError("worker lost")
            return attempt

        w.executor.claimer.claim = claimed_then_lost  # type: ignore[method-assign]
        sid = await client.new_session()
        sent = await client.send(sid, "doomed")
        [run] = (await client.wait_terminal([sent.run_id], timeout_s=60)).values()
        assert lost == [1, 2]
        error = json.loads(run["error_json"])
        assert (run["status"], run["attempt"], error["code"]) == ("failed", 3, "attempts_exhausted")
        assert error["details"] == {"attempts": 2, "max_attempts": 2}
        assert await _terminal_events(client, sid, sent.run_id) == ["run_failed"]
        for _ in range(50):
            if await client.queue.lease_holder(sid) is None:
                break
            await asyncio.sleep(0.1)
        assert await client.queue.lease_holder(sid) is None


@pytest.mark.parametrize("debug", [True, False])
@pytest.mark.usefixtures("writer_ready")
async def test_debug_mode_keeps_the_traceback_of_an_unexpected_failure_as_an_artifact(
    debug: bool,
    client: BusClient,
    redis_url: str,
    names: BusNames,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = "sk-" + "9f8e7d6c" * 4
    model = ScriptedModel(tool_then_answer())
    worker = await start_worker(
        redis_url, names, tmp_path, model, tools=[LookupTool()], debug=debug
    )
    try:

        def broken(*_args: Any) -> Any:
            raise ValueError(f"the loop could not be built (key {secret})")

        worker.executor.loops.build = broken  # type: ignore[method-assign]
        sid = await client.new_session()
        sent = await client.send(sid, "boom")
        [run] = (await client.wait_terminal([sent.run_id])).values()
    finally:
        await worker.close()
    error = json.loads(run["error_json"])
    assert (run["status"], error["code"]) == ("failed", "internal_error")
    assert error["message"] == "the run failed unexpectedly (ValueError)"
    timeline = await client.timeline(sid, sent.run_id)
    assert secret not in json.dumps([run, timeline]) and "Traceback" not in json.dumps(run)
    # The worker that ended the run said so once, with its figures and the error's code.
    [told] = [
        r for r in caplog.records if r.name == "soong.runs" and r.getMessage() != "run started"
    ]
    fields = told.fields  # type: ignore[attr-defined]
    assert (told.levelname, told.getMessage()) == ("WARNING", "run failed")
    assert (fields["status"], fields["error_code"]) == ("failed", "internal_error")
    assert secret not in fields["error_message"]
    [run_error] = [e for e in timeline if e["event_type"] == "run_error"]
    artifact_id = error["details"].get("traceback_artifact_id")
    if not debug:
        assert artifact_id is None
        return
    assert artifact_id is not None and artifact_id in run_error["payload_json"]
    from agent_core.bus.contracts.storage import GetArtifact

    reply = await client.storage.query(GetArtifact(artifact_id=artifact_id, session_id=sid))
    path = reply.data["path"]
    assert path == f"scratchpad/debug/traceback-{sent.run_id}-1.txt"
    text = (tmp_path / "accounts" / "acct1" / "sessions" / sid / path).read_text()
    assert "Traceback" in text and "ValueError: the loop could not be built" in text
    assert secret not in text and "[REDACTED]" in text
