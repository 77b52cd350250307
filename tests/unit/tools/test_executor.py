"""The executor: validation, permissions (allow/deny/ask), timeouts, caps and artifact reports."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

from agent_core.errors import ConfigError, ToolError
from agent_core.tools import (
    ExecutorSettings,
    MemoryArtifactSink,
    PermissionGate,
    PermissionRules,
    Tool,
    ToolArgs,
    ToolContext,
    ToolExecutor,
    ToolOutput,
    ToolRegistry,
    Workspace,
    builtin_tools,
)
from agent_core.types.enums import PermissionBehavior, PermissionPolicy
from agent_core.types.protocol import (
    ArtifactRefBlock,
    PermissionDecision,
    PermissionRequest,
    TextBlock,
    ToolCall,
    ToolResult,
)


class EchoArgs(ToolArgs):
    text: str = Field(min_length=1)
    repeat: int = Field(default=1, ge=1, le=100_000)


class EchoTool(Tool[EchoArgs]):
    name = "echo"
    description = "Echo text."
    input_model = EchoArgs

    async def run(self, args: EchoArgs, ctx: ToolContext) -> ToolOutput:
        return ToolOutput(args.text * args.repeat)


class SleepArgs(ToolArgs):
    seconds: float


class SleepTool(Tool[SleepArgs]):
    name = "sleep"
    description = "Sleep."
    input_model = SleepArgs
    timeout_s = 0.2

    async def run(self, args: SleepArgs, ctx: ToolContext) -> ToolOutput:
        await asyncio.sleep(args.seconds)
        return ToolOutput("slept")


class BrokenTool(Tool[SleepArgs]):
    name = "broken"
    description = "Raises."
    input_model = SleepArgs

    async def run(self, args: SleepArgs, ctx: ToolContext) -> ToolOutput:
        raise RuntimeError("boom with api_key=sk-abcdefghijklmnop1234")


class FailingTool(Tool[SleepArgs]):
    name = "failing"
    description = "Raises a ToolError."
    input_model = SleepArgs

    async def run(self, args: SleepArgs, ctx: ToolContext) -> ToolOutput:
        raise ToolError("thing_missing", "the thing is missing")


def text_of(result: ToolResult) -> str:
    first = result.content[0]
    assert isinstance(first, TextBlock)
    return first.text


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    workspace = Workspace(tmp_path, "acct_1", "sess_1")
    workspace.ensure()
    return workspace


def make_executor(
    ws: Workspace,
    *,
    rules: PermissionRules | None = None,
    broker: Any = None,
    sink: MemoryArtifactSink | None = None,
    cap: int = 32 * 1024,
    tools: list[Tool[Any]] | None = None,
) -> ToolExecutor:
    registry = ToolRegistry(
        [*builtin_tools(), EchoTool(), SleepTool(), BrokenTool(), FailingTool(), *(tools or [])]
    )
    return ToolExecutor(
        registry,
        workspace=ws,
        run_id="run_1",
        agent_id="agent_1",
        permissions=PermissionGate(rules or PermissionRules(), broker),
        artifacts=sink if sink is not None else MemoryArtifactSink(),
        settings=ExecutorSettings(output_cap_bytes=cap),
    )


def test_registry_rejects_duplicates_and_lists_definitions() -> None:
    registry = ToolRegistry([EchoTool()])
    with pytest.raises(ConfigError):
        registry.register(EchoTool())
    (definition,) = registry.definitions()
    assert definition.name == "echo"
    assert definition.input_schema["required"] == ["text"]
    assert definition.input_schema["additionalProperties"] is False
    assert "title" not in definition.input_schema


class LimitedArgs(ToolArgs):
    code: str = Field(min_length=1, max_length=1_000_000)
    lines: list[str] = Field(default_factory=list, max_length=3)
    maxLength: int = 0


class LimitedTool(EchoTool):
    name = "limited"
    input_model = LimitedArgs  # type: ignore[assignment]

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutput:
        return ToolOutput(args.code)


async def test_size_limits_are_checked_on_calls_not_shown_to_the_model(ws: Workspace) -> None:
    """A grammar-compiling server (llama.cpp's) runs out of memory on ``maxLength: 1000000``."""
    schema = LimitedTool().definition().input_schema
    props = schema["properties"]
    assert "maxLength" not in props["code"] and "maxItems" not in props["lines"]
    assert props["code"]["minLength"] == 1 and "maxLength" in props  # other keywords, names stay
    executor = make_executor(ws, tools=[LimitedTool()])
    over = await executor.execute(
        ToolCall(id="c1", name="limited", arguments={"code": "x", "lines": ["a"] * 4})
    )
    assert over.is_error and "lines" in str(over.content)


def test_registries_are_independent() -> None:
    a, b = ToolRegistry([EchoTool()]), ToolRegistry()
    assert a.names() == ["echo"]
    assert b.names() == []


async def test_valid_call_succeeds(ws: Workspace) -> None:
    result = await make_executor(ws).execute(
        ToolCall(id="c1", name="echo", arguments={"text": "hi"})
    )
    assert not result.is_error
    assert result.tool_call_id == "c1"
    assert text_of(result) == "hi"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({}, "text: Field required"),
        ({"text": 5}, "text: Input should be a valid string"),
        ({"text": "x", "colour": "red"}, "colour: Extra inputs are not permitted"),
        ({"text": "x", "repeat": 0}, "repeat: Input should be greater than or equal to 1"),
    ],
)
async def test_schema_mismatch_is_an_error_result_that_says_what_is_wrong(
    ws: Workspace, arguments: dict[str, Any], expected: str
) -> None:
    executor = make_executor(ws)
    result = await executor.execute(ToolCall(id="c1", name="echo", arguments=arguments))
    assert result.is_error
    assert expected in text_of(result)
    assert '"required":["text"]' in text_of(result)  # the schema, to call it right next time
    assert result.metadata["error_code"] == "invalid_arguments"
    # the loop goes on: the same executor runs the next call
    ok = await executor.execute(ToolCall(id="c2", name="echo", arguments={"text": "ok"}))
    assert not ok.is_error


async def test_unknown_tool(ws: Workspace) -> None:
    result = await make_executor(ws).execute(ToolCall(id="c1", name="nope"))
    assert result.is_error
    assert "Unknown tool 'nope'" in text_of(result)
    assert "read_file" in text_of(result)


async def test_a_tool_not_enabled_is_refused_whatever_the_model_asks(ws: Workspace) -> None:
    executor = make_executor(ws)
    executor.enabled = frozenset({"echo", "read_file"})
    result = await executor.execute(
        ToolCall(id="c1", name="write_file", arguments={"path": "output/x.txt", "content": "x"})
    )
    assert result.is_error and result.metadata["error_code"] == "tool_not_enabled"
    assert "not enabled for this agent: 'write_file'" in text_of(result)
    assert "Available tools: echo, read_file." in text_of(result)
    assert not (ws.root / "output" / "x.txt").exists()  # it never ran
    ok = await executor.execute(ToolCall(id="c2", name="echo", arguments={"text": "hi"}))
    assert not ok.is_error


async def test_timeout_and_tool_errors_become_results(ws: Workspace) -> None:
    executor = make_executor(ws)
    slow = await executor.execute(ToolCall(id="c1", name="sleep", arguments={"seconds": 30}))
    assert slow.is_error and "timed out after 0.2 s" in text_of(slow)
    failing = await executor.execute(ToolCall(id="c2", name="failing", arguments={"seconds": 0}))
    assert failing.is_error and text_of(failing) == "the thing is missing"
    assert failing.metadata["error_code"] == "thing_missing"
    broken = await executor.execute(ToolCall(id="c3", name="broken", arguments={"seconds": 0}))
    assert broken.is_error and "RuntimeError" in text_of(broken)
    assert "sk-abcdefghijklmnop1234" not in text_of(broken)


async def test_oversized_output_is_cut_and_saved_whole(ws: Workspace) -> None:
    sink = MemoryArtifactSink()
    executor = make_executor(ws, sink=sink, cap=1000)
    call = ToolCall(id="c1", name="echo", arguments={"text": "ab", "repeat": 5000})
    result = await executor.execute(call)
    text = text_of(result)
    assert text.startswith("ab" * 500)
    assert "[truncated 9000 bytes]" in text
    assert [o.text for o in sink.outputs] == ["ab" * 5000]
    ref = result.content[1]
    assert isinstance(ref, ArtifactRefBlock) and len(result.content) == 2
    assert text.endswith(f"(full output saved as artifact {ref.artifact_id})")
    assert result.metadata["truncated_bytes"] == 9000


async def test_policy_deny_and_ask_without_broker(ws: Workspace) -> None:
    rules = PermissionRules(default=PermissionPolicy.DENY, read_only=None)
    result = await make_executor(ws, rules=rules).execute(
        ToolCall(id="c1", name="echo", arguments={"text": "x"})
    )
    assert result.is_error and "Permission denied" in text_of(result)
    ask = PermissionRules(default=PermissionPolicy.ASK)
    call = ToolCall(id="c2", name="write_file", arguments={"path": "output/a", "content": "x"})
    result = await make_executor(ws, rules=ask).execute(call)
    assert result.is_error and "no one can be asked" in text_of(result)
    assert not (ws.root / "output" / "a").exists()


async def test_ask_waits_for_the_broker(ws: Workspace) -> None:
    requests: list[PermissionRequest] = []
    decision: asyncio.Future[PermissionDecision] = asyncio.get_running_loop().create_future()

    async def broker(request: PermissionRequest) -> PermissionDecision:
        requests.append(request)
        return await decision

    rules = PermissionRules(default=PermissionPolicy.ASK)
    executor = make_executor(ws, rules=rules, broker=broker)
    call = ToolCall(id="c1", name="write_file", arguments={"path": "output/a.md", "content": "x"})
    task = asyncio.create_task(executor.execute(call))
    await asyncio.sleep(0.05)
    assert not task.done()  # paused until a decision arrives
    assert requests[0].tool_call == call and requests[0].run_id == "run_1"
    decision.set_result(
        PermissionDecision(request_id=requests[0].request_id, behavior=PermissionBehavior.ALLOW)
    )
    result = await task
    assert not result.is_error
    assert (ws.root / "output" / "a.md").read_text() == "x"
    # read-only tools are not asked under the default read_only rule
    read = await executor.execute(
        ToolCall(id="c2", name="read_file", arguments={"path": "output/a.md"})
    )
    assert not read.is_error and len(requests) == 1


async def test_ask_denied_and_mismatched_decision(ws: Workspace) -> None:
    async def deny(request: PermissionRequest) -> PermissionDecision:
        return PermissionDecision(
            request_id=request.request_id, behavior=PermissionBehavior.DENY, reason="not today"
        )

    async def confused(request: PermissionRequest) -> PermissionDecision:
        return PermissionDecision(request_id="perm_other", behavior=PermissionBehavior.ALLOW)

    rules = PermissionRules(per_tool={"echo": PermissionPolicy.ASK})
    call = ToolCall(id="c1", name="echo", arguments={"text": "x"})
    denied = await make_executor(ws, rules=rules, broker=deny).execute(call)
    assert denied.is_error and "not today" in text_of(denied)
    mismatched = await make_executor(ws, rules=rules, broker=confused).execute(call)
    assert mismatched.is_error and "different request" in text_of(mismatched)


async def test_files_written_to_output_are_reported(ws: Workspace) -> None:
    sink = MemoryArtifactSink()
    executor = make_executor(ws, sink=sink)
    await executor.execute(
        ToolCall(id="c1", name="write_file", arguments={"path": "output/r.md", "content": "# hi"}),
        node_id="node_1",
    )
    await executor.execute(
        ToolCall(id="c2", name="write_file", arguments={"path": "scratch/t.txt", "content": "x"})
    )
    (record,) = sink.files
    assert record.path == "output/r.md"
    assert record.size_bytes == 4
    assert record.mime_type == "text/markdown"
    assert record.tool_call_id == "c1" and record.node_id == "node_1"


class TidyTool(Tool[SleepArgs]):
    """Writes like a script would: removes a scratch file and changes a deliverable."""

    name = "tidy"
    description = "Deletes scratchpad/old.txt and rewrites output/r.md."
    input_model = SleepArgs
    writes = True

    async def run(self, args: SleepArgs, ctx: ToolContext) -> ToolOutput:
        (ctx.workspace.root / "scratchpad" / "old.txt").unlink()
        (ctx.workspace.root / "output" / "r.md").write_text("# changed, and longer")
        return ToolOutput("tidied")


async def test_a_writing_calls_changes_in_output_and_scratchpad_are_listed(
    ws: Workspace,
) -> None:
    executor = make_executor(ws, tools=[TidyTool()])
    wrote = await executor.execute(
        ToolCall(id="c1", name="write_file", arguments={"path": "output/r.md", "content": "# hi"})
    )
    scratch = await executor.execute(
        ToolCall(id="c2", name="write_file", arguments={"path": "scratch/old.txt", "content": "x"})
    )
    tidied = await executor.execute(ToolCall(id="c3", name="tidy", arguments={"seconds": 0}))
    (made,) = wrote.metadata["files"]
    assert (made["path"], made["area"], made["change"], made["size_bytes"]) == (
        "output/r.md",
        "output",
        "created",
        4,
    )
    assert made["artifact_id"] is not None
    assert [(f["path"], f["area"], f["change"]) for f in scratch.metadata["files"]] == [
        ("scratchpad/old.txt", "scratchpad", "created")
    ]
    assert [(f["path"], f["change"]) for f in tidied.metadata["files"]] == [
        ("output/r.md", "modified"),
        ("scratchpad/old.txt", "deleted"),
    ]


async def test_cancellation_propagates(ws: Workspace) -> None:
    task = asyncio.create_task(
        make_executor(ws).execute(ToolCall(id="c1", name="sleep", arguments={"seconds": 0.15}))
    )
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_a_permission_request_is_the_runs_own() -> None:
    from agent_core.tools.permissions import request_id_of

    one = request_id_of("run_a", "call_0")
    assert one == request_id_of("run_a", "call_0")  # a resumed run asks the same request again
    assert one != request_id_of("run_b", "call_0")  # another run's call of the same id does not
    assert re.fullmatch(r"perm_[0-9a-f]{32}", one)
    assert re.fullmatch(r"perm_[0-9a-f]{32}", request_id_of("run_a", "weird id/..\u00e9" * 40))
