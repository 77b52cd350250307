"""``[tools.<name>]``: declared command tools are read, and every bad entry is refused by key."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_core.config import load_settings
from agent_core.config.schema import Settings
from agent_core.errors import ConfigError

GOOD = """
[tools.weather]
description = "Today's weather for a city"
command = ["/usr/bin/python3", "/srv/tools/weather.py"]
input_schema = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }
timeout_s = 10
writes = false

[tools.now]
description = "The time"
command = ["/usr/bin/date"]
"""


def _load(tmp_path: Path, text: str) -> Settings:
    (tmp_path / "config.toml").write_text(text)
    return load_settings(env={"SOONG_AGENT_HOME": str(tmp_path)})


def test_declared_tools_load_with_their_defaults(tmp_path: Path) -> None:
    tools = _load(tmp_path, GOOD).tools
    assert sorted(tools) == ["now", "weather"]
    weather, now = tools["weather"], tools["now"]
    assert weather.command == ("/usr/bin/python3", "/srv/tools/weather.py")
    assert weather.input_schema["required"] == ["city"] and weather.timeout_s == 10
    assert not weather.writes and now.writes and not now.repeatable
    assert now.timeout_s is None and now.input_schema == {"type": "object", "properties": {}}


@pytest.mark.parametrize(
    ("entry", "key", "says"),
    [
        ('[tools.a]\ncommand = ["x"]\n', "tools.a.description", "required"),
        ('[tools.a]\ndescription = "d"\ncommand = []\n', "tools.a.command", "at least 1"),
        ('[tools.a]\ndescription = "d"\ncommand = [" "]\n', "tools.a.command", "program"),
        ('[tools.a]\ndescription = "d"\ncommand = "x"\n', "tools.a.command", "tuple"),
        (
            '[tools.a]\ndescription = "d"\ncommand = ["x"]\ninput_schema = {type = "string"}\n',
            "tools.a",
            'type = "object"',
        ),
        (
            '[tools.a]\ndescription = "d"\ncommand = ["x"]\n'
            'input_schema = {type = "object", properties = {n = {type = "integr"}}}\n',
            "tools.a",
            "not a valid JSON Schema at properties/n/type",
        ),
        (
            '[tools.a]\ndescription = "d"\ncommand = ["x"]\ntimeout_s = 0\n',
            "tools.a.timeout_s",
            "greater than 0",
        ),
        (
            '[tools.a]\ndescription = "d"\ncommand = ["x"]\ntimeout = 5\n',
            "tools.a.timeout",
            "unknown key",
        ),
        (
            '[tools."a b"]\ndescription = "d"\ncommand = ["x"]\n',
            "tools",
            "a tool name is 1 to 64 letters",
        ),
        ('[tools.mcp__x__y]\ndescription = "d"\ncommand = ["x"]\n', "tools", "MCP servers"),
    ],
)
def test_bad_entries_are_refused_with_the_key(
    tmp_path: Path, entry: str, key: str, says: str
) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, entry)
    assert info.value.code == "config_invalid"
    assert info.value.details["key"] == key, info.value.message
    assert says in info.value.message and "config.toml" in info.value.message
