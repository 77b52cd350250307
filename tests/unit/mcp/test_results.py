"""What the model gets from an MCP result: text as it is, other blocks described, bounded."""

from __future__ import annotations

import mcp_types as types
import pytest

from agent_core.mcp import tools
from agent_core.mcp.client import backoff_s
from agent_core.mcp.tools import result_text


def test_blocks_become_text() -> None:
    result = types.CallToolResult(
        content=[
            types.TextContent(text="first"),
            types.ImageContent(data="aGVsbG8h", mime_type="image/png"),
            types.ResourceLink(uri="file:///srv/a.txt", name="a"),
            types.EmbeddedResource(
                resource=types.TextResourceContents(uri="file:///srv/b.txt", text="inline body")
            ),
            types.EmbeddedResource(
                resource=types.BlobResourceContents(uri="file:///srv/c.bin", blob="AAAA")
            ),
        ]
    )
    assert result_text(result).split("\n") == [
        "first",
        "[image image/png, 6 bytes, not shown]",
        "[resource file:///srv/a.txt]",
        "inline body",
        "[resource file:///srv/c.bin, binary, not shown]",
    ]


def test_structured_content_alone_is_json() -> None:
    result = types.CallToolResult(content=[], structured_content={"n": 1, "s": "é"})
    assert result_text(result) == '{"n": 1, "s": "é"}'


def test_a_result_past_the_bound_is_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tools, "MAX_RESULT_BYTES", 100)
    text = result_text(types.CallToolResult(content=[types.TextContent(text="é" * 100)]))
    assert text.startswith("é" * 50) and text.endswith(
        "[MCP result cut: 100 more bytes were not kept]"
    )


def test_backoff_grows_to_a_cap() -> None:
    assert [backoff_s(n) for n in range(1, 9)] == [0, 1, 2, 4, 8, 16, 30, 30]
