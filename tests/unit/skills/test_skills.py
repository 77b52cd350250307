"""Skills: scanning and its problems, precedence, progressive disclosure, invocation, narrowing."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from agent_core.config import load_settings
from agent_core.context import ContextBuilder
from agent_core.errors import ConfigError, ToolError
from agent_core.skills import (
    LoadSkillTool,
    RunSkills,
    SkillCatalog,
    SkillFolder,
    SkillProblemCode,
    SkillSource,
    read_skill_file,
    scan_skills,
    skill_context_nodes,
)
from agent_core.skills.tool import LoadSkillArgs
from agent_core.tools import ToolContext, Workspace
from agent_core.types.enums import NodeType, Role
from agent_core.types.protocol import TextBlock, ToolCall, ToolDefinition, ToolResult
from agent_core.types.runtime import AgentConfig, Node, RunHandle
from services.run_worker.skills_link import SkillLink

AGENT = "agent_aaaaaaaaaaaaaaaa"
SESSION = "sess_20260101_000000_abcd"
RUN = "run_aaaaaaaaaaaaaaaa"
HANDLE = RunHandle(run_id=RUN, session_id=SESSION, agent_id=AGENT, attempt=1)
CONFIG = AgentConfig(provider="p", model="m", system_prompt="You are helpful.")
SECRET_BODY = "Always answer in haiku. BODY-MARKER-7f3a"


def _skill(root: Path, name: str, front: str, body: str = SECRET_BODY) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\n{front}\n---\n{body}\n")
    return folder


def _good(root: Path, name: str, description: str = "Write poems.", extra: str = "") -> Path:
    return _skill(root, name, f"name: {name}\ndescription: {description}\n{extra}")


def _msg(i: int, role: Role, text: str) -> Node:
    return Node(
        node_id=f"node_{i:016x}", agent_id=AGENT, run_id=RUN, role=role,
        content=[TextBlock(text=text)],
    )  # fmt: skip


def _ctx(tmp_path: Path) -> ToolContext:
    ws = Workspace(tmp_path / "home", "acct", SESSION)
    return ToolContext(workspace=ws, tool_call_id="call_1", session_id=SESSION, run_id=RUN,
                       agent_id=AGENT)  # fmt: skip


def test_broken_frontmatter_is_reported_and_skips_only_that_skill(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "skills"
    _good(root, "poems")
    _skill(root, "bad-yaml", "name: bad-yaml\ndescription: [unclosed")
    _skill(root, "no-desc", "name: no-desc")
    _skill(root, "wrong-type", "name: wrong-type\ndescription: x\nallowed_tools: 42")
    _skill(root, "wrong-bool", "name: wrong-bool\ndescription: x\nmodel_invocable: maybe")
    _skill(root, "huge", "name: huge\ndescription: x", body="x" * 70_000)
    _skill(root, "other-name", "name: not-the-folder\ndescription: x")
    (root / "plain").mkdir()
    (root / "plain" / "SKILL.md").write_text("no frontmatter here\n")
    _good(root, "Bad.Name")
    (root / "not-a-skill").mkdir()  # no SKILL.md: not a skill, not a problem
    with caplog.at_level(logging.WARNING, logger="soong.skills"):
        catalog = scan_skills([SkillFolder(SkillSource.USER, root)])
    assert list(catalog.skills) == ["poems"]
    problems = {p.path: p for p in catalog.problems}
    assert {path: p.code for path, p in problems.items()} == {
        "bad-yaml/SKILL.md": SkillProblemCode.INVALID_YAML,
        "no-desc/SKILL.md": SkillProblemCode.MISSING_FIELD,
        "wrong-type/SKILL.md": SkillProblemCode.INVALID_FIELD,
        "wrong-bool/SKILL.md": SkillProblemCode.INVALID_FIELD,
        "huge/SKILL.md": SkillProblemCode.TOO_LARGE,
        "other-name/SKILL.md": SkillProblemCode.NAME_MISMATCH,
        "plain/SKILL.md": SkillProblemCode.NO_FRONTMATTER,
        "Bad.Name/SKILL.md": SkillProblemCode.INVALID_NAME,
    }
    assert "line" in problems["bad-yaml/SKILL.md"].reason  # says where
    assert "'description'" in problems["no-desc/SKILL.md"].reason
    assert all(p.source is SkillSource.USER and p.reason for p in catalog.problems)
    logged = caplog.text
    assert "bad-yaml/SKILL.md" in logged and "invalid_yaml" in logged
    # The API's view carries both the skill in effect and every problem.
    view = catalog.view()
    assert [s.name for s in view.items] == ["poems"] and len(view.problems) == 8
    # A scan again (nothing changed) gives the same answer and logs nothing new.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="soong.skills"):
        again = scan_skills([SkillFolder(SkillSource.USER, root)])
    assert list(again.skills) == ["poems"] and len(again.problems) == 8
    assert "bad-yaml" not in caplog.text


def test_frontmatter_fields_and_their_common_spellings(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    _good(root, "a", extra="allowed_tools: [read_file, grep]\nmodel_invocable: false")
    _good(root, "b", extra="allowed-tools: read_file, glob\ndisable-model-invocation: true")
    _good(root, "c", extra="license: MIT\nversion: 2")  # unknown keys are ignored
    _good(root, "d", extra="model_invocable: true\ndisable-model-invocation: true")
    catalog = scan_skills([SkillFolder(SkillSource.PROJECT, root)])
    a, b, c = catalog.skills["a"], catalog.skills["b"], catalog.skills["c"]
    assert (a.allowed_tools, a.model_invocable) == (("read_file", "grep"), False)
    assert (b.allowed_tools, b.model_invocable) == (("read_file", "glob"), False)
    assert (c.allowed_tools, c.model_invocable, c.body) == (None, True, SECRET_BODY)
    assert [p.path for p in catalog.problems] == ["d/SKILL.md"]  # contradictory


def test_precedence_operator_then_user_then_project(tmp_path: Path) -> None:
    op, user, proj = tmp_path / "op", tmp_path / "user", tmp_path / "proj"
    _good(op, "shared", "operator's")
    _good(user, "shared", "user's")
    _good(proj, "shared", "project's")
    _good(proj, "local", "project only")
    catalog = scan_skills(
        [
            SkillFolder(SkillSource.OPERATOR, op),
            SkillFolder(SkillSource.USER, user),
            SkillFolder(SkillSource.PROJECT, proj),
        ]
    )
    assert catalog.skills["shared"].description == "operator's"
    assert catalog.skills["local"].source is SkillSource.PROJECT
    shadowed = [(p.source, p.code) for p in catalog.problems]
    assert shadowed == [
        (SkillSource.USER, SkillProblemCode.SHADOWED),
        (SkillSource.PROJECT, SkillProblemCode.SHADOWED),
    ]
    assert list(catalog.enabled(["local"]).skills) == ["local"]


def test_linked_skill_folders_are_refused(tmp_path: Path) -> None:
    outside = _good(tmp_path / "elsewhere", "evil")
    root = tmp_path / "proj"
    root.mkdir()
    os.symlink(outside, root / "evil")
    catalog = scan_skills([SkillFolder(SkillSource.PROJECT, root)])
    assert not catalog.skills
    assert [(p.path, p.code) for p in catalog.problems] == [
        ("evil/SKILL.md", SkillProblemCode.UNREADABLE)
    ]


def test_only_names_and_descriptions_reach_the_context_until_a_skill_is_loaded(
    tmp_path: Path,
) -> None:
    root = tmp_path / "skills"
    _good(root, "poems", "Write poems on request.")
    _good(root, "hidden", "Only the user invokes this.", extra="model_invocable: false")
    skills = RunSkills(scan_skills([SkillFolder(SkillSource.USER, root)]))
    builder = ContextBuilder(skills=skills.listing)
    path = [_msg(1, Role.USER, "a poem please")]
    request, report = builder.build(path, session_id=SESSION, config=CONFIG)
    system = "\n".join(b.text for b in request.system)
    assert report.skills_listed == ["poems"] and report.skills_loaded == []
    assert "poems: Write poems on request." in system
    assert "BODY-MARKER" not in system and "hidden" not in system
    assert not any(i.node_type is NodeType.SKILL_CONTEXT for i in report.injected)

    # The model loads it: the tool's result asks for a skill_context node with the body.
    output = _run(LoadSkillTool(skills), "poems", tmp_path)
    assert not output.is_error and skills.loaded == ["poems"]
    result = ToolResult(tool_call_id="call_1", content=[TextBlock(text=output.text)],
                        metadata=output.metadata)  # fmt: skip
    [(kind, blocks, meta)] = skill_context_nodes([result])
    assert kind is NodeType.SKILL_CONTEXT
    node = Node(node_id="node_00000000000000ff", agent_id=AGENT, run_id=RUN, role=Role.SYSTEM,
                node_type=NodeType.SKILL_CONTEXT, content=blocks, metadata=meta)  # fmt: skip
    request, report = builder.build([*path, node], session_id=SESSION, config=CONFIG)
    system = "\n".join(b.text for b in request.system)
    assert report.skills_loaded == ["poems"] and report.skills_listed == ["poems"]
    assert SECRET_BODY in system
    injected = [i for i in report.injected if i.node_type is NodeType.SKILL_CONTEXT]
    assert [i.source for i in injected] == ["skill:poems"]
    # Loading it again adds no second node.
    again = _run(LoadSkillTool(skills), "poems", tmp_path)
    assert "skill_context" not in again.metadata


def _run(tool: LoadSkillTool, name: str, tmp_path: Path, file: str | None = None) -> Any:
    import asyncio

    return asyncio.run(tool.run(LoadSkillArgs(name=name, file=file), _ctx(tmp_path)))


def test_slash_invocation_works_with_model_invocation_off_and_load_skill_refuses(
    tmp_path: Path,
) -> None:
    root = tmp_path / "home" / "accounts" / "acct" / "skills"
    folder = _good(root, "deploy", "Deploy the service.", extra="model_invocable: false")
    (folder / "checklist.md").write_text("1. tag\n2. push\n")
    settings = load_settings(env={"SOONG_AGENT_HOME": str(tmp_path / "home")},
                             config_file=tmp_path / "none.toml")  # fmt: skip
    settings = settings.model_copy(update={"memory": settings.memory.model_copy(
        update={"enabled": False})})  # fmt: skip
    link = SkillLink(SimpleNamespace(settings=settings))  # type: ignore[arg-type]
    run = SimpleNamespace(account_id="acct", session_id=SESSION, run_id=RUN, config_overrides={})
    message = _msg(1, Role.USER, "/deploy to staging now")
    skills = link.run_skills(run, "workspace", [message], CONFIG)  # type: ignore[arg-type]
    assert skills is not None and skills.listing is None  # nothing the model may load

    # The model cannot load it ...
    with pytest.raises(ToolError) as refused:
        _run(LoadSkillTool(skills), "deploy", tmp_path)
    assert refused.value.code == "skill_not_model_invocable"
    assert skills.loaded == []

    # ... the user can: `/deploy` brings the body in as a skill_context node.
    import asyncio

    nodes = asyncio.run(link.first_nodes(run, HANDLE, [message], skills, ""))  # type: ignore[arg-type]
    [node] = nodes
    assert node.node_type is NodeType.SKILL_CONTEXT and node.role is Role.SYSTEM
    assert node.metadata["skill"] == "deploy" and node.metadata["invoked_by"] == "user"
    text = node.content[0].text  # type: ignore[union-attr]
    assert SECRET_BODY in text and "checklist.md" in text
    assert skills.loaded == ["deploy"]
    _, report = ContextBuilder(skills=skills.listing).build(
        [message, node], session_id=SESSION, config=CONFIG
    )
    assert report.skills_loaded == ["deploy"] and report.skills_listed == []
    # Once invoked, its files may be read (and only its own).
    assert _run(LoadSkillTool(skills), "deploy", tmp_path, "checklist.md").text.startswith("1. tag")

    # An unknown /name is said, not silently dropped.
    other = asyncio.run(link.first_nodes(
        run, HANDLE, [_msg(2, Role.USER, "/nope hi")], skills, ""))  # type: ignore[arg-type]  # fmt: skip
    assert [n.node_type for n in other] == [NodeType.SYSTEM_NOTE]
    assert "no skill called 'nope'" in other[0].content[0].text  # type: ignore[union-attr]


def test_allowed_tools_narrow_the_offer_while_the_skill_is_active(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    _good(root, "reader", extra="allowed_tools: [read_file]")
    _good(root, "free")
    skills = RunSkills(scan_skills([SkillFolder(SkillSource.USER, root)]))
    defs = [ToolDefinition(name=n) for n in ("read_file", "write_file", "load_skill")]
    assert skills.narrow(defs) == defs
    skills.activate("free")  # declares no list: narrows nothing
    assert skills.narrow(defs) == defs
    skills.activate("reader")
    assert [d.name for d in skills.narrow(defs)] == ["read_file", "load_skill"]
    refused = skills.refusal(ToolCall(id="c1", name="write_file", arguments={}))
    assert refused is not None and refused.is_error
    assert refused.metadata["error_code"] == "tool_not_allowed_by_skill"
    assert skills.refusal(ToolCall(id="c2", name="read_file", arguments={})) is None
    # A recovered attempt finds what its run loaded on its path.
    assert RunSkills(skills.catalog, ["reader", "gone"]).loaded == ["reader"]


def test_skill_files_are_read_only_inside_the_skill_folder(tmp_path: Path) -> None:
    folder = _good(tmp_path / "skills", "docs")
    (folder / "ref").mkdir()
    (folder / "ref" / "a.md").write_text("inside")
    (tmp_path / "secret.txt").write_text("outside")
    os.symlink(tmp_path / "secret.txt", folder / "leak.md")
    assert read_skill_file(folder, "ref/a.md") == "inside"
    for bad in ("../secret.txt", "/etc/passwd", "ref/../../secret.txt", "leak.md", "", "a\x00b"):
        with pytest.raises(ToolError):
            read_skill_file(folder, bad)
    (folder / "big.md").write_bytes(b"x" * (256 * 1024 + 1))
    with pytest.raises(ToolError) as big:
        read_skill_file(folder, "big.md")
    assert big.value.code == "file_too_large"


def test_skills_config_section(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[skills]\ndirs = ["/srv/skills"]\n')
    settings = load_settings(env={"SOONG_AGENT_HOME": str(tmp_path)}, config_file=config)
    assert settings.skills.dirs == (Path("/srv/skills"),) and settings.skills.enabled
    config.write_text('[skills]\ndirs = ["relative/skills"]\n')
    with pytest.raises(ConfigError) as bad:
        load_settings(env={"SOONG_AGENT_HOME": str(tmp_path)}, config_file=config)
    assert "skills.dirs" in bad.value.message
    assert SkillCatalog().view().items == []


def test_a_loaded_skill_brings_its_memory_into_the_run(tmp_path: Path) -> None:
    import asyncio

    _good(tmp_path / "skills", "poems")
    asked: list[list[str]] = []

    async def render(skills: Any) -> str:
        asked.append(list(skills))
        return "# memory\n- user line\n" + ("- poem line\n" if "poems" in skills else "")

    skills = RunSkills(
        scan_skills([SkillFolder(SkillSource.USER, tmp_path / "skills")]),
        render_memory=render,
        named=["excel"],
    )
    skills.memory = "# memory\n- user line\n"  # what the run started with
    output = _run(LoadSkillTool(skills), "poems", tmp_path)
    assert asked == [["excel", "poems"]]  # named skills first, then the loaded ones
    result = ToolResult(tool_call_id="call_1", content=[TextBlock(text=output.text)],
                        metadata=output.metadata)  # fmt: skip
    nodes = skill_context_nodes([result])
    assert [k for k, _, _ in nodes] == [NodeType.SKILL_CONTEXT, NodeType.MEMORY_CONTEXT]
    assert "- poem line" in nodes[1][1][0].text  # type: ignore[union-attr]
    # Nothing new to say: no second memory node.
    assert asyncio.run(skills.memory_after_load()) == ""
