"""An attempt's stages against the real writer: what its claim returns (everything its start
reads, as one :class:`Claimed`), and where a recovered attempt starts — the node its lost attempt
stored last, read once the new claim has fenced the lost attempt out."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent_core.bus import BusNames
from agent_core.errors import StorageError
from agent_core.ids import new_id
from agent_core.runtime import LookupTool, ScriptedModel, tool_then_answer
from agent_core.types.enums import Role
from agent_core.types.protocol import ModelRequest, TextBlock
from agent_core.types.runtime import Node
from services.run_worker.claim import Claimed, placed_path
from tests.integration.run_worker.harness import BusClient
from tests.integration.run_worker.inprocess import InProcessWorker, start_worker


class _Recording(ScriptedModel):
    """A scripted model that keeps the requests it answered."""

    def __init__(self) -> None:
        super().__init__(tool_then_answer())
        self.requests: list[ModelRequest] = []

    def stream(self, request: ModelRequest) -> Any:
        self.requests.append(request)
        return super().stream(request)


@pytest.fixture
async def writer_ready(make_cluster: Any, client: BusClient) -> None:
    make_cluster(lambda _: None, workers=0)  # the storage-writer alone; the worker runs here
    await client.wait_ready(("storage_writer",), timeout_s=120)


@contextlib.asynccontextmanager
async def _worker(
    redis_url: str, names: BusNames, home: Path, model: Any
) -> AsyncIterator[InProcessWorker]:
    worker = await start_worker(redis_url, names, home, model, tools=[LookupTool()])
    try:
        yield worker
    finally:
        await worker.close()


@pytest.mark.usefixtures("writer_ready")
async def test_the_claim_returns_the_path_to_the_message_it_placed(
    client: BusClient, redis_url: str, names: BusNames, tmp_path: Path
) -> None:
    async with _worker(redis_url, names, tmp_path, _Recording()) as w:
        take = w.executor.claimer.take
        taken: list[Claimed | bool] = []

        async def recorded(item: Any) -> Claimed | bool:
            claimed = await take(item)
            taken.append(claimed)
            return claimed

        w.executor.claimer.take = recorded  # type: ignore[method-assign]
        sid = await client.new_session()
        first = await client.send(sid, "first question")
        await client.wait_terminal([first.run_id])
        second = await client.send(sid, "second question")
        [run] = (await client.wait_terminal([second.run_id])).values()
    assert run["status"] == "completed"
    claimed = taken[-1]
    assert isinstance(claimed, Claimed)
    assert (claimed.handle.run_id, claimed.handle.attempt) == (second.run_id, 1)
    assert (claimed.cancelled, claimed.cwd, claimed.memory) == (False, "workspace", "")
    # The claim placed the message and returned the path to it, after the first run's answer:
    # the attempt starts from it without reading it again.
    assert claimed.placed is not None and claimed.placed.node_id == second.node_id
    path = placed_path(claimed.above, claimed.placed)
    assert path is not None
    stored = await client.path(sid, second.node_id)
    assert [n.node_id for n in path] == [n["node_id"] for n in stored]
    assert first.node_id in [n.node_id for n in path]


@pytest.mark.usefixtures("writer_ready")
async def test_a_recovered_attempt_starts_from_the_node_its_lost_attempt_stored_last(
    client: BusClient, redis_url: str, names: BusNames, tmp_path: Path
) -> None:
    model = _Recording()
    async with _worker(redis_url, names, tmp_path, model) as w:
        claim = w.executor.claimer.claim
        lost: list[Claimed] = []
        answer_id = new_id("node")

        async def stored_then_lost(item: Any, number: int) -> Claimed | bool:
            claimed = await claim(item, number)
            if number > 1:
                return claimed
            assert isinstance(claimed, Claimed) and claimed.placed is not None
            # The first attempt stores its answer, and its worker is lost before the end.
            answer = Node(
                node_id=answer_id,
                parent_id=claimed.placed.node_id,
                agent_id=claimed.handle.agent_id,
                run_id=claimed.handle.run_id,
                role=Role.ASSISTANT,
                content=[TextBlock(text="the stored answer")],
            )
            await claimed.store.append_node(answer)
            lost.append(claimed)
            raise RuntimeError("worker lost")

        w.executor.claimer.claim = stored_then_lost  # type: ignore[method-assign]
        sid = await client.new_session()
        sent = await client.send(sid, "answer me once")
        [run] = (await client.wait_terminal([sent.run_id], timeout_s=60)).values()
        # The lost attempt can write no more: the second claim fenced it out.
        [first] = lost
        late = Node(
            node_id=new_id("node"),
            parent_id=answer_id,
            agent_id=first.handle.agent_id,
            run_id=first.handle.run_id,
            role=Role.ASSISTANT,
            content=[TextBlock(text="too late")],
        )
        with pytest.raises(StorageError) as refused:
            await first.store.append_node(late)
    assert refused.value.code == "stale_attempt"
    # The second attempt found the answer where the run stood: it completed without asking the
    # model again, on the stored answer.
    assert (run["status"], run["attempt"], run["end_node_id"]) == ("completed", 2, answer_id)
    assert model.requests == []
