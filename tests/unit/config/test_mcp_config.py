"""``[mcp.servers.<name>]``: good entries load; bad ones are refused naming the key and why."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent_core.config import load_settings
from agent_core.errors import ConfigError
from agent_core.mcp.names import PREFIX, admitted, tool_name

GOOD = """
[mcp.servers.files]
transport = "stdio"
command = ["python3", "-m", "files_server", "--root", "/srv"]
env = { FILES_MODE = "ro" }
cwd = "/srv"
deny = ["delete_*"]
call_timeout_s = 20

[mcp.servers.search-api]
transport = "http"
url = "https://mcp.example.com/mcp"
headers = { "X-Team" = "core" }
headers_from_env = { Authorization = "SEARCH_MCP_TOKEN" }
allow = ["search", "fetch"]
connect_timeout_s = 5

[mcp.servers.old]
transport = "stdio"
command = ["old-server"]
enabled = false
"""


def _load(tmp_path: Path, text: str) -> object:
    (tmp_path / "config.toml").write_text(text)
    return load_settings(env={"SOONG_AGENT_HOME": str(tmp_path)})


def test_servers_load(tmp_path: Path) -> None:
    settings = load_settings(env={"SOONG_AGENT_HOME": str(tmp_path)})
    assert settings.mcp.servers == {}
    (tmp_path / "config.toml").write_text(GOOD)
    servers = load_settings(env={"SOONG_AGENT_HOME": str(tmp_path)}).mcp.servers
    assert servers["files"].command == ("python3", "-m", "files_server", "--root", "/srv")
    assert servers["files"].env == {"FILES_MODE": "ro"} and servers["files"].call_timeout_s == 20
    assert servers["search-api"].headers_from_env == {"Authorization": "SEARCH_MCP_TOKEN"}
    assert servers["search-api"].allow == ("search", "fetch")
    assert not servers["old"].enabled
    assert not admitted(servers["files"], "delete_all") and admitted(servers["files"], "read")
    assert admitted(servers["search-api"], "fetch") and not admitted(servers["search-api"], "x")


@pytest.mark.parametrize(
    ("entry", "key", "says"),
    [
        ('[mcp.servers.a]\ntransport = "stdio"\n', "mcp.servers.a", "needs command"),
        ('[mcp.servers.a]\ntransport = "http"\n', "mcp.servers.a", "needs url"),
        ('[mcp.servers.a]\ntransport = "ftp"\nurl = "x"\n', "mcp.servers.a.transport", "stdio"),
        (
            '[mcp.servers.a]\ntransport = "http"\nurl = "ftp://h/x"\n',
            "mcp.servers.a.url",
            "pattern",
        ),
        (
            '[mcp.servers.a]\ntransport = "stdio"\ncommand = ["s"]\nurl = "http://h"\n',
            "mcp.servers.a",
            "for transport = 'http'",
        ),
        (
            '[mcp.servers.a]\ntransport = "http"\nurl = "http://h"\ncommand = ["s"]\n',
            "mcp.servers.a",
            "for transport = 'stdio'",
        ),
        (
            '[mcp.servers.a]\ntransport = "stdio"\ncommand = ["s"]\ncwd = "rel"\n',
            "mcp.servers.a",
            "not an absolute path",
        ),
        (
            '[mcp.servers.a]\ntransport = "stdio"\ncommand = ["s"]\nenv = { "A B" = "1" }\n',
            "mcp.servers.a",
            "not a variable name",
        ),
        (
            '[mcp.servers.a]\ntransport = "http"\nurl = "http://h"\nheaders = { "A B" = "1" }\n',
            "mcp.servers.a",
            "not a header name",
        ),
        (
            '[mcp.servers.a]\ntransport = "stdio"\ncommand = ["s"]\ndeny = ["a b"]\n',
            "mcp.servers.a",
            "not a tool name or pattern",
        ),
        (
            '[mcp.servers.a]\ntransport = "stdio"\ncommand = ["s"]\ncall_timeout_s = 0\n',
            "mcp.servers.a.call_timeout_s",
            "greater than 0",
        ),
        (
            '[mcp.servers.a]\ntransport = "stdio"\ncommand = ["s"]\ncomand = ["s"]\n',
            "mcp.servers.a.comand",
            "unknown key",
        ),
        (
            '[mcp.servers.a__b]\ntransport = "stdio"\ncommand = ["s"]\n',
            "mcp",
            "not a usable server name",
        ),
        (
            '[mcp.servers.a-very-long-server-name-here]\ntransport = "stdio"\ncommand = ["s"]\n',
            "mcp",
            "at most 24 characters",
        ),
        ("[mcp]\nserver = {}\n", "mcp.server", "unknown key"),
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


def test_tool_names_fit_every_provider() -> None:
    assert tool_name("fs", "read_file") == "mcp__fs__read_file"
    rule = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
    odd = [("fs", "read.file"), ("fs", "a/b c"), ("x" * 24, "t" * 80), ("fs", "é")]
    names = [tool_name(server, tool) for server, tool in odd]
    assert all(rule.match(n) and n.startswith(PREFIX) for n in names), names
    # Two tools that clean to the same text stay apart.
    assert tool_name("fs", "read.file") != tool_name("fs", "read/file")
    assert tool_name("x" * 24, "t" * 80) != tool_name("x" * 24, "t" * 79 + "u")
