"""Plug-in tools and providers: installed packages' entry points and factories named in config.

Two entry-point groups, one per kind:

- ``soong_agent.tools``: the object is a callable taking no argument (a ``Tool`` subclass
  counts) that returns a :class:`~agent_core.tools.base.Tool` or an iterable of them.
- ``soong_agent.providers``: the entry point's *name* is the provider key (``model.provider``),
  its object a :data:`~agent_core.provider.ProviderFactory` (settings → adapter).

config.toml's ``[plugins]`` names factories the same way (``tools = ["pkg.mod:factory"]``,
``providers = {key = "pkg.mod:factory"}``) and can turn entry-point discovery off
(``entry_points = false``). Plug-ins run inside the run-worker with its rights: installing one is
the operator's decision, like installing the runtime itself.

Contract: a plug-in that cannot be imported, raises, returns the wrong thing, or takes a name a
built-in already has is reported by name (a :class:`PluginProblem`, logged once) and skipped; it
never takes the service down. Built-ins always win a name collision.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from agent_core.config import Settings
from agent_core.provider import ProviderFactory, ProviderRegistry
from agent_core.tools import Tool, ToolRegistry

__all__ = [
    "PROVIDER_GROUP",
    "TOOL_GROUP",
    "LoadedPlugins",
    "PluginProblem",
    "install_plugins",
    "load_plugins",
    "plugin_provider_keys",
]

TOOL_GROUP = "soong_agent.tools"
PROVIDER_GROUP = "soong_agent.providers"

# What every provider accepts as a tool name (OpenAI's rule is the narrowest).
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PluginProblem:
    """One plug-in that was skipped: its name, where it came from and why (no traceback)."""

    name: str
    source: str  # "entry point soong_agent.tools" or "config plugins.tools"
    reason: str


@dataclass
class LoadedPlugins:
    """What loading found: tools and provider factories ready to register, and the skipped."""

    tools: list[tuple[str, Tool[Any]]] = field(default_factory=list)  # (plug-in name, tool)
    providers: dict[str, ProviderFactory] = field(default_factory=dict)
    problems: list[PluginProblem] = field(default_factory=list)


def _entry_points(settings: Settings, group: str) -> list[tuple[EntryPoint, str]]:
    """The group's entry points (installed ones if enabled, then the config's), with a source."""
    found: list[tuple[EntryPoint, str]] = []
    if settings.plugins.entry_points:
        found += [(ep, f"entry point {group}") for ep in entry_points(group=group)]
    if group == TOOL_GROUP:
        named = {target: target for target in settings.plugins.tools}
        source = "config plugins.tools"
    else:
        named = dict(settings.plugins.providers)
        source = "config plugins.providers"
    found += [(EntryPoint(name, target, group), source) for name, target in named.items()]
    return found


def plugin_provider_keys(settings: Settings) -> set[str]:
    """The provider keys plug-ins offer, known without importing any of them."""
    return {ep.name for ep, _ in _entry_points(settings, PROVIDER_GROUP)}


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 300 else text[:297] + "..."


def _tools_of(made: Any) -> list[Tool[Any]]:
    """The tools a factory returned; ``TypeError`` when it returned something else."""
    if isinstance(made, Tool):
        return [made]
    if isinstance(made, Iterable) and not isinstance(made, str | bytes):
        tools = list(made)
        if tools and all(isinstance(t, Tool) for t in tools):
            return tools
    raise TypeError(f"the factory returned {type(made).__name__}, not a Tool or Tools")


def load_plugins(settings: Settings) -> LoadedPlugins:
    """Import every plug-in ``settings`` allows and call its tool factories (see the module)."""
    loaded = LoadedPlugins()
    for ep, source in _entry_points(settings, TOOL_GROUP):
        try:
            factory = ep.load()
            for tool in _tools_of(factory()):
                loaded.tools.append((ep.name, tool))
        except Exception as exc:  # a plug-in's failure is reported, never fatal
            loaded.problems.append(PluginProblem(ep.name, source, _short(exc)))
    for ep, source in _entry_points(settings, PROVIDER_GROUP):
        try:
            provider = ep.load()
            if not callable(provider):
                raise TypeError(f"{ep.value} is {type(provider).__name__}, not a factory")
        except Exception as exc:
            loaded.problems.append(PluginProblem(ep.name, source, _short(exc)))
            continue
        loaded.providers[ep.name] = provider
    return loaded


def install_plugins(
    loaded: LoadedPlugins, providers: ProviderRegistry, tools: ToolRegistry
) -> list[PluginProblem]:
    """Register what ``loaded`` holds next to the built-ins, log every problem once, and return
    all of them (loading's and registering's). A name already registered is a problem: a
    plug-in never replaces a built-in or an earlier plug-in."""
    problems = list(loaded.problems)
    added_providers: list[str] = []
    added_tools: list[str] = []
    for key, factory in loaded.providers.items():
        if key in providers:
            problems.append(PluginProblem(key, PROVIDER_GROUP, "a provider has this key"))
        else:
            providers.register_provider(key, factory)
            added_providers.append(key)
    for plugin, tool in loaded.tools:
        name = getattr(tool, "name", "")
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            problems.append(PluginProblem(plugin, TOOL_GROUP, f"unusable tool name {name!r}"))
        elif tools.get(name) is not None:
            problems.append(PluginProblem(plugin, TOOL_GROUP, f"a tool named {name!r} exists"))
        else:
            tools.register(tool)
            added_tools.append(name)
    for problem in problems:
        log.warning(
            "plug-in %r skipped (%s): %s",
            problem.name,
            problem.source,
            problem.reason,
            extra={"fields": {"plugin": problem.name, "reason": problem.reason}},
        )
    if added_providers or added_tools:
        log.info("plug-ins: providers %s, tools %s", sorted(added_providers), sorted(added_tools))
    return problems
