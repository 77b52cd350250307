"""Context budget: build time of a long compacted session, and the token estimate's error.

``build_p95_ms_2000``: the context build (``ContextBuilder.build``) of a 2,000-node session path
(a task, then tool turns with ~1,000-token results, token counts stored as the writer stores
them) with a compaction node every 200 nodes, as the loop builds it each turn (the node objects
kept between builds, as the run-worker keeps a session's path). Goal: <= 20 ms p95.
``build_p95_ms_2000_uncompacted``: the same path without compaction nodes (every node a message).

``estimate_error_pct``: a 120-turn run of the agent loop against the OpenAI fake whose reported
``prompt_tokens`` are counted from each request (tests/fakes/tokens.py: a model of a BPE
tokenizer — no real tokenizer is available offline, so this measures the estimate against that
model, not against a real provider). Tool outputs cycle through English prose, Python code, JSON
and Chinese. The mean absolute error of the calibrated estimate (what budgets use) over every
request after the first; ``estimate_error_raw_pct`` is the same without calibration, and
``raw_error_by_kind_pct`` the uncalibrated error per kind of text. Goal: <= 10 %.

Printed last, one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "shared")]

from agent_core.context import ContextBuilder, estimate_text, estimate_tokens  # noqa: E402
from agent_core.types.enums import NodeType, Role  # noqa: E402
from agent_core.types.protocol import (  # noqa: E402
    TextBlock,
    ToolCall,
    ToolCallBlock,
    ToolDefinition,
    ToolResult,
    ToolResultBlock,
)
from agent_core.types.runtime import Node  # noqa: E402
from tests.fakes import script as s  # noqa: E402
from tests.fakes.tokens import count_request, count_text  # noqa: E402
from tests.integration.provider.context_harness import (  # noqa: E402
    chain,
    config,
    handle,
    node,
    run_path,
)
from tests.integration.provider.harness import running  # noqa: E402

SESSION = "sess_20260101_000000_abcd"
KINDS = {
    "prose": "The build of module {i} finished after the tests passed; the report lists every "
    "warning the compiler raised and what was changed to silence it.\n",
    "code": "def step_{i}(path: str, *, limit: int = {i}) -> dict[str, int]:\n"
    "    rows = [r for r in read(path) if r.size < limit]\n    return {{'n': len(rows)}}\n",
    "json": '{{"id": {i}, "path": "output/part_{i}.csv", "ok": true, "rows": [1, 2, {i}]}}\n',
    "cjk": "第{i}个模块已构建完成，测试全部通过，报告列出了编译器的每一条警告。\n",
}


def _output(kind: str, i: int, lines: int = 30) -> str:
    return "".join(KINDS[kind].format(i=i * 100 + j) for j in range(lines))


def _session(n: int, compactions: bool = True) -> list[Node]:
    """A path of ``n`` nodes with a compaction node every 200 nodes (``compactions``), token
    counts stored."""
    nodes = [node(Role.USER, [TextBlock(text="Build every module.")])]
    last_covered = ""
    while len(nodes) < n:
        i = len(nodes)
        if compactions and i % 200 == 199:
            meta = {"covers_through": last_covered, "covered": i - 60, "method": "summary"}
            summary = [TextBlock(text="SUMMARY " + _output("prose", i, 20))]
            nodes.append(node(Role.SYSTEM, summary, node_type=NodeType.COMPACTION, metadata=meta))
            continue
        if i % 200 == 140:
            last_covered = nodes[-1].node_id
        call = f"call_{i}"
        nodes.append(node(Role.ASSISTANT, [ToolCallBlock(id=call, name="big", arguments={})]))
        text = _output(list(KINDS)[i % 4], i)
        result = ToolResultBlock(tool_call_id=call, content=[TextBlock(text=text)])
        nodes.append(node(Role.TOOL, [result]))
    path = chain(nodes[:n])
    return [p.model_copy(update={"token_count": estimate_tokens(p.content)}) for p in path]


def build_p95_ms(n: int = 2000, rounds: int = 200, compactions: bool = True) -> float:
    path = _session(n, compactions)
    agent = config(context_window=200_000, max_output_tokens=8192)
    builder = ContextBuilder()
    tools = [ToolDefinition(name=f"tool_{i}", description="a tool " * 20) for i in range(20)]
    samples = []
    for _ in range(rounds):
        t = time.perf_counter()
        builder.build(path, session_id=SESSION, config=agent, tools=tools)
        samples.append((time.perf_counter() - t) * 1000)
    return statistics.quantiles(samples, n=20)[18]


class _Tools:
    def definitions(self) -> list[ToolDefinition]:
        return [ToolDefinition(name="big", description="Returns a large output.")]

    async def execute(self, call: ToolCall, *, node_id: str | None = None) -> ToolResult:
        i = int(call.arguments.get("i", 0))
        text = _output(list(KINDS)[i % 4], i, 10)
        return ToolResult(tool_call_id=call.id, content=[TextBlock(text=text)])


async def estimate_errors(turns: int = 120) -> tuple[float, float]:
    prompts: list[int] = []

    def model(body: Any) -> s.ScriptedResponse:
        prompt = count_request(body)
        usage = s.Usage(input_tokens=prompt, output_tokens=20)
        if "You compact a conversation" in json.dumps(body):
            return s.ScriptedTurn(steps=[s.Text(text="SUMMARY of the builds."), usage, s.Finish()])
        prompts.append(prompt)
        if len(prompts) >= turns:
            return s.ScriptedTurn(steps=[s.Text(text="Done."), usage, s.Finish()])
        call = s.tool_call(0, f"call_{len(prompts)}", "big", [json.dumps({"i": len(prompts)})])
        return s.ScriptedTurn(steps=[*call, usage, s.Finish(reason="tool_use")])

    agent = config(context_window=32_768, max_output_tokens=1024, max_turns=turns + 1)
    async with running("openai") as (server, adapter):
        server.default = model
        path = chain([node(Role.USER, [TextBlock(text="Build every module.")])])
        _, loop = await run_path(adapter, path, agent, tools=_Tools(), run=handle())
    reports = loop.context.reports
    calibrated, raw = [], []
    for report, prompt in list(zip(reports, prompts, strict=True))[1:]:
        assert report.budget is not None
        calibrated.append(abs(report.budget.total - prompt) / prompt)
        raw.append(abs(report.budget.estimated - prompt) / prompt)
    return 100 * statistics.mean(calibrated), 100 * statistics.mean(raw)


def main() -> None:
    build = build_p95_ms()
    uncompacted = build_p95_ms(compactions=False)
    calibrated, raw = asyncio.run(estimate_errors())
    by_kind = {}
    for kind in KINDS:
        text = _output(kind, 7, 200)
        reference = count_text(text)
        by_kind[kind] = round(100 * (estimate_text(text) - reference) / reference, 1)
    print(
        json.dumps(
            {
                "build_p95_ms_2000": round(build, 2),
                "build_p95_ms_2000_uncompacted": round(uncompacted, 2),
                "estimate_error_pct": round(calibrated, 2),
                "estimate_error_raw_pct": round(raw, 2),
                "raw_error_by_kind_pct": by_kind,
            }
        )
    )


if __name__ == "__main__":
    main()
