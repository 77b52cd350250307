"""Compaction through real run-workers and the storage-writer (SQLite): a run of 60 tool turns
in an 8,192-token window (the worker's tool definitions take about 4,000 of it) compacts several
times; every prompt the fake received fits the window, the covered nodes stay in the tree and
readable, each summary was written by an agent of purpose ``compact``, and each compaction is on
the timeline."""

from __future__ import annotations

import json
from typing import Any

from agent_core.bus.contracts.storage import ListAgents
from tests.fakes.script import Finish, ScriptedResponse, ScriptedTurn, Text, Usage
from tests.fakes.tokens import count_request
from tests.integration.run_worker.harness import BusClient, text_answer, tool_calls_turn

WINDOW, OUTPUT, TURNS = 8192, 512, 60
BIG = "".join(f"row {i}: module_{i}.py built, 第{i}步完成, status ok\n" for i in range(60))


class _Model:
    def __init__(self) -> None:
        self.turns = 0
        self.prompts: list[int] = []

    def __call__(self, request: Any) -> ScriptedResponse:
        prompt = count_request(request)
        if "You compact a conversation" in json.dumps(request):
            usage = Usage(input_tokens=prompt, output_tokens=20)
            return ScriptedTurn(steps=[Text(text="SUMMARY of the work so far."), usage, Finish()])
        self.prompts.append(prompt)
        self.turns += 1
        if self.turns == 1:
            turn = tool_calls_turn(
                ("call_w", "write_file", {"path": "scratchpad/big.txt", "content": BIG})
            )
        elif self.turns < TURNS:
            path = {"path": "scratchpad/big.txt"}
            turn = tool_calls_turn((f"call_{self.turns}", "read_file", path))
        else:
            turn = text_answer("All read.")
        # The prompt's size as a provider reports it: what the budget is calibrated with.
        steps = [
            Usage(input_tokens=prompt, output_tokens=9) if isinstance(step, Usage) else step
            for step in turn.steps
        ]
        return ScriptedTurn(steps=steps)


async def test_a_long_run_compacts_and_keeps_every_node(
    make_cluster: Any, client: BusClient
) -> None:
    model = _Model()
    cluster = make_cluster(model, workers=1)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()
    overrides = {"context_window": WINDOW, "max_output_tokens": OUTPUT, "max_turns": TURNS + 5}
    submitted = await client.send(sid, "Read the file many times.", overrides=overrides)
    done = await client.wait_terminal([submitted.run_id], timeout_s=180)
    run = done[submitted.run_id]
    assert (run["status"], run["end_reason"]) == ("completed", "completed"), (
        run,
        cluster.log_text()[-3000:],
    )

    assert model.turns == TURNS and max(model.prompts) <= WINDOW - OUTPUT
    tree = await client.tree(sid)
    kinds = [n["node_type"] for n in tree]
    compactions = [n for n in tree if n["node_type"] == "compaction"]
    assert len(compactions) >= 3
    # user message + (assistant, tool) per tool turn + the answer: none removed.
    assert len(tree) - len(compactions) == 1 + 2 * (TURNS - 1) + 1, kinds
    first_read = [n for n in tree if n["role"] == "tool"][1]  # after the write's
    path = await client.path(sid, first_read["node_id"])
    assert "row 59" in path[-1]["content_json"], "a covered node is still readable in full"

    agents = (await client.storage.query(ListAgents(session_id=sid))).data
    writers = [
        a for a in agents if json.loads(a["metadata_json"] or "{}").get("purpose") == "compact"
    ]
    assert len(writers) == len(compactions)
    assert {a["status"] for a in writers} == {"completed"}
    timeline = await client.timeline(sid, submitted.run_id)
    compacted = [e for e in timeline if e["event_type"] == "context_compacted"]
    assert [e["node_id"] for e in compacted] == [c["node_id"] for c in compactions]
