"""A small plug-in package, installed the way an installer leaves one: the package's module
and its ``.dist-info`` (METADATA, entry_points.txt, RECORD) in a site folder. Whatever has that
folder on its path (``sys.path``, or ``PYTHONPATH`` for a service process) finds the entry points
through ``importlib.metadata``, exactly as for a package pip or uv installed. Written by hand
because tests never reach a package index, and a build backend would have to come from one."""

from __future__ import annotations

from pathlib import Path

MODULE = "soong_demo_plugin"
PROVIDER_KEY = "demo-plugin-model"
TOOL_NAME = "shout"
MARKER = "SHOUTED-BY-PLUGIN"
ANSWER = "the plug-in model answered"

_SOURCE = f'''
"""A plug-in for soong-agent: one tool and one provider (the scripted model)."""

from agent_core.runtime import ScriptedModel, tool_then_answer
from agent_core.tools import Tool, ToolArgs, ToolOutput


class ShoutArgs(ToolArgs):
    q: str


class Shout(Tool[ShoutArgs]):
    name = "{TOOL_NAME}"
    description = "Upper-cases its input."
    input_model = ShoutArgs
    repeatable = True

    async def run(self, args, ctx):
        return ToolOutput(text="{MARKER}:" + args.q.upper())


def tools():
    return [Shout()]


def provider(settings):
    return ScriptedModel(tool_then_answer("{TOOL_NAME}", answer="{ANSWER}"))


def raising_tools():
    raise RuntimeError("this plug-in cannot start")


def not_a_tool():
    return 42
'''

ENTRY_POINTS = f"""[soong_agent.tools]
demo = {MODULE}:tools
missing = soong_no_such_plugin:tools
raising = {MODULE}:raising_tools
wrong = {MODULE}:not_a_tool

[soong_agent.providers]
{PROVIDER_KEY} = {MODULE}:provider
"""


def install_plugin_package(site: Path) -> Path:
    """Install the package into ``site`` (created); return ``site``."""
    package = site / MODULE
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(_SOURCE, encoding="utf-8")
    info = site / f"{MODULE}-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: soong-demo-plugin\nVersion: 0.1.0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(ENTRY_POINTS, encoding="utf-8")
    (info / "INSTALLER").write_text("tests\n", encoding="utf-8")
    (info / "RECORD").write_text(
        f"{MODULE}/__init__.py,,\n{info.name}/METADATA,,\n{info.name}/entry_points.txt,,\n"
        f"{info.name}/INSTALLER,,\n{info.name}/RECORD,,\n",
        encoding="utf-8",
    )
    return site
