"""Fault injection: each kind of exception raised at each step of a turn ends the run exactly once.

Steps: claiming the run, building its loop, streaming the model's answer, running a tool,
appending a node, writing the end. Kinds: an expected error of the provider and of storage, an
unexpected bug (its message holds a secret that must not come out), a bare ``TimeoutError`` and a
stray ``CancelledError``. For every pair, in its own session: the run ends once (one terminal
event on the timeline, one ``run_finished`` on its stream) with the usage it had so far and a
redacted error; the next message in the session completes with a well-formed request (every tool
call answered, a cancelled message not carried along); no lane stays leased.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from agent_core.bus import BusNames
from agent_core.errors import ProviderError, StorageError
from agent_core.runtime import LookupTool
from agent_core.runtime.lookup_tool import LookupArgs
from agent_core.tools import ToolContext, ToolOutput
from agent_core.types.enums import Role, StopReason
from agent_core.types.protocol import (
    MessageEndEvent,
    MessageStartEvent,
    ModelEvent,
    ModelRequest,
    TextDeltaEvent,
    ToolCallBlock,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolResultBlock,
    Usage,
    UsageEvent,
)
from services.run_worker.adapters import BusRunStore
from tests.integration.run_worker.harness import BusClient
from tests.integration.run_worker.inprocess import start_worker

SECRET = "sk-" + "a1b2c3d4" * 4
STEPS = ("claim", "build", "stream", "tool", "append", "end")
KINDS: dict[str, Callable[[], BaseException]] = {
    "provider": lambda: ProviderError("upstream_down", "the provider is down"),
    "storage": lambda: StorageError("db_locked", "the database is locked"),
    "bug": lambda: RuntimeError(f"a bug, and the key {SECRET}"),
    "timeout": lambda: TimeoutError(),
    "cancelled": lambda: asyncio.CancelledError(),
}
TERMINAL = {"run_completed", "run_failed", "run_cancelled", "run_aborted"}
_CASE = re.compile(r"case-\d+")


class Faults:
    """One exception armed per case (a session), raised once at its step."""

    def __init__(self) -> None:
        self.armed: dict[str, tuple[str, BaseException]] = {}
        self.case_of_session: dict[str, str] = {}
        self.fired: set[str] = set()

    def hit(self, case: str | None, step: str) -> None:
        armed = self.armed.get(case or "")
        if case and armed is not None and armed[0] == step:
            del self.armed[case]
            self.fired.add(case)
            raise armed[1]


def _case(text: str) -> str | None:
    found = _CASE.search(text)
    return found.group(0) if found else None


def _text(blocks: list[Any]) -> str:
    return " ".join(getattr(b, "text", "") for b in blocks)


class FaultyModel:
    """Asks for one ``lookup``, then answers in two pieces (the fault can fall between them)."""

    def __init__(self, faults: Faults) -> None:
        self.faults = faults
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        case = _case(_text(request.messages[0].content)) if request.messages else None
        yield MessageStartEvent()
        last = request.messages[-1]
        if any(isinstance(b, ToolResultBlock) for b in last.content):
            yield TextDeltaEvent(text="the answer, ")
            self.faults.hit(case, "stream")
            yield TextDeltaEvent(text="complete.")
            yield UsageEvent(usage=Usage(input_tokens=10, output_tokens=10))
            yield MessageEndEvent(stop_reason=StopReason.END_TURN)
            return
        call_id = "call_" + secrets.token_hex(4)
        q = _text(last.content)[:40]
        yield ToolCallStartEvent(index=0, id=call_id, name="lookup")
        yield ToolCallEndEvent(index=0, id=call_id, name="lookup", arguments={"q": q})
        yield UsageEvent(usage=Usage(input_tokens=10, output_tokens=10))
        yield MessageEndEvent(stop_reason=StopReason.TOOL_USE)


class FaultyLookup(LookupTool):
    def __init__(self, faults: Faults) -> None:
        self.faults = faults

    async def run(self, args: LookupArgs, ctx: ToolContext) -> ToolOutput:
        self.faults.hit(_case(args.q), "tool")
        return await super().run(args, ctx)


def _well_formed(request: ModelRequest) -> bool:
    """Every assistant message's tool calls are answered by the tool message right after it."""
    messages = request.messages
    for i, message in enumerate(messages):
        calls = {b.id for b in message.content if isinstance(b, ToolCallBlock)}
        if not calls:
            continue
        if i + 1 >= len(messages) or messages[i + 1].role is not Role.TOOL:
            return False
        answered = {
            b.tool_call_id for b in messages[i + 1].content if isinstance(b, ToolResultBlock)
        }
        if answered != calls:
            return False
    return True


# Input tokens a run has used when it ends, by the step its fault hit (10 a model call).
_USAGE = {"claim": 20, "build": 0, "stream": 10, "tool": 20, "append": 10, "end": 10}


@pytest.fixture
async def rig(
    make_cluster: Any, client: BusClient, redis_url: str, names: BusNames, tmp_path: Path
) -> AsyncIterator[tuple[Faults, FaultyModel, Any]]:
    make_cluster(lambda _: None, workers=0)  # the storage-writer alone
    await client.wait_ready(("storage_writer",), timeout_s=120)
    faults = Faults()
    model = FaultyModel(faults)
    worker = await start_worker(redis_url, names, tmp_path, model, tools=[FaultyLookup(faults)])
    yield faults, model, worker
    await worker.close()


def _patch(monkeypatch: pytest.MonkeyPatch, faults: Faults, worker: Any) -> None:
    executor = worker.executor
    claim, build, send = executor.claimer.claim, executor.loops.build, executor.storage.send
    append = BusRunStore.append_node

    async def claim_hook(item: Any, number: int) -> Any:
        faults.hit(_case(_text(item.run.content)), "claim")
        return await claim(item, number)

    def build_hook(a: Any, *rest: Any) -> Any:
        faults.hit(_case(_text(a.item.run.content)), "build")
        return build(a, *rest)

    async def append_hook(self: BusRunStore, node: Any, **kw: Any) -> Any:
        faults.hit(faults.case_of_session.get(self.handle.session_id), "append")
        return await append(self, node, **kw)

    async def send_hook(command: Any) -> Any:
        if command.type == "end_run":
            faults.hit(faults.case_of_session.get(command.session_id), "end")
        return await send(command)

    monkeypatch.setattr(executor.claimer, "claim", claim_hook)
    monkeypatch.setattr(executor.loops, "build", build_hook)
    monkeypatch.setattr(BusRunStore, "append_node", append_hook)
    monkeypatch.setattr(executor.storage, "send", send_hook)


async def test_every_exception_at_every_step_ends_the_run_once(
    rig: tuple[Faults, FaultyModel, Any], client: BusClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    faults, model, worker = rig
    _patch(monkeypatch, faults, worker)
    cases = [(step, kind) for step in STEPS for kind in KINDS]

    async def one(n: int, step: str, kind: str) -> tuple[str, str, dict[str, Any]]:
        case = f"case-{n}"
        sid = await client.new_session()
        faults.case_of_session[sid] = case
        faults.armed[case] = (step, KINDS[kind]())
        first = await client.send(sid, f"{case} please look it up")
        [run] = (await client.wait_terminal([first.run_id], timeout_s=90)).values()
        timeline = await client.timeline(sid, first.run_id)
        terminal = [e["event_type"] for e in timeline if e["event_type"] in TERMINAL]
        stream = await client.events(sid, first.run_id, timeout_s=20)
        finals = [e for _, e in stream if e.type == "run_finished"]
        where = f"{step}/{kind}: {run['status']} {run.get('error_json')}"
        assert case in faults.fired, where
        assert len(terminal) == 1 and len(finals) == 1, (where, terminal, len(finals))
        assert finals[0].status == run["status"], where
        usage = json.loads(run["usage_json"] or "{}")
        expected = 10 if (step, kind) == ("tool", "cancelled") else _USAGE[step]
        assert usage.get("input_tokens", 0) == expected, (where, usage)
        assert SECRET not in json.dumps([run, timeline]), where
        # The next message in the session works, from a path every provider accepts.
        follow = await client.send(sid, f"{case} follow-up")
        [after] = (await client.wait_terminal([follow.run_id], timeout_s=60)).values()
        assert after["status"] == "completed", (where, after.get("error_json"))
        requests = [r for r in model.requests if r.metadata.get("run_id") == follow.run_id]
        assert requests and all(_well_formed(r) for r in requests), where
        if run["status"] == "cancelled" and run["turn_count"] == 0:
            # Cancelled before it did anything: its message is not carried into the next run.
            assert "please look it up" not in _text(requests[0].messages[-1].content), where
        return step, kind, run

    ended = await asyncio.gather(*(one(n, s, k) for n, (s, k) in enumerate(cases)))
    statuses = {(s, k): r["status"] for s, k, r in ended}
    assert statuses[("build", "bug")] == "failed"
    assert statuses[("stream", "cancelled")] == "cancelled"
    assert statuses[("claim", "bug")] == statuses[("end", "bug")] == "completed"  # taken over
    bug = next(r for s, k, r in ended if (s, k) == ("build", "bug"))
    assert json.loads(bug["error_json"])["code"] == "internal_error"
    for sid in faults.case_of_session:
        for _ in range(100):
            if await client.queue.lease_holder(sid) is None:
                break
            await asyncio.sleep(0.1)
        assert await client.queue.lease_holder(sid) is None, "a lane stayed leased"
