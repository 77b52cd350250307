"""Choosing what a compaction covers and pins, and how the builder presents a compacted path."""

from __future__ import annotations

from agent_core.context import ContextBuilder
from agent_core.context.compaction import Compactor, plan
from agent_core.context.summarize import PROMPT
from agent_core.context.tokens import estimate_text
from agent_core.types.enums import NodeType, Role
from agent_core.types.protocol import TextBlock, ToolResultBlock
from agent_core.types.runtime import ContextBudget, ContextBuildReport
from tests.integration.provider.context_harness import chain, config, long_path, node
from tests.unit.runtime.fakes import MemoryStore

SESSION = "sess_20260101_000000_abcd"


def _compaction(covers_through: str, pinned: list[str], covered: int) -> object:
    meta = {"covers_through": covers_through, "pinned": pinned, "covered": covered}
    return node(
        Role.SYSTEM, [TextBlock(text="SUMMARY")], node_type=NodeType.COMPACTION, metadata=meta
    )


def test_the_cut_keeps_the_newest_turn_with_its_call_and_pins_the_task() -> None:
    path = long_path(10, lines=3)
    chosen = plan(path, keep=0)
    assert chosen is not None
    kept = path[chosen.end + 1 :]
    assert [n.role for n in kept] == [Role.ASSISTANT, Role.TOOL], "a result never loses its call"
    assert chosen.pinned == [path[0].node_id], "the user's task is pinned"
    assert plan(path[:1], keep=0) is None, "a lone message has nothing to cover"


def test_system_nodes_are_never_covered_and_instructions_are_pinned() -> None:
    memory = node(Role.SYSTEM, [TextBlock(text="MEMORY")], node_type=NodeType.MEMORY_CONTEXT)
    result = ToolResultBlock(tool_call_id="call_0", content=[TextBlock(text="PLAN: step 1")])
    plan_node = node(Role.TOOL, [result], node_type=NodeType.PLAN_INSTRUCTION)
    base = long_path(6, lines=3)
    path = chain([base[0], memory, base[1], plan_node, *base[3:]])
    chosen = plan(path, keep=0)
    assert chosen is not None
    assert memory not in chosen.covered and plan_node.node_id in chosen.pinned
    compacted = chain([*path, _compaction(chosen.covers_through, chosen.pinned, 9)])
    request, report = ContextBuilder().build(compacted, session_id=SESSION, config=config())
    system = "\n".join(b.text for b in request.system)
    assert "MEMORY" in system and "PLAN: step 1" in system and "PINNED-SYSTEM-PROMPT" in system
    first = request.messages[0]
    assert first.role is Role.USER
    text = first.content[0].text  # type: ignore[union-attr]
    assert "SUMMARY" in text and "Build every module." in text and "9 messages" in text
    assert report.compaction_node_id == compacted[-1].node_id
    assert report.compacted == len(chosen.covered) - 2  # the task and the plan are pinned
    assert report.budget is not None and report.budget.pinned > 0


def test_a_later_compaction_covers_from_the_earlier_ones_end_and_carries_its_pins() -> None:
    path = long_path(8, lines=3)
    first = plan(path, keep=0)
    assert first is not None
    path = chain([*path, _compaction(first.covers_through, first.pinned, len(first.covered))])
    more = long_path(4, lines=3)[1:]
    path = chain([*path, *more])
    second = plan(path, keep=0)
    assert second is not None
    assert second.previous == "SUMMARY" and second.previous_count == len(first.covered)
    assert path[0].node_id in second.pinned, "pins carry over"
    assert all(n.node_id not in {c.node_id for c in first.covered} for n in second.covered)


async def test_a_summarizer_that_raises_anything_falls_back_to_a_trim() -> None:
    class Broken:
        def stream(self, request: object) -> object:
            raise RuntimeError("the adapter broke in an unexpected way")

    store, path = MemoryStore(), long_path(10, lines=3)
    budget = ContextBudget(
        context_window=4096, output_reserve=512, input_budget=3584, compact_at=2867, total=4000
    )
    report = ContextBuildReport(session_id=SESSION, agent_id=path[0].agent_id, budget=budget)
    nodes = list(path)

    async def append(nodes: list, role: Role, blocks: list, **kw: object) -> object:  # type: ignore[type-arg]
        made = node(role, blocks, parent_id=nodes[-1].node_id, **kw)  # type: ignore[arg-type]
        nodes.append(made)
        return made

    made = await Compactor(config(), Broken()).compact(  # type: ignore[arg-type]
        nodes, report, append=append, event=store.append_event, trigger="threshold"
    )
    assert made is not None and made.metadata["method"] == "trim"
    assert made.metadata["failure"] == "error"
    _, built = ContextBuilder().build(nodes, session_id=SESSION, config=config())
    assert built.compacted > 0 and path[-1].node_id in built.node_ids, "never empty"


def test_pins_fit_their_share_of_a_small_window_newest_first() -> None:
    """Five 500-token messages pinned whole outgrow a 2,048-token window for good: the pins
    take at most their share of the input budget, the newest words first."""
    talk = [
        node(role, [TextBlock(text=f"message {i}: " + "word " * (400 if i % 2 == 0 else 10))])
        for i, role in enumerate([Role.USER, Role.ASSISTANT] * 5)
    ]
    path = chain([*talk, node(Role.USER, [TextBlock(text="and now?")])])
    unbounded = plan(path, keep=0)
    assert unbounded is not None and len(unbounded.pinned) == 3  # the three newest, 500 each
    assert plan(path, keep=0, pin_budget=128).pinned == []  # type: ignore[union-attr]
    small = node(Role.USER, [TextBlock(text="keep the csv format")])
    path = chain([*talk[:-1], small, talk[-1], node(Role.USER, [TextBlock(text="and now?")])])
    bounded = plan(path, keep=0, pin_budget=128)
    assert bounded is not None and bounded.pinned == [small.node_id]


async def test_the_summarizer_fits_the_agents_window_and_a_summary_its_share() -> None:
    """An unknown model name is assumed 32,768 tokens wide; with a 2,048-token window configured
    (or learned), the agent's own model summarizing must read and write within that, and its
    summary take at most a quarter of the input budget, so that it shrinks the context."""
    from collections.abc import AsyncIterator

    from agent_core.types.protocol import ModelRequest, TextDeltaEvent

    asked: list[ModelRequest] = []

    class Recording:
        async def stream(self, request: ModelRequest) -> AsyncIterator[TextDeltaEvent]:
            asked.append(request)
            yield TextDeltaEvent(text="a short summary")

    small = config(context_window=2048, max_output_tokens=512)
    compactor = Compactor(small, Recording())  # type: ignore[arg-type]
    summarizer = compactor.summarizer
    assert summarizer.chunk_budget() > 2048  # before fitting: the name's assumed window
    store, path = MemoryStore(), long_path(12, lines=40)
    budget = ContextBudget(
        context_window=2048, output_reserve=512, input_budget=1536, compact_at=1228, total=3000
    )
    report = ContextBuildReport(session_id=SESSION, agent_id=path[0].agent_id, budget=budget)

    async def append(nodes: list, role: Role, blocks: list, **kw: object) -> object:  # type: ignore[type-arg]
        made = node(role, blocks, parent_id=nodes[-1].node_id, **kw)  # type: ignore[arg-type]
        nodes.append(made)
        return made

    made = await compactor.compact(
        list(path), report, append=append, event=store.append_event, trigger="overflow"
    )
    assert made is not None and made.metadata["method"] == "summary" and asked
    assert summarizer.summary_tokens == 1536 // 4
    assert all(r.max_tokens == 1536 // 4 for r in asked)
    for request in asked:  # every call's input fits the window with its answer
        text = request.messages[0].content[0].text  # type: ignore[union-attr]
        assert estimate_text(PROMPT) + estimate_text(text) + 1536 // 4 <= 2048, len(text)
