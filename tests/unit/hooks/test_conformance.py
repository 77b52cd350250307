"""The hook conformance suite: every event × every way a hook can end × every kind of agent
(main, orchestrator, worker, fork) behaves as the README's "Hooks" section says, with real hook
processes.

A hook ends one of seven ways — exit 0 with a decision, exit 2, another exit code, a timeout, a
missing binary, stdout that is not JSON, stdout over the cap — and each event turns that into
what its row of the README's table promises, with every hook's default ``on_error``. The agent
kinds run the same loop and executor with the hooks bound by the run-worker's ``HookSetup`` for
their kind (a main or orchestrator run, a worker's task, a fork of a conversation); each execution is one
``hook_executed`` event carrying a hash of the input, never the input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_core.hooks import DEFAULT_ON_ERROR, EVENT_NAMES
from agent_core.types.enums import EndReason, EventType, NodeType, Role, RunStatus
from agent_core.types.protocol import TextBlock
from tests.unit.hooks.rig import KINDS, SESSION, Outcome, run_agent, script, toml_str

CASES = ("decision", "exit_2", "exit_1", "timeout", "missing", "invalid_json", "oversized")
# What exit 0 answers per event: the decision each event is about.
DECISIONS = {
    "PreToolUse": {"decision": "deny", "reason": "no echo today"},
    "PostToolUse": {"additional_context": "checked by policy"},
    "PostToolUseFailure": {"additional_context": "checked by policy"},
    "UserPromptSubmit": {"additional_context": "the user is on call"},
    "Stop": {"decision": "deny", "reason": "run the tests first"},
    "SessionStart": {"decision": "allow"},
    "SubagentStop": {"decision": "allow"},
    "PreCompact": {"decision": "allow"},
    "RunEnd": {"decision": "allow"},
}
OUTCOMES = {
    "decision": "ok",
    "exit_2": "exit_2",
    "exit_1": "exit_code",
    "timeout": "timeout",
    "missing": "not_started",
    "invalid_json": "invalid_output",
    "oversized": "oversized_output",
}
TOOL_OF = {"PreToolUse": "echo", "PostToolUse": "echo", "PostToolUseFailure": "fail"}


def _hook_config(tmp_path: Path, event: str, case: str) -> str:
    body = {
        "decision": f"cat > \"$0.in\"\nprintf '%s' '{json.dumps(DECISIONS[event])}'",
        "exit_2": "cat > /dev/null\necho 'blocked by rule 7' >&2\nexit 2",
        "exit_1": "cat > /dev/null\necho 'oops' >&2\nexit 1",
        "timeout": "exec sleep 30",
        "missing": "",
        "invalid_json": "cat > /dev/null\nprintf 'this is not json'",
        "oversized": "cat > /dev/null\nhead -c 100000 /dev/zero",
    }[case]
    path = script(tmp_path, "hook.sh", body)
    command = str(tmp_path / "no-such-hook") if case == "missing" else str(path)
    return f'[[hooks.{event}]]\nname = "h"\ncommand = [{toml_str(command)}]\ntimeout_s = 0.3\n'


def _text(block: Any) -> str:
    return "".join(c.text for c in block.content if isinstance(c, TextBlock))


def _expected_records(event: str, kind: str, outcome: Outcome) -> int:
    if event == "SessionStart" and kind == "fork":
        return 0  # a fork's context is its parent's conversation: no session starts
    if event == "SubagentStop" and kind in ("main", "orchestrator"):
        return 0  # only a child agent's run stops as a sub-agent
    if event == "Stop":
        return len(outcome.events(EventType.STOP_HOOK_PREVENTED)) or 1
    return 1


def _decision_word(event: str, case: str) -> str:
    if case == "decision":
        return {"PreToolUse": "deny", "Stop": "deny"}.get(event, "allow")
    if case == "exit_2":
        return "block"
    return DEFAULT_ON_ERROR[EVENT_NAMES[event]]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("event", list(EVENT_NAMES))
async def test_event_case_kind(tmp_path: Path, event: str, case: str, kind: str) -> None:
    config = _hook_config(tmp_path, event, case)
    out = await run_agent(tmp_path, config, kind, tool=TOOL_OF.get(event), max_turns=3)  # type: ignore[arg-type]
    records = out.records
    assert len(records) == _expected_records(event, kind, out), records
    for record in records:
        assert record["hook"] == "h" and record["event"] == event
        assert record["outcome"] == OUTCOMES[case], record
        assert record["decision"] == _decision_word(event, case)
        assert record["agent_type"] == kind and record["source"] == "operator"
        assert len(record["input_sha256"]) == 64 and record["duration_ms"] >= 0
        assert "please help" not in json.dumps(record)  # a hash of the input, never the input
    if case == "decision" and records:
        sent = json.loads((tmp_path / "hook.sh.in").read_text())
        assert sent["phase"] == EVENT_NAMES[event].value and sent["agent_type"] == kind
        assert sent["session_id"] == SESSION and sent["run_id"] == out.hooks.handle.run_id  # type: ignore[union-attr]
    CHECKS[event](case, out)


def _pre_tool_use(case: str, out: Outcome) -> None:
    # Every way but a plain allow refuses the call: deny, exit 2, and each failure (on_error
    # defaults to block here — a guard that fails must not fail open).
    (result,) = out.tool_results()
    assert out.echo.ran == [] and result.is_error
    reason = {"decision": "no echo today", "exit_2": "blocked by rule 7"}.get(
        case, "on_error is block"
    )
    assert reason in _text(result) and "Hook h refused" in _text(result)
    assert out.ending.end.status is RunStatus.COMPLETED  # the model saw it and answered


def _post_tool(case: str, out: Outcome, *, failed: bool) -> None:
    (result,) = out.tool_results()
    text = _text(result)
    original = "fail: it broke" if failed else "echo: hi"
    if case == "exit_2":  # the output is withheld: the model sees the reason as an error
        assert result.is_error and original not in text and "blocked by rule 7" in text
    elif case == "decision":
        assert original in text and "[hook h] checked by policy" in text
        assert result.is_error is failed
    else:  # on_error defaults to continue: the result goes on as it was
        assert text == original and result.is_error is failed
    assert out.ending.end.status is RunStatus.COMPLETED


def _user_prompt_submit(case: str, out: Outcome) -> None:
    end = out.ending.end
    if case == "decision":
        notes = [n for n in out.store.nodes if n.node_type is NodeType.SYSTEM_NOTE]
        assert [n.role for n in notes] == [Role.SYSTEM]
        assert "the user is on call" in out.requests[0].system[-1].text
        assert end.status is RunStatus.COMPLETED
        return
    # exit 2 blocks; every failure blocks too (on_error defaults to block): the model is never
    # called and the prompt leaves the active path.
    assert out.requests == [] and end.status is RunStatus.FAILED and out.ending.withdraw
    assert end.error is not None and end.error.code == "prompt_blocked"


def _stop(case: str, out: Outcome) -> None:
    end = out.ending.end
    prevented = out.events(EventType.STOP_HOOK_PREVENTED)
    if case in ("decision", "exit_2"):  # the loop goes on, bounded by max_turns
        assert (end.status, end.end_reason, end.turns) == (
            RunStatus.COMPLETED,
            EndReason.MAX_TURNS,
            3,
        )
        assert [p["count"] for p in prevented] == [1, 2, 3]
        notes = [n for n in out.store.nodes if n.node_type is NodeType.SYSTEM_NOTE]
        assert len(notes) == 3 and all(n.role is Role.USER for n in notes)
        reason = "run the tests first" if case == "decision" else "blocked by rule 7"
        assert reason in _text(notes[0])
    else:  # a failing Stop hook lets the run end (on_error defaults to continue)
        assert (end.end_reason, end.turns, prevented) == (EndReason.COMPLETED, 1, [])


def _notification(case: str, out: Outcome) -> None:
    # Nothing a notification's hook answers changes the run.
    end = out.ending.end
    assert (end.status, end.end_reason, end.turns) == (RunStatus.COMPLETED, EndReason.COMPLETED, 1)
    assert out.ending.text == "done 1"


CHECKS = {
    "PreToolUse": _pre_tool_use,
    "PostToolUse": lambda case, out: _post_tool(case, out, failed=False),
    "PostToolUseFailure": lambda case, out: _post_tool(case, out, failed=True),
    "UserPromptSubmit": _user_prompt_submit,
    "Stop": _stop,
    "SessionStart": _notification,
    "SubagentStop": _notification,
    "PreCompact": _notification,
    "RunEnd": _notification,
}
