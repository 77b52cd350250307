"""The MCP client against real servers written with the same SDK, over stdio and HTTP: discovery,
calls through the tool executor, a crash mid-call, a hang, a huge result, a changing tool list,
denied tools, a server that is down, and the worker's ownership of stdio processes."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import psutil
import pytest
from prometheus_client import REGISTRY

from agent_core.errors import ToolError
from agent_core.mcp import McpServerSettings
from tests.conftest import REPO
from tests.integration.mcp.conftest import FAKE, stdio_settings, text_of

pytestmark = pytest.mark.timeout(120)


def _server(transport: str, url: str | None, **extra: Any) -> McpServerSettings:
    if transport == "stdio":
        return stdio_settings(**extra)
    return McpServerSettings.model_validate({"transport": "http", "url": url, **extra})


@pytest.fixture(params=["stdio", "http"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def url(transport: str, request: pytest.FixtureRequest) -> str | None:
    return request.getfixturevalue("http_url") if transport == "http" else None


async def test_tools_are_discovered_namespaced_with_their_schemas(
    make_rig: Any, transport: str, url: str | None
) -> None:
    rig = await make_rig({"fake": _server(transport, url)})
    names = await rig.offer()
    assert {"mcp__fake__echo", "mcp__fake__add", "mcp__fake__grow"} <= set(names)
    echo = next(t for t in rig.tools if t.name == "mcp__fake__echo").definition()
    assert echo.description.startswith("[MCP server fake] Return the text")
    assert echo.input_schema["properties"]["text"]["type"] == "string"
    assert echo.input_schema["required"] == ["text"] and "title" not in echo.input_schema


async def test_a_call_runs_through_the_executor(
    make_rig: Any, transport: str, url: str | None
) -> None:
    rig = await make_rig({"fake": _server(transport, url)})
    result = await rig.call("mcp__fake__add", {"a": 2, "b": 40})
    assert not result.is_error and text_of(result) == "42"
    assert result.metadata["mcp"] == {"server": "fake", "tool": "add"}
    assert result.metadata["permission"]["behavior"] == "allow"
    failed = await rig.call("mcp__fake__fail")
    assert failed.is_error and failed.metadata["error_code"] == "mcp_tool_error"
    assert "this tool always fails" in text_of(failed)
    wrong = await rig.call("mcp__fake__add", {"a": "x"})
    assert wrong.is_error and "mcp" in wrong.metadata["error_code"]


async def test_a_hanging_call_times_out_and_the_server_stays_usable(
    make_rig: Any, transport: str, url: str | None
) -> None:
    rig = await make_rig({"fake": _server(transport, url, call_timeout_s=0.5)})
    result = await rig.call("mcp__fake__hang")
    assert result.is_error and result.metadata["error_code"] == "mcp_timeout"
    assert "did not answer 'hang' within 0.5 s" in text_of(result)
    again = await rig.call("mcp__fake__echo", {"text": "still here"})
    assert not again.is_error and text_of(again) == "still here"


async def test_a_huge_result_is_cut_for_the_model_and_saved_whole(
    make_rig: Any, transport: str, url: str | None
) -> None:
    rig = await make_rig({"fake": _server(transport, url)})
    result = await rig.call("mcp__fake__huge", {"size": 300_000})
    assert not result.is_error
    assert len(text_of(result).encode()) < 40_000 and "[truncated" in text_of(result)
    assert result.metadata["truncated_bytes"] > 250_000
    assert [o.tool_call_id for o in rig.sink.outputs] == ["call_1"]
    saved = rig.sink.outputs[0].text
    assert len(saved) == 300_000 and saved.startswith("line 000000")


async def test_a_changed_tool_list_is_refreshed_on_notification(
    make_rig: Any, transport: str, url: str | None
) -> None:
    rig = await make_rig({"fake": _server(transport, url)})
    assert "mcp__fake__extra" not in await rig.offer()
    client = rig.servers.clients["fake"]
    listed = asyncio.create_task(client.wait_listed())
    await asyncio.sleep(0)
    result = await rig.call("mcp__fake__grow")
    assert text_of(result) == "grown"
    async with asyncio.timeout(30):
        await listed
    assert "mcp__fake__extra" in await rig.offer()
    extra = await rig.call("mcp__fake__extra")
    assert text_of(extra) == "extra!"
    assert client.starts == 1  # refreshed on the same connection


async def test_a_denied_tool_is_not_offered_and_cannot_be_called(
    make_rig: Any, transport: str, url: str | None
) -> None:
    rig = await make_rig({"fake": _server(transport, url, deny=["secret", "h*"])})
    names = await rig.offer()
    assert "mcp__fake__secret" not in names and "mcp__fake__hang" not in names
    assert "mcp__fake__huge" not in names and "mcp__fake__echo" in names
    result = await rig.call("mcp__fake__secret")
    assert result.is_error and result.metadata["error_code"] == "unknown_tool"
    with pytest.raises(ToolError) as info:  # the client refuses it too, whoever asks
        await rig.servers.clients["fake"].call("secret", {})
    assert info.value.code == "mcp_tool_denied"
    only = await make_rig({"fake": _server(transport, url, allow=["echo", "ad?"])})
    assert await only.offer() == ["mcp__fake__add", "mcp__fake__echo"]


async def test_agents_enable_mcp_tools_by_name_or_by_server(make_rig: Any) -> None:
    rig = await make_rig({"fake": stdio_settings(), "off": stdio_settings(enabled=False)})
    assert await rig.offer(["mcp__fake__echo", "read_file"]) == ["mcp__fake__echo"]
    assert "mcp__fake__add" in await rig.offer(["mcp__fake__*"])
    assert await rig.offer(["read_file"]) == []
    assert list(rig.servers.clients) == ["fake"]  # a disabled server is never started


def _sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_a_crash_mid_call_is_an_error_and_the_next_call_restarts_it(make_rig: Any) -> None:
    crashes = _sample("soong_mcp_server_crashes_total", server="crashy")
    starts = _sample("soong_mcp_server_starts_total", server="crashy", outcome="ok")
    rig = await make_rig({"crashy": stdio_settings()})
    first = int(text_of(await rig.call("mcp__crashy__whoami")).split()[0])
    result = await rig.call("mcp__crashy__crash")
    assert result.is_error and result.metadata["error_code"] == "mcp_server_crashed"
    assert "started again for the next call" in text_of(result)
    after = await rig.call("mcp__crashy__whoami")
    assert not after.is_error, text_of(after)
    assert int(text_of(after).split()[0]) != first
    assert rig.servers.clients["crashy"].starts == 2
    assert _sample("soong_mcp_server_crashes_total", server="crashy") == crashes + 1
    assert _sample("soong_mcp_server_starts_total", server="crashy", outcome="ok") == starts + 2


async def test_a_server_that_dies_while_idle_is_restarted_by_the_next_call(
    make_rig: Any,
) -> None:
    rig = await make_rig({"fake": stdio_settings()})
    pid = int(text_of(await rig.call("mcp__fake__whoami")).split()[0])
    psutil.Process(pid).kill()
    client = rig.servers.clients["fake"]
    conn = client._conn
    assert conn is not None
    async with asyncio.timeout(30):
        await conn.ended.wait()  # noticed without any call
    after = await rig.call("mcp__fake__whoami")
    assert not after.is_error and int(text_of(after).split()[0]) != pid


async def test_a_server_that_cannot_start_gives_clear_errors_and_backs_off(
    make_rig: Any,
) -> None:
    now = [1000.0]
    from agent_core.mcp.client import McpServerClient, backoff_s

    broken = stdio_settings(command=[*FAKE, "--crash-on-start"])
    rig = await make_rig({"broken": broken, "fake": stdio_settings()})
    assert all(t.name.startswith("mcp__fake__") for t in rig.tools)  # its tools only
    client = McpServerClient("broken", broken, clock=lambda: now[0])
    errors = []
    for _ in range(3):
        with pytest.raises(ToolError) as info:
            await client.call("echo", {"text": "x"})
        errors.append(info.value)
    assert [e.code for e in errors] == ["mcp_server_unavailable"] * 3
    assert "could not be started" in errors[0].message and client.starts == 2
    assert "started again in 1 s" in errors[2].message  # backing off: not started a third time
    now[0] += 1.5
    with pytest.raises(ToolError):
        await client.call("echo", {"text": "x"})
    assert client.starts == 3
    assert [backoff_s(n) for n in (1, 2, 3, 4, 9, 20)] == [0, 1, 2, 4, 30, 30]
    await client.close()


async def test_an_http_server_that_is_down_gives_a_clear_error(make_rig: Any) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    down = McpServerSettings(
        transport="http", url=f"http://127.0.0.1:{port}/mcp", connect_timeout_s=5
    )
    rig = await make_rig({"down": down})
    assert rig.tools == []
    with pytest.raises(ToolError) as info:
        await rig.servers.clients["down"].call("echo", {"text": "x"})
    assert info.value.code == "mcp_server_unavailable"
    assert "MCP server 'down' could not be started" in info.value.message


async def test_env_cwd_and_headers_reach_the_server(
    make_rig: Any, http_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOONG_TEST_WORKER_SECRET", "sk-not-for-servers")
    stdio = stdio_settings(env={"FAKE_MCP_VALUE": "from-config"})
    http = McpServerSettings(
        transport="http",
        url=http_url,
        headers={"X-Other": "1"},
        headers_from_env={"X-Fake": "FAKE_TOKEN"},
    )
    rig = await make_rig({"s": stdio, "h": http}, environ={"FAKE_TOKEN": "tok-123"})
    _, cwd, value = text_of(await rig.call("mcp__s__whoami")).split()
    assert cwd == str(REPO) and value == "from-config"
    # The worker's own environment stays out (provider keys are there).
    assert os.environ.get("SOONG_TEST_WORKER_SECRET") == "sk-not-for-servers"
    hidden = await rig.call("mcp__s__getenv", {"name": "SOONG_TEST_WORKER_SECRET"})
    assert text_of(hidden) == "<unset>"
    assert text_of(await rig.call("mcp__h__whoami")).split()[-1] == "tok-123"


async def test_closing_ends_the_server_processes(make_rig: Any) -> None:
    rig = await make_rig({"fake": stdio_settings()})
    pid = int(text_of(await rig.call("mcp__fake__whoami")).split()[0])
    assert psutil.pid_exists(pid)
    await rig.servers.close()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    with pytest.raises(ToolError) as info:
        await rig.servers.clients["fake"].call("echo", {"text": "x"})
    assert info.value.code == "mcp_server_unavailable"
    assert os.getpid() != pid


async def test_a_server_that_never_answers_its_start_times_out(make_rig: Any) -> None:
    hung = stdio_settings(command=[*FAKE, "--hang-on-start"], connect_timeout_s=1.0)
    rig = await make_rig({"hung": hung})
    assert rig.tools == []  # the run is not held: no tools from it
    client = rig.servers.clients["hung"]
    with pytest.raises(ToolError) as info:
        await client.call("echo", {"text": "x"})
    assert info.value.code == "mcp_server_unavailable"
    assert "could not be started: it did not start in time" in info.value.message


async def test_an_http_server_that_dies_mid_call_gives_errors_not_a_stuck_run(
    make_rig: Any, http_url: str
) -> None:
    rig = await make_rig({"web": McpServerSettings(transport="http", url=http_url)})
    result = await rig.call("mcp__web__crash")
    assert result.is_error and result.metadata["error_code"] == "mcp_server_crashed"
    assert "The next call connects to it again" in text_of(result)
    after = await rig.call("mcp__web__echo", {"text": "anyone?"})  # nobody listens any more
    assert after.is_error and after.metadata["error_code"] == "mcp_server_unavailable"
    assert "MCP server 'web'" in text_of(after)


async def test_the_agents_tool_policy_applies_by_namespaced_name(make_rig: Any) -> None:
    from agent_core.tools import PermissionRules
    from agent_core.types.enums import PermissionPolicy

    rig = await make_rig({"fake": stdio_settings()})
    deny_echo = PermissionRules(per_tool={"mcp__fake__echo": PermissionPolicy.DENY})
    denied = await rig.call("mcp__fake__echo", {"text": "x"}, rules=deny_echo)
    assert denied.is_error and denied.metadata["error_code"] == "permission_denied"
    assert "the agent's policy denies mcp__fake__echo" in text_of(denied)
    # Under "ask" with nobody to ask: a tool the server marks read-only runs, another does not.
    ask = PermissionRules(default=PermissionPolicy.ASK)
    upper = await rig.call("mcp__fake__upper", {"text": "x"}, rules=ask)
    assert not upper.is_error and text_of(upper) == "X"
    echo = await rig.call("mcp__fake__echo", {"text": "x"}, rules=ask)
    assert echo.is_error and echo.metadata["error_code"] == "permission_denied"


async def test_a_server_that_went_down_keeps_its_tools_and_its_calls_say_why(
    make_rig: Any, tmp_path: Any
) -> None:
    mark = tmp_path / "down"
    script = (
        "import os, runpy, sys\n"
        f"if os.path.exists({str(mark)!r}): sys.exit(7)\n"
        "runpy.run_module('tests.fakes.mcp_server', run_name='__main__')\n"
    )
    rig = await make_rig({"flaky": stdio_settings(command=[FAKE[0], "-c", script])})
    pid = int(text_of(await rig.call("mcp__flaky__whoami")).split()[0])
    mark.write_text("")
    psutil.Process(pid).kill()
    client = rig.servers.clients["flaky"]
    assert client._conn is not None
    async with asyncio.timeout(30):
        await client._conn.ended.wait()
    assert "mcp__flaky__echo" in await rig.offer()  # the last list, while it cannot start
    result = await rig.call("mcp__flaky__echo", {"text": "x"})
    assert result.is_error and result.metadata["error_code"] == "mcp_server_unavailable"
    assert "MCP server 'flaky'" in text_of(result)


async def test_the_example_server_of_the_readme_works_as_declared(make_rig: Any) -> None:
    """README's `examples/mcp_server.py`, declared by its own block: listed and called."""
    import re
    import sys
    import tomllib

    block = re.search(r"```toml\n# mcp example\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    assert block is not None
    declared = tomllib.loads(block.group(1))["mcp"]["servers"]["reports"]
    declared["command"] = [sys.executable, *declared["command"][1:]]  # this checkout's venv
    rig = await make_rig({"reports": McpServerSettings.model_validate({**declared, "cwd": REPO})})
    assert await rig.offer() == ["mcp__reports__table_summary", "mcp__reports__word_count"]
    counted = await rig.call("mcp__reports__word_count", {"text": "two words\nand a line"})
    assert not counted.is_error and '"words": 5' in text_of(counted)
    summary = await rig.call(
        "mcp__reports__table_summary", {"csv_text": "city,sales\nOslo,12\nRome,30\n"}
    )
    assert text_of(summary) == "2 rows; columns: city, sales; sums: sales=42"
