"""A long session through each provider's fake: three runs of sixty tool turns each, with large
tool results, in a 16k window. The fake counts every prompt (tests/fakes/tokens.py) and refuses one
over the window, as a provider would. Several compactions happen; every context stays within its
budget; the pinned items (system prompt, loaded skill, memory, plan, task board, the task and the
user's correction) are in every request after each compaction; no node is lost; and a context
built at a node before a compaction is that point's full context."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from agent_core.context import ContextBuilder
from agent_core.types.enums import EndReason, NodeType, Role, RunStatus
from agent_core.types.protocol import TextBlock, ToolCall, ToolDefinition, ToolResult
from agent_core.types.runtime import Node
from tests.fakes import script as s
from tests.fakes.tokens import count_request
from tests.integration.provider.context_harness import (
    big_text,
    chain,
    compactions,
    config,
    handle,
    node,
    run_path,
)
from tests.integration.provider.harness import PROVIDERS, running
from tests.unit.runtime.fakes import MemoryStore

WINDOW, OUTPUT = 16_384, 1024
TURNS = 60
MARKS = ("PINNED-SYSTEM-PROMPT", "SKILL-MARK", "MEMORY-MARK", "Build every module.")
LATER_MARKS = ("PLAN-MARK", "TASK-BOARD-MARK")
CORRECTION = "CORRECTION-MARK: use metric units from now on."


class Tools:
    """``big`` returns a large mixed output; ``plan`` a plan instruction; ``board`` a board."""

    def definitions(self) -> Sequence[ToolDefinition]:
        return [ToolDefinition(name=n) for n in ("big", "plan", "board")]

    async def execute(self, call: ToolCall, *, node_id: str | None = None) -> ToolResult:
        text, meta = big_text(int(call.arguments.get("i", 0)), 20), {}
        if call.name == "plan":
            text, meta = "PLAN-MARK: build the modules in order.", {"node_type": "plan_instruction"}
        elif call.name == "board":
            text, meta = "board updated", {"task_board": "TASK-BOARD-MARK: 3 open tasks"}
        return ToolResult(tool_call_id=call.id, content=[TextBlock(text=text)], metadata=meta)


class Model:
    """The fake's answers: a summary for the summarizer; for the agent, a tool call per turn and
    an answer on the hundredth; a context overflow for any prompt over the window."""

    def __init__(self) -> None:
        self.turn = 0
        self.calls = 0
        self.overflows = 0
        self.agent_prompts: list[int] = []

    def __call__(self, body: Any) -> s.ScriptedResponse:
        prompt = count_request(body)
        if prompt + OUTPUT > WINDOW:
            self.overflows += 1
            return s.ContextOverflow(prompt_tokens=prompt, limit=WINDOW)
        usage = s.Usage(input_tokens=prompt, output_tokens=30)
        if "You compact a conversation" in json.dumps(body):
            steps: list[s.Step] = [s.Text(text=f"SUMMARY after {self.calls} calls.")]
            return s.ScriptedTurn(steps=[*steps, usage, s.Finish()])
        self.agent_prompts.append(prompt)
        self.turn += 1
        if self.turn % TURNS == 0:
            return s.ScriptedTurn(steps=[s.Text(text="All built."), usage, s.Finish()])
        self.calls += 1
        name = {1: "plan", 2: "board"}.get(self.turn, "big")
        args = json.dumps({"i": self.calls})
        call = s.tool_call(0, f"call_{self.calls}", name, [args])
        return s.ScriptedTurn(steps=[*call, usage, s.Finish(reason="tool_use")])


def _start() -> list[Node]:
    return chain(
        [
            node(
                Role.SYSTEM,
                [TextBlock(text="SKILL-MARK: how to build")],
                node_type=NodeType.SKILL_CONTEXT,
                metadata={"skill": "builder"},
            ),
            node(
                Role.SYSTEM,
                [TextBlock(text="MEMORY-MARK: user likes tables")],
                node_type=NodeType.MEMORY_CONTEXT,
            ),
            node(Role.USER, [TextBlock(text="Build every module.")]),
        ]
    )


def _agent_bodies(bodies: list[str]) -> list[str]:
    return [b for b in bodies if "You compact a conversation" not in b]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_long_session_compacts_within_budget_and_keeps_its_pins(provider: str) -> None:
    model, store, tools = Model(), MemoryStore(), Tools()
    agent = config(context_window=WINDOW, max_output_tokens=OUTPUT, max_turns=TURNS + 1)
    run = handle()
    path = _start()
    reports = []
    async with running(provider) as (server, adapter):
        server.default = model
        for i, text in enumerate(["", CORRECTION, "Now check them all."]):
            if text:
                path = [*path, node(Role.USER, [TextBlock(text=text)], parent_id=path[-1].node_id)]
            run = run.model_copy(update={"run_id": f"run_{i:016x}"})
            end, loop = await run_path(adapter, path, agent, tools=tools, store=store, run=run)
            assert (end.status, end.end_reason) == (RunStatus.COMPLETED, EndReason.COMPLETED)
            reports += loop.context.reports
            path = loop.nodes
    bodies = [r.body.decode() for r in server.requests if not r.path.endswith("/api/show")]
    agent_bodies = _agent_bodies(bodies)

    # Several compactions, and the fake never had to refuse a prompt.
    made = compactions(path)
    assert len(made) >= 5 and model.overflows == 0
    assert all(c.metadata["method"] == "summary" for c in made)
    assert len(agent_bodies) == len(reports) == 3 * TURNS
    # Every context within its budget, by our estimate and by the provider's count.
    for report, prompt in zip(reports, model.agent_prompts, strict=True):
        assert report.budget is not None and report.budget.total <= report.budget.input_budget
        assert prompt <= WINDOW - OUTPUT
    # The calibrated estimate tracks what the provider counted.
    errors = [
        abs(r.budget.total - p) / p
        for r, p in zip(reports[10:], model.agent_prompts[10:], strict=True)
        if r.budget is not None
    ]
    assert max(errors) < 0.1

    # The pins are in every request after each compaction.
    first = next(i for i, r in enumerate(reports) if r.compaction_node_id is not None)
    correction_from = TURNS
    for i, body in enumerate(agent_bodies[first:], start=first):
        for mark in (*MARKS, *LATER_MARKS):
            assert mark in body, (i, mark)
        if i >= correction_from:
            assert "CORRECTION-MARK" in body, i
    assert "SUMMARY after" in agent_bodies[-1]

    # No node is lost: the path holds every node of every turn, and the store has each one.
    stored = {n.node_id: n for n in store.nodes}
    originals = [n for n in path if n.node_type is not NodeType.COMPACTION]
    # the start, two more messages, per run 99 tool turns and the answer, one task board
    assert len(originals) == 3 + 2 + 3 * (2 * (TURNS - 1) + 1) + 1
    assert all(n.node_id in stored for n in originals if n.run_id is not None)
    covered = {c.metadata["covers_through"] for c in made}
    assert covered <= set(stored)

    # Switching to a node before the first compaction builds that point's full context; a node
    # between two compactions is built with the earlier one.
    builder = ContextBuilder()
    at = path.index(made[0]) - 1
    _, before = builder.build(path[: at + 1], session_id=run.session_id, config=agent)
    assert before.compaction_node_id is None and before.compacted == 0
    assert [n for n in path[: at + 1] if n.node_id not in before.node_ids] == []
    between = path.index(made[1]) - 1
    _, mid = builder.build(path[: between + 1], session_id=run.session_id, config=agent)
    assert mid.compaction_node_id == made[0].node_id and mid.compacted > 0
