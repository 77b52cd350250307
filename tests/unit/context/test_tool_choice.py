"""Tool definitions in a small window: all of them when they fit their share, else the tools the
conversation called, the configured ones, then the most relevant to the newest message."""

from __future__ import annotations

from agent_core.context import ContextBuilder
from agent_core.context.tokens import estimate_tools
from agent_core.types.enums import Role
from agent_core.types.protocol import TextBlock, ToolCallBlock, ToolDefinition
from tests.integration.provider.context_harness import chain, config, node

SESSION = "sess_20260101_000000_abcd"
FILLER = "Does one particular thing with the files and folders it is given. " * 6


def _tools() -> list[ToolDefinition]:
    """Twenty tools of ~150 tokens each, as the built-in set is (~3,000 tokens)."""
    names = [f"tool_{i:02d}" for i in range(17)] + ["weather_lookup", "csv_chart", "send_mail"]
    described = {
        "weather_lookup": "Looks up the weather forecast for a city.",
        "csv_chart": "Draws a chart from a CSV file.",
        "send_mail": "Sends an e-mail message.",
    }
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    return [
        ToolDefinition(name=n, description=f"{described.get(n, '')} {FILLER}", input_schema=schema)
        for n in names
    ]


def _build(text: str, *, window: int | None, called: str | None = None, **policy: object):  # type: ignore[no-untyped-def]
    nodes = [node(Role.USER, [TextBlock(text="Start.")])]
    if called is not None:
        call = ToolCallBlock(id="call_1", name=called, arguments={})
        nodes.append(node(Role.ASSISTANT, [call]))
    nodes.append(node(Role.USER, [TextBlock(text=text)]))
    agent = config(context_window=window, max_output_tokens=512, context=policy or {})
    return ContextBuilder().build(chain(nodes), session_id=SESSION, config=agent, tools=_tools())


def test_every_tool_goes_when_they_fit_their_share() -> None:
    request, report = _build("What is the weather in Bern?", window=128_000)
    assert [t.name for t in request.tools] == [t.name for t in _tools()]
    assert report.tools_left_out == []


def test_a_small_window_gets_the_relevant_tools_within_a_quarter_of_its_budget() -> None:
    request, report = _build("Please draw a chart from sales.csv", window=2048)
    sent = [t.name for t in request.tools]
    assert "csv_chart" in sent and 0 < len(sent) < 20
    assert estimate_tools(request.tools) <= (2048 - 512) // 4
    assert sorted(sent + report.tools_left_out) == sorted(t.name for t in _tools())
    assert report.budget is not None and report.budget.tools <= (2048 - 512) // 4


def test_called_tools_come_first_then_the_configured_ones() -> None:
    request, _ = _build(
        "Please draw a chart", window=2048, called="send_mail", small_window_tools=["tool_05"]
    )
    # The called tool and the configured one, then (room left) the relevant one; sent in the
    # registry's order.
    assert [t.name for t in request.tools] == ["tool_05", "csv_chart", "send_mail"]


def test_a_larger_share_sends_more() -> None:
    small, _ = _build("hello", window=4096)
    large, _ = _build("hello", window=4096, tool_share=0.9)
    assert len(large.tools) > len(small.tools)
