"""Plug-in tools and providers: entry points of an installed package and factories named in
config.toml are picked up; a bad plug-in is reported by name and skipped; built-ins keep their
names."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_core.config import Settings, load_settings
from agent_core.errors import ConfigError
from agent_core.plugins import install_plugins, load_plugins, plugin_provider_keys
from agent_core.provider import ProviderRegistry, ProviderSettings, check_provider_key
from agent_core.tools import ToolRegistry
from agent_core.types.enums import Role
from agent_core.types.protocol import (
    ModelMessage,
    ModelRequest,
    TextBlock,
    ToolCallEndEvent,
)
from tests.fakes.plugin_package import MODULE, PROVIDER_KEY, TOOL_NAME, install_plugin_package


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The plug-in package installed in a site folder on ``sys.path``."""
    folder = install_plugin_package(tmp_path / "site")
    monkeypatch.syspath_prepend(str(folder))
    yield folder
    for name in [m for m in sys.modules if m == MODULE]:
        del sys.modules[name]


def settings(home: Path, **plugins: Any) -> Settings:
    return Settings.model_validate({"home": str(home), "plugins": plugins})


async def test_an_installed_packages_entry_points_are_used_and_bad_ones_named(
    site: Path, tmp_path: Path
) -> None:
    loaded = load_plugins(settings(tmp_path))
    assert [(plugin, tool.name) for plugin, tool in loaded.tools] == [("demo", TOOL_NAME)]
    assert list(loaded.providers) == [PROVIDER_KEY]
    reasons = {p.name: p.reason for p in loaded.problems}
    assert sorted(reasons) == ["missing", "raising", "wrong"]
    assert reasons["missing"].startswith("ModuleNotFoundError")
    assert "this plug-in cannot start" in reasons["raising"]
    assert "returned int, not a Tool" in reasons["wrong"]
    assert all("Traceback" not in r for r in reasons.values())

    providers, tools = ProviderRegistry(), ToolRegistry()
    problems = install_plugins(loaded, providers, tools)
    assert sorted(p.name for p in problems) == ["missing", "raising", "wrong"]
    assert tools.names() == [TOOL_NAME] and PROVIDER_KEY in providers
    # The plug-in provider is a working adapter: it asks for the plug-in tool.
    adapter = providers.create(ProviderSettings(provider=PROVIDER_KEY))
    request = ModelRequest(
        model="m", messages=[ModelMessage(role=Role.USER, content=[TextBlock(text="hi")])]
    )
    calls = [e async for e in adapter.stream(request) if isinstance(e, ToolCallEndEvent)]
    assert [c.name for c in calls] == [TOOL_NAME]


def test_entry_points_off_loads_only_what_the_config_names(site: Path, tmp_path: Path) -> None:
    assert load_plugins(settings(tmp_path, entry_points=False)).tools == []
    loaded = load_plugins(
        settings(
            tmp_path,
            entry_points=False,
            tools=[f"{MODULE}:tools"],
            providers={"mine": f"{MODULE}:provider"},
        )
    )
    assert [t.name for _, t in loaded.tools] == [TOOL_NAME]
    assert list(loaded.providers) == ["mine"] and loaded.problems == []


def test_a_plugin_never_takes_a_builtin_name(site: Path, tmp_path: Path) -> None:
    chosen = settings(
        tmp_path,
        entry_points=False,
        tools=[f"{MODULE}:tools"],
        providers={"openai": f"{MODULE}:provider"},
    )
    builtin = load_plugins(chosen).tools[0][1]  # stands in for a built-in of the same name
    providers, tools = ProviderRegistry(), ToolRegistry([builtin])
    problems = install_plugins(load_plugins(chosen), providers, tools)
    assert sorted((p.name, p.reason) for p in problems) == [
        ("openai", "a provider has this key"),
        (f"{MODULE}:tools", f"a tool named {TOOL_NAME!r} exists"),
    ]
    assert tools.get(TOOL_NAME) is builtin, "the built-in kept its name"


def test_bad_plugin_settings_are_refused_with_the_key(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[plugins]\ntools = ["no colon here"]\nproviders = {"Bad Key" = "a:b"}\n')
    with pytest.raises(ConfigError) as info:
        load_settings(env={"SOONG_AGENT_HOME": str(tmp_path)}, config_file=config)
    text = str(info.value.message)
    assert "plugins.tools" in text and "plugins.providers" in text


def test_plugin_provider_keys_are_known_at_start_up_without_importing(tmp_path: Path) -> None:
    chosen = settings(
        tmp_path, entry_points=False, providers={"later": "soong_not_installed_yet:factory"}
    )
    keys = plugin_provider_keys(chosen)
    assert keys == {"later"} and "soong_not_installed_yet" not in sys.modules
    check_provider_key("later", keys)  # the stack's start-up check accepts it
    with pytest.raises(ConfigError) as info:
        check_provider_key("nobody", keys)
    assert info.value.code == "unknown_provider"
