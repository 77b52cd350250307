"""Hook configuration: ``[hooks]`` in config.toml is accepted, bad entries are refused with an
error that names the entry, and a project's ``hooks.toml`` is read only under a trusted root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_core.config import load_settings
from agent_core.errors import ConfigError
from agent_core.hooks import HooksInEffect, HooksSettings
from services.run_worker.hook_setup import HookSetup

GOOD = """
[hooks]
trusted_project_roots = ["/srv/projects"]

[[hooks.PreToolUse]]
name = "guard"
matcher = "write_file|run_*"
command = ["/opt/hooks/guard", "--strict"]
timeout_s = 5
agents = ["main", "sub"]

[[hooks.Stop]]
command = "exit 0"
shell = true
"""


def _load(tmp_path: Path, text: str) -> HooksSettings:
    (tmp_path / "config.toml").write_text(text)
    return load_settings(env={"SOONG_AGENT_HOME": str(tmp_path)}).hooks


def test_the_hooks_section_is_accepted(tmp_path: Path) -> None:
    hooks = HooksInEffect(_load(tmp_path, GOOD)).operator
    assert [(h.name, h.event, h.on_error) for h in hooks] == [
        ("guard", "PreToolUse", "block"),
        ("operator:Stop[0]", "Stop", "continue"),
    ]
    assert hooks[0].matches("run_python", "main") and not hooks[0].matches("read_file", "main")
    assert not hooks[0].matches("write_file", "fork")


def test_agents_take_the_agents_api_word_and_the_old_one_as_an_alias(tmp_path: Path) -> None:
    # ``sub`` is what GET /v1/sessions/{id}/agents calls a worker; ``worker`` (deprecated) reads
    # as the same kind, so a config written before the rename keeps its meaning.
    for word in ("sub", "worker"):
        entry = f'[[hooks.PreToolUse]]\ncommand = ["x"]\nagents = ["{word}", "fork"]\n'
        (hook,) = HooksInEffect(_load(tmp_path, entry)).operator
        assert hook.spec.agents == ("sub", "fork")
        assert hook.matches("echo", "sub") and not hook.matches("echo", "main")


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ('[[hooks.PreToolUse]]\ncommand = "rm -rf /"\n', "shell = true"),
        ("[[hooks.PreToolUse]]\ncommand = []\n", "empty argv"),
        ('[[hooks.PreToolUse]]\ncommand = ["x"]\nshell = true\n', "not an argv list"),
        ('[[hooks.PreToolUse]]\ncommand = ["x"]\nmatcher = "a.*(b)"\n', "matcher"),
        ('[[hooks.Stop]]\ncommand = ["x"]\nmatcher = "echo"\n', "tool events only"),
        ('[[hooks.PreToolUse]]\ncommand = ["x"]\non_error = "maybe"\n', "on_error"),
        ('[[hooks.PreToolUse]]\ncommand = ["x"]\ntimeout_s = 0\n', "timeout_s"),
        ('[[hooks.PreToolUse]]\ncommand = ["x"]\nagents = ["robot"]\n', "agents"),
        ('[[hooks.PreToolUse]]\ncommand = ["x"]\ntimeout = 5\n', "unknown key"),
        ('[[hooks.PreToolUze]]\ncommand = ["x"]\n', "did you mean hooks.PreToolUse"),
        ('[hooks]\ntrusted_project_roots = ["relative/dir"]\n', "not an absolute path"),
    ],
)
def test_bad_entries_are_refused_clearly(tmp_path: Path, entry: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, entry)
    assert info.value.code == "config_invalid"
    assert words in info.value.message and info.value.details["key"].startswith("hooks")
    assert str(tmp_path / "config.toml") in info.value.message


def _project(root: Path, name: str, text: str) -> Path:
    project = root / name
    (project / ".soong-agent").mkdir(parents=True)
    (project / ".soong-agent" / "hooks.toml").write_text(text)
    return project


ENTRY = '[[PreToolUse]]\nname = "project-guard"\ncommand = ["/bin/true"]\n'


def test_project_files_are_read_only_under_trusted_roots(tmp_path: Path) -> None:
    trusted, other = tmp_path / "trusted", tmp_path / "other"
    inside = _project(trusted, "repo", ENTRY)
    outside = _project(other, "repo", ENTRY)
    effective = HooksInEffect(HooksSettings(trusted_project_roots=(trusted,)))
    assert [h.name for h in effective.for_project(inside).hooks] == ["project-guard"]
    assert effective.for_project(inside).hooks[0].source == "project"
    assert effective.for_project(outside).hooks == ()
    # A link inside the trusted root that leads out of it is followed first, then judged.
    (trusted / "escape").symlink_to(outside)
    assert effective.for_project(trusted / "escape").hooks == ()
    # Nor a hooks file that is a link to a file outside the trusted roots.
    linked = trusted / "linked"
    (linked / ".soong-agent").mkdir(parents=True)
    (linked / ".soong-agent" / "hooks.toml").symlink_to(outside / ".soong-agent" / "hooks.toml")
    assert effective.for_project(linked).hooks == ()
    # No trusted root (the default): no project file is ever read.
    assert HooksInEffect(HooksSettings()).for_project(inside).hooks == ()


def test_a_session_in_its_own_workspace_never_reads_a_file(tmp_path: Path) -> None:
    # Agents write into their workspace: a hooks file there must never count, even when the
    # operator (wrongly) trusts the whole data home.
    workspace = _project(tmp_path, "ws", ENTRY)
    (tmp_path / "config.toml").write_text(f'[hooks]\ntrusted_project_roots = ["{tmp_path}"]\n')
    setup = HookSetup(load_settings(env={"SOONG_AGENT_HOME": str(tmp_path)}), os.environ)
    assert setup.in_effect("workspace", str(workspace)).hooks == ()
    assert [h.name for h in setup.in_effect("data/ws", str(workspace)).hooks] == ["project-guard"]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[[PreToolUse]\n", "not valid TOML"),
        ('[[PreToolUse]]\ncommand = ["x"]\nshel = true\n', "unknown key"),
        ('[hooks]\ntrusted_project_roots = ["/"]\n', "hooks: unknown key"),
    ],
)
def test_a_broken_project_file_is_an_error_naming_it(tmp_path: Path, text: str, words: str) -> None:
    project = _project(tmp_path, "repo", text)
    effective = HooksInEffect(HooksSettings(trusted_project_roots=(tmp_path,)))
    with pytest.raises(ConfigError) as info:
        effective.for_project(project)
    assert info.value.code == "invalid_hooks"
    assert words in info.value.message and "hooks.toml" in info.value.message


def test_project_hooks_run_after_the_operators(tmp_path: Path) -> None:
    project = _project(tmp_path, "repo", ENTRY)
    settings = _load(
        tmp_path, f'[hooks]\ntrusted_project_roots = ["{tmp_path}"]\n' + GOOD.split("\n", 3)[3]
    )
    names = [h.name for h in HooksInEffect(settings).for_project(project).hooks]
    assert names == ["guard", "operator:Stop[0]", "project-guard"]
