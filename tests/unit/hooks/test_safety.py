"""Shell metacharacters in a hook's command or in its input never run a command nobody meant:
a hook's argv goes to ``exec`` as it is, its input only ever travels on stdin as JSON, and a
command string runs through a shell only when its config says ``shell = true``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent_core.errors import ConfigError
from agent_core.hooks import HookSpec, run_hook
from agent_core.hooks.runner import HookRun
from agent_core.types.protocol import HookInput
from tests.unit.hooks.rig import run_agent, script, toml_str

METAS = ("; touch {m}", "$(touch {m})", "`touch {m}`", "&& touch {m}", "| touch {m}", "\ntouch {m}")


def _payloads(marker: Path) -> list[str]:
    return [m.format(m=marker) for m in METAS]


async def test_argv_metacharacters_are_arguments_not_commands(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    record = script(tmp_path, "args.sh", 'for a in "$@"; do printf "%s\\0" "$a"; done > "$0.args"')
    args = _payloads(marker)
    run = await run_hook([str(record), *args], b"{}", timeout_s=5, env=dict(os.environ))
    assert run.outcome == "ok"
    received = (tmp_path / "args.sh.args").read_text().split("\0")[:-1]
    assert received == args  # each arrived as one literal argument
    assert not marker.exists()


async def test_a_binary_path_with_metacharacters_is_not_split(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    run = await run_hook([f"/bin/true; touch {marker}"], b"{}", timeout_s=5, env=dict(os.environ))
    assert run.outcome == "not_started"
    assert not marker.exists()


@pytest.mark.parametrize("meta", METAS)
async def test_input_with_metacharacters_stays_data(tmp_path: Path, meta: str) -> None:
    # The prompt, the tool's arguments and its result all carry the metacharacters; the hooks —
    # an argv one and a shell one — only read them from stdin.
    marker = tmp_path / "marker"
    text = meta.format(m=marker)
    reader = script(tmp_path, "reader.sh", 'cat > "$0.in"')
    config = (
        "\n".join(
            f"[[hooks.{event}]]\ncommand = [{toml_str(str(reader))}]\n"
            for event in ("UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop")
        )
        + f"\n[[hooks.PostToolUse]]\nshell = true\ncommand = {toml_str('cat > /dev/null')}\n"
    )
    out = await run_agent(tmp_path, config, "main", tool="echo", prompt=text)
    assert len(out.records) == 5 and all(r["decision"] == "allow" for r in out.records)
    last_input = json.loads((tmp_path / "reader.sh.in").read_text())
    assert last_input["phase"] == "stop"
    assert not marker.exists()


async def test_a_rewrite_with_metacharacters_reaches_the_tool_as_text(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    text = f"$(touch {marker}); touch {marker}"
    answer = json.dumps({"updated_arguments": {"text": text}})
    (tmp_path / "answer.json").write_text(answer)  # the test's own script must not expand it
    rewriter = script(tmp_path, "rewrite.sh", f"cat > /dev/null\ncat {tmp_path}/answer.json")
    config = f"[[hooks.PreToolUse]]\ncommand = [{toml_str(str(rewriter))}]\n"
    out = await run_agent(tmp_path, config, "sub", tool="echo")
    assert out.echo.ran == [text]
    assert out.records[0]["decision"] == "rewrite"
    assert not marker.exists()


def test_a_command_string_needs_shell_true() -> None:
    with pytest.raises(ValueError, match="shell = true"):
        HookSpec(command="/bin/true; touch /tmp/x")
    spec = HookSpec(command="echo hi", shell=True)
    assert spec.argv() == ("/bin/sh", "-c", "echo hi")
    assert HookSpec(command=("/bin/echo", "a; b")).argv() == ("/bin/echo", "a; b")


async def test_shell_true_runs_exactly_the_configured_string(tmp_path: Path) -> None:
    # The one place a shell runs: the operator's own string, with the input still on stdin.
    marker = tmp_path / "marker"
    spec = HookSpec(command=f'cat > {tmp_path}/in.json; echo "$1" > {tmp_path}/arg', shell=True)
    payload = HookInput(phase="stop", session_id="s", prompt=f"; touch {marker}")  # type: ignore[arg-type]
    run: HookRun = await run_hook(
        spec.argv(), payload.model_dump_json().encode(), timeout_s=5, env=dict(os.environ)
    )
    assert run.outcome == "ok"
    assert json.loads((tmp_path / "in.json").read_text())["prompt"] == f"; touch {marker}"
    assert not marker.exists()


async def test_a_project_file_cannot_smuggle_a_shell_string(tmp_path: Path) -> None:
    from agent_core.hooks import HooksInEffect, HooksSettings

    project = tmp_path / "proj"
    (project / ".soong-agent").mkdir(parents=True)
    (project / ".soong-agent" / "hooks.toml").write_text(
        '[[PreToolUse]]\ncommand = "true; touch marker"\n'
    )
    effective = HooksInEffect(HooksSettings(trusted_project_roots=(tmp_path,)))
    with pytest.raises(ConfigError, match="shell = true"):
        effective.for_project(project)
