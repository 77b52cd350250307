"""The MCP server at ``/mcp`` with the official ``mcp`` Python client (Streamable HTTP): the
account's assistants are its tools, a call is a run with progress, another account sees none."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from tests.e2e.gateway.conftest import Gw

pytestmark = pytest.mark.e2e


@asynccontextmanager
async def _mcp(gw: Gw, key: str | None = None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {key or gw.stack.api_key}"}
    http = create_mcp_http_client(headers=headers)
    try:
        async with (
            streamable_http_client(f"{gw.stack.gateway_url}/mcp", http_client=http) as streams,
            ClientSession(*streams) as session,
        ):
            await session.initialize()
            yield session
    finally:
        await http.aclose()


@pytest.fixture(scope="module")
def assistants(gw: Gw) -> dict[str, str]:
    """Two assistants of account A (one asks before its lookup tool); their ids by name."""
    out = {}
    with gw.client() as c:
        for name, body in (
            ("mcp-helper", {"description": "Answers with the demo model."}),
            ("mcp-asker", {"config": {"tool_policy": {"ask": ["lookup"]}}}),
        ):
            made = c.post("/v1/assistants", json={"name": name, **body})
            assert made.status_code == 201, made.text
            out[name] = made.json()["assistant_id"]
    return out


async def test_tools_call_progress_and_files(gw: Gw, assistants: dict[str, str]) -> None:
    async with _mcp(gw) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert {"mcp-helper", "mcp-asker"} <= set(tools)
        assert tools["mcp-helper"].description == "Answers with the demo model."
        assert tools["mcp-helper"].input_schema["required"] == ["message"]

        seen: list[tuple[float, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, message))

        result = await session.call_tool(
            "mcp-helper", {"message": "look this up"}, progress_callback=on_progress
        )
        assert not result.is_error, result
        text = result.content[0]
        assert isinstance(text, types.TextContent) and "scripted demo model" in text.text
        # The step (its lookup tool), then the answer's text as it streamed; counts increase.
        notes = [m for _, m in seen]
        assert "tool lookup" in notes, seen
        assert "".join(m for m in notes[notes.index("tool lookup") + 1 :] if m) == text.text
        assert [p for p, _ in seen] == sorted({p for p, _ in seen})
        ids = result.structured_content
        assert ids is not None and ids["status"] == "completed"

        # The same session goes on; a run that writes a file answers with a link to it.
        files = await session.call_tool(
            "mcp-helper", {"message": "files", "session_id": ids["session_id"]}
        )
        assert not files.is_error, files
        assert (
            files.structured_content and files.structured_content["session_id"] == ids["session_id"]
        )
        links = [c for c in files.content if isinstance(c, types.ResourceLink)]
        assert links, files.content
    with gw.client() as c:
        runs = c.get(f"/v1/sessions/{ids['session_id']}/runs").json()["items"]
        assert len(runs) == 2
        downloaded = c.get(str(links[0].uri))
        assert downloaded.status_code == 200 and downloaded.content


async def test_bad_calls_are_jsonrpc_errors(gw: Gw, assistants: dict[str, str]) -> None:
    async with _mcp(gw) as session:
        for name, args, says in (
            ("nobody-by-that-name", {"message": "hi"}, "unknown tool"),
            ("mcp-helper", {}, "message"),
            ("mcp-helper", {"message": "hi", "extra": 1}, "unknown extra"),
            ("mcp-helper", {"message": "hi", "session_id": "sess_" + "0" * 16}, "session"),
        ):
            with pytest.raises(MCPError) as caught:
                await session.call_tool(name, args)
            assert caught.value.code == -32602 and says in caught.value.message, caught.value
            assert "Traceback" not in caught.value.message


async def test_another_account_sees_and_calls_nothing(gw: Gw, assistants: dict[str, str]) -> None:
    async with _mcp(gw) as session:
        mine = await session.call_tool("mcp-helper", {"message": "hi"})
        assert mine.structured_content is not None
    a_session = mine.structured_content["session_id"]
    async with _mcp(gw, gw.key_b) as bob:
        assert (await bob.list_tools()).tools == []
        for name, args in (
            ("mcp-helper", {"message": "hijack"}),
            (assistants["mcp-helper"], {"message": "hijack"}),
            ("mcp-helper", {"message": "hijack", "session_id": a_session}),
        ):
            with pytest.raises(MCPError) as caught:
                await bob.call_tool(name, args)
            assert caught.value.code == -32602
            assert a_session not in caught.value.message
    with gw.client() as c:
        assert len(c.get(f"/v1/sessions/{a_session}/runs").json()["items"]) == 1


def test_without_a_key_is_401(gw: Gw) -> None:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    response = httpx.post(f"{gw.stack.gateway_url}/mcp", json=body, timeout=10)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    error = response.json()["error"]
    assert error["data"]["code"] == "unauthorized" and "Traceback" not in response.text
