"""The compact command in the loop: a run started by ``/compact`` compacts everything before it
and answers what it did; a run taken over after its compaction was stored answers with that one
instead of compacting again."""

from __future__ import annotations

from agent_core.ids import new_id
from agent_core.runtime import AgentLoop
from agent_core.runtime.scripted import ScriptedModel, ScriptedReply
from agent_core.types.enums import EndReason, NodeType, Role, RunStatus
from agent_core.types.protocol import ModelRequest, TextBlock
from agent_core.types.runtime import Node
from tests.integration.provider.context_harness import chain, config, handle, long_path, node
from tests.unit.runtime.fakes import ListSink, MemoryStore


async def _run(path: list[Node], run_id: str) -> tuple[str, MemoryStore, list[ModelRequest]]:
    requests: list[ModelRequest] = []

    def reply(request: ModelRequest) -> ScriptedReply:
        requests.append(request)
        return ScriptedReply(text="SUMMARY of the builds")

    store = MemoryStore()
    run = handle().model_copy(update={"run_id": run_id})
    loop = AgentLoop(
        handle=run, config=config(), model=ScriptedModel(reply), store=store, events=ListSink()
    )
    ending = await loop.run(path)
    assert (ending.end.status, ending.end.end_reason) == (RunStatus.COMPLETED, EndReason.COMPLETED)
    return ending.text, store, requests


async def test_the_command_compacts_everything_before_it() -> None:
    run_id = new_id("run")
    command = node(Role.USER, [TextBlock(text="/compact")], run_id=run_id)
    path = chain([*long_path(5, lines=2), command])
    text, store, requests = await _run(path, run_id)
    assert text.startswith("Compacted: 11 earlier messages are summarized")
    (compaction,) = [n for n in store.nodes if n.node_type is NodeType.COMPACTION]
    assert compaction.metadata["covers_through"] == path[-2].node_id
    assert len(requests) == 1 and requests[0].metadata == {"purpose": "compact"}


async def test_a_taken_over_command_answers_with_the_compaction_it_stored() -> None:
    run_id = new_id("run")
    command = node(Role.USER, [TextBlock(text="/compact")], run_id=run_id)
    earlier = chain([*long_path(5, lines=2), command])
    meta = {"covers_through": earlier[-2].node_id, "covered": 11, "method": "summary"}
    stored = node(
        Role.SYSTEM,
        [TextBlock(text="SUMMARY")],
        node_type=NodeType.COMPACTION,
        run_id=run_id,
        metadata={**meta, "tokens_before": 900},
    )
    text, store, requests = await _run(chain([*earlier, stored]), run_id)
    assert text.startswith("Compacted: 11 earlier messages are summarized")
    assert requests == [] and store.nodes == []
