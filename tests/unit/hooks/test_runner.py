"""The runner's bounds and the pipeline's folding: process groups die with a timeout, stderr
is capped, on_error overrides its default, ask goes to the permission flow, rewrites are
checked against the tool's schema and chain, matchers and agent kinds select hooks."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from agent_core.hooks import MAX_STDERR, run_hook
from agent_core.ids import new_id
from agent_core.tools import PermissionGate, PermissionRules
from agent_core.types.enums import PermissionBehavior, PermissionPolicy
from agent_core.types.protocol import PermissionDecision, PermissionRequest, ToolCall
from agent_core.types.runtime import RunHandle
from tests.unit.hooks.rig import SESSION, bind, run_agent, script, toml_str, tool_executor
from tests.unit.runtime.fakes import MemoryStore


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its reaper does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


async def test_a_timeout_kills_the_hooks_whole_process_group(tmp_path: Path) -> None:
    hook = script(tmp_path, "slow.sh", 'sleep 60 &\necho $! > "$0.child"\nwait')
    run = await run_hook([str(hook)], b"{}", timeout_s=0.5, env=dict(os.environ))
    assert run.outcome == "timeout"
    child = int((tmp_path / "slow.sh.child").read_text())
    for _ in range(50):  # SIGKILL is delivered at once; reaping by init may take a moment
        if not _alive(child):
            break
        await asyncio.sleep(0.02)
    assert not _alive(child)


async def test_stderr_is_capped_and_a_huge_stdout_stops_the_hook(tmp_path: Path) -> None:
    hook = script(tmp_path, "loud.sh", "head -c 100000 /dev/zero | tr '\\0' e >&2\nexit 2")
    run = await run_hook([str(hook)], b"{}", timeout_s=5, env=dict(os.environ))
    assert run.outcome == "exit_2" and len(run.stderr) == MAX_STDERR
    flood = script(tmp_path, "flood.sh", "exec yes")
    run = await run_hook([str(flood)], b"{}", timeout_s=5, env=dict(os.environ))
    assert run.outcome == "oversized_output"


async def test_a_hook_that_ignores_a_large_input_still_answers(tmp_path: Path) -> None:
    hook = script(tmp_path, "deaf.sh", "printf '{}'")
    run = await run_hook([str(hook)], b"x" * 1_000_000, timeout_s=5, env=dict(os.environ))
    assert run.outcome == "ok"


def _entry(event: str, path: Path, extra: str = "") -> str:
    return f"[[hooks.{event}]]\ncommand = [{toml_str(str(path))}]\ntimeout_s = 2\n{extra}\n"


async def test_on_error_overrides_the_events_default(tmp_path: Path) -> None:
    broken = script(tmp_path, "broken.sh", "exit 1")
    # PreToolUse fails open only when its config says so ...
    out = await run_agent(
        tmp_path, _entry("PreToolUse", broken, 'on_error = "continue"'), "main", tool="echo"
    )
    assert out.echo.ran == ["hi"] and out.records[0]["decision"] == "continue"
    # ... and PostToolUse withholds the output when it fails with on_error = block.
    out = await run_agent(
        tmp_path, _entry("PostToolUse", broken, 'on_error = "block"'), "sub", tool="echo"
    )
    (result,) = out.tool_results()
    assert result.is_error and "withheld" in result.content[0].text  # type: ignore[union-attr]


async def test_rewrites_chain_and_a_rewrite_the_schema_refuses_follows_on_error(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.json").write_text('{"updated_arguments": {"text": "first"}}')
    (tmp_path / "b.sh.want").write_text("")
    first = script(tmp_path, "a.sh", f"cat > /dev/null\ncat {tmp_path}/a.json")
    # The second hook sees the first one's rewrite and rewrites again.
    second = script(
        tmp_path,
        "b.sh",
        'grep -q \'"text":"first"\' && printf \'{"updated_arguments": {"text": "second"}}\'',
    )
    config = _entry("PreToolUse", first) + _entry("PreToolUse", second)
    out = await run_agent(tmp_path, config, "fork", tool="echo")
    assert out.echo.ran == ["second"]
    assert [r["decision"] for r in out.records] == ["rewrite", "rewrite"]
    (tmp_path / "a.json").write_text('{"updated_arguments": {"text": ""}}')  # min_length=1
    out = await run_agent(tmp_path, _entry("PreToolUse", first), "main", tool="echo")
    (result,) = out.tool_results()
    assert out.echo.ran == [] and "schema" in result.content[0].text  # type: ignore[union-attr]


async def test_matcher_and_agents_select_hooks(tmp_path: Path) -> None:
    deny = script(tmp_path, "deny.sh", "exit 2")
    config = _entry("PreToolUse", deny, 'matcher = "ech?|write_*"\nagents = ["sub"]')
    assert (await run_agent(tmp_path, config, "main", tool="echo")).echo.ran == ["hi"]
    assert (await run_agent(tmp_path, config, "sub", tool="echo")).echo.ran == []
    assert (await run_agent(tmp_path, config, "sub", tool="fail")).records == []


def test_only_tool_events_hooks_reach_the_tool_executor(tmp_path: Path) -> None:
    """A run whose hooks are all of other events gives its executor none: its tool calls skip
    the hooks' lookups. A hook of any tool-call event keeps them, whatever its matcher."""
    true = script(tmp_path, "true.sh", "exit 0")
    handle = RunHandle(run_id=new_id("run"), session_id=SESSION, agent_id=new_id("agent"))

    def executor_hooks(config: str) -> object:
        hooks = bind(tmp_path, config, "main", handle, MemoryStore())
        assert hooks is not None
        return tool_executor(tmp_path, handle, [], hooks).hooks

    assert executor_hooks(_entry("Stop", true) + _entry("UserPromptSubmit", true)) is None
    for event in ("PreToolUse", "PostToolUse", "PostToolUseFailure"):
        assert executor_hooks(_entry(event, true, 'matcher = "other"')) is not None, event


async def test_ask_turns_an_allowed_call_into_a_permission_request() -> None:
    asked: list[PermissionRequest] = []

    async def broker(request: PermissionRequest) -> PermissionDecision:
        asked.append(request)
        return PermissionDecision(request_id=request.request_id, behavior=PermissionBehavior.ALLOW)

    gate = PermissionGate(PermissionRules(), broker)
    call = ToolCall(id="c1", name="echo", arguments={})
    ids = {"session_id": "s", "run_id": "r", "agent_id": "a"}
    decided = await gate.decide(call, writes=False, ask="hook h asks: a person checks this", **ids)
    assert decided.behavior is PermissionBehavior.ALLOW
    assert [r.reason for r in asked] == ["hook h asks: a person checks this"]
    # A hook's ask never loosens the policy: a denied tool stays denied, nobody is asked.
    strict = PermissionGate(PermissionRules(per_tool={"echo": PermissionPolicy.DENY}), broker)
    refused = await strict.decide(call, writes=False, ask="hook h asks", **ids)
    assert refused.behavior is PermissionBehavior.DENY and len(asked) == 1


async def test_ask_without_anyone_to_ask_refuses_the_call(tmp_path: Path) -> None:
    (tmp_path / "ask.json").write_text('{"decision": "ask", "reason": "needs a human"}')
    hook = script(tmp_path, "ask.sh", f"cat {tmp_path}/ask.json")
    out = await run_agent(tmp_path, _entry("PreToolUse", hook), "sub", tool="echo")
    (result,) = out.tool_results()
    assert out.echo.ran == [] and "Permission denied" in result.content[0].text  # type: ignore[union-attr]
    assert out.records[0]["decision"] == "ask"


async def test_a_decision_the_event_does_not_take_is_invalid_output(tmp_path: Path) -> None:
    (tmp_path / "ask.json").write_text('{"decision": "ask"}')
    hook = script(tmp_path, "ask.sh", f"cat {tmp_path}/ask.json")
    out = await run_agent(tmp_path, _entry("Stop", hook), "main")
    assert (
        out.records[0]["decision"] == "continue"
        and "not one this event takes" in out.records[0]["reason"]
    )
    assert out.ending.end.turns == 1


def test_the_runner_behaves_the_same_on_uvloop(tmp_path: Path) -> None:
    # The workers run uvloop: pipes and the exit are watched by whichever loop runs.
    import uvloop

    answer = script(tmp_path, "answer.sh", 'cat > /dev/null\nprintf \'{"decision": "deny"}\'')
    blocker = script(tmp_path, "block.sh", "echo no >&2\nexit 2")
    slow = script(tmp_path, "slow.sh", "exec sleep 30")
    flood = script(tmp_path, "flood.sh", "exec yes")
    env = dict(os.environ)

    async def all_four() -> list[str]:
        runs = [
            await run_hook([str(path)], b"{}" * 50_000, timeout_s=0.5, env=env)
            for path in (answer, blocker, slow, flood)
        ]
        assert runs[0].output is not None and runs[0].output.decision == "deny"
        assert runs[1].stderr == "no\n"
        return [r.outcome for r in runs]

    assert uvloop.run(all_four()) == ["ok", "exit_2", "timeout", "oversized_output"]
