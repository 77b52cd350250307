"""A run of each kind of agent with hooks: the real loop, the real tool executor and the hooks
bound the way the run-worker binds them (``HookSetup``), on in-memory ports; hook scripts that
are real executables written to the test's folder."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from agent_core.config import load_settings
from agent_core.hooks import AgentKind, RunHooks
from agent_core.ids import new_id
from agent_core.runtime import AgentLoop, Ending, ScriptedModel, ScriptedReply
from agent_core.tools import (
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
)
from agent_core.types.enums import EventType, Role
from agent_core.types.protocol import ModelRequest, TextBlock, ToolCall, ToolResultBlock
from agent_core.types.runtime import AgentConfig, Node, RunHandle
from services.run_worker.adapters import WorkerToolRunner
from services.run_worker.hook_setup import HookSetup
from tests.unit.runtime.fakes import ListSink, MemoryStore

SESSION = "sess_20260101_000000_abcd"
KINDS: tuple[AgentKind, ...] = ("main", "orchestrator", "sub", "fork")


class EchoArgs(ToolArgs):
    text: str = Field(min_length=1)


class EchoTool(Tool[EchoArgs]):
    """Echoes its text and remembers each run (a refused call never gets here)."""

    name = "echo"
    description = "Echo text."
    input_model = EchoArgs

    def __init__(self) -> None:
        self.ran: list[str] = []

    async def run(self, args: EchoArgs, ctx: ToolContext) -> ToolOutput:
        self.ran.append(args.text)
        return ToolOutput(f"echo: {args.text}")


class FailTool(Tool[EchoArgs]):
    """Always an error result."""

    name = "fail"
    description = "Fails."
    input_model = EchoArgs

    async def run(self, args: EchoArgs, ctx: ToolContext) -> ToolOutput:
        return ToolOutput("fail: it broke", is_error=True)


def script(folder: Path, name: str, body: str) -> Path:
    """An executable ``/bin/sh`` script."""
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def toml_str(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass
class Outcome:
    """What one run did: its end, what it stored, the model's requests, the hook events."""

    ending: Ending
    store: MemoryStore
    requests: list[ModelRequest]
    echo: EchoTool
    hooks: RunHooks | None

    def events(self, kind: EventType) -> list[dict[str, Any]]:
        return [p for t, p in self.store.events if t == kind]

    @property
    def records(self) -> list[dict[str, Any]]:
        return self.events(EventType.HOOK_EXECUTED)

    def tool_results(self) -> list[ToolResultBlock]:
        return [b for n in self.store.nodes for b in n.content if isinstance(b, ToolResultBlock)]


def _user(
    handle: RunHandle, text: str, *, run_id: str | None = None, parent: str | None = None
) -> Node:
    return Node(
        node_id=new_id("node"),
        parent_id=parent,
        agent_id=handle.agent_id,
        run_id=run_id or handle.run_id,
        role=Role.USER,
        content=[TextBlock(text=text)],
    )


def start_path(handle: RunHandle, kind: AgentKind, prompt: str) -> list[Node]:
    """The path a run of ``kind`` starts on: a main run's message or a worker's task (nothing
    before it), a fork's task after the parent's conversation."""
    if kind != "fork":
        return [_user(handle, prompt)]
    earlier = _user(handle, "the parent's question", run_id=new_id("run"))
    return [earlier, _user(handle, prompt, parent=earlier.node_id)]


def bind(
    tmp_path: Path, config: str, kind: AgentKind, handle: RunHandle, store: MemoryStore
) -> RunHooks | None:
    """The run's hooks as the run-worker binds them for an agent of ``kind``."""
    (tmp_path / "config.toml").write_text(config)
    settings = load_settings(env={"SOONG_AGENT_HOME": str(tmp_path)})
    setup = HookSetup(settings, os.environ)
    in_effect = setup.in_effect("workspace", str(tmp_path))
    parent = None if kind == "main" else new_id("run")
    return setup.bind(in_effect, store, handle, kind, cwd=str(tmp_path), parent_run_id=parent)


def tool_executor(
    tmp_path: Path, handle: RunHandle, tools: list[Tool[Any]], hooks: RunHooks | None
) -> ToolExecutor:
    """The run's tool executor as the run-worker makes it: ``tools``, an allow-all gate and a
    workspace under ``tmp_path``, with ``hooks``."""
    workspace = Workspace(tmp_path / "home", "acct_1", SESSION)
    workspace.ensure()
    return ToolExecutor(
        ToolRegistry(tools),
        workspace=workspace,
        run_id=handle.run_id,
        agent_id=handle.agent_id,
        permissions=PermissionGate(PermissionRules()),
        artifacts=MemoryArtifactSink(),
        hooks=hooks,
    )


async def run_agent(
    tmp_path: Path,
    config: str,
    kind: AgentKind,
    *,
    tool: str | None = None,
    max_turns: int = 4,
    prompt: str = "please help",
) -> Outcome:
    """One run of an agent of ``kind``: the model calls ``tool`` once (if given), then answers;
    then the run's end hooks, as the run-worker calls them before it writes the end."""
    handle = RunHandle(
        run_id=new_id("run"), session_id=SESSION, agent_id=new_id("agent"), attempt=1
    )
    store, sink = MemoryStore(), ListSink()
    hooks = bind(tmp_path, config, kind, handle, store)
    echo = EchoTool()
    executor = tool_executor(tmp_path, handle, [echo, FailTool()], hooks)
    requests: list[ModelRequest] = []

    def reply(request: ModelRequest) -> ScriptedReply:
        requests.append(request)
        answered = any(isinstance(b, ToolResultBlock) for m in request.messages for b in m.content)
        if tool is not None and not answered:
            return ScriptedReply(
                tool_calls=[ToolCall(id="call_1", name=tool, arguments={"text": "hi"})]
            )
        return ScriptedReply(text=f"done {len(requests)}")

    loop = AgentLoop(
        handle=handle,
        config=AgentConfig(provider="fake", model="m", max_turns=max_turns),
        model=ScriptedModel(reply),
        store=store,
        events=sink,
        tools=WorkerToolRunner(executor, executor.registry.definitions()),
        hooks=hooks,
    )
    path = start_path(handle, kind, prompt)
    ending = await loop.run(path)
    if hooks is not None:
        await hooks.pre_compact(loop.nodes)  # once for every case (compaction calls it too)
        await hooks.run_end(ending.end)
    return Outcome(ending, store, requests, echo, hooks)
