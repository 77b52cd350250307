"""Tool definitions in a small window: all of them when they fit their share, else the tools the
conversation called, the configured ones, then the most relevant to the newest message."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agent_core.context import ContextBuilder
from agent_core.context.tokens import estimate_tools
from agent_core.errors import ConfigError
from agent_core.types.enums import Role
from agent_core.types.protocol import NamedToolChoice, TextBlock, ToolCallBlock, ToolDefinition
from agent_core.types.runtime import AgentConfigOverrides
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


# ---------------------------------------------------------------- the agent's tool_choice

RUN = "run_20260101_000000_abcd"


def _forced(choice: object, *, called_in_run: bool = False, window: int | None = 128_000):  # type: ignore[no-untyped-def]
    nodes = [node(Role.USER, [TextBlock(text="Earlier.")], run_id="run_20250101_000000_0000")]
    nodes.append(node(Role.ASSISTANT, [ToolCallBlock(id="c0", name="send_mail", arguments={})]))
    nodes.append(node(Role.USER, [TextBlock(text="Chart sales.csv")], run_id=RUN))
    if called_in_run:
        call = ToolCallBlock(id="c1", name="csv_chart", arguments={})
        nodes.append(node(Role.ASSISTANT, [call], run_id=RUN))
    agent = config(context_window=window, max_output_tokens=512, tool_choice=choice)
    return ContextBuilder().build(
        chain(nodes), session_id=SESSION, config=agent, tools=_tools(), run_id=RUN
    )


def test_a_forced_tool_is_asked_for_until_the_run_calls_a_tool() -> None:
    request, _ = _forced({"name": "weather_lookup"})
    assert request.tool_choice == NamedToolChoice(name="weather_lookup")
    # A tool call of an earlier run does not count; one of this run hands the choice back.
    after, _ = _forced({"name": "weather_lookup"}, called_in_run=True)
    assert after.tool_choice is None
    required, _ = _forced("required")
    assert required.tool_choice == "required"
    assert _forced("required", called_in_run=True)[0].tool_choice is None
    # "none" holds for the whole run; "auto" is the provider's default and is not sent.
    assert _forced("none", called_in_run=True)[0].tool_choice == "none"
    assert _forced("auto")[0].tool_choice is None


def test_a_forced_tool_is_sent_even_when_a_small_window_leaves_it_out() -> None:
    # "Chart sales.csv" makes csv_chart the relevant one; tool_03 is relevant to nothing.
    _, report = _forced(None, window=2048)
    assert "tool_03" in report.tools_left_out
    request, report = _forced({"name": "tool_03"}, window=2048)
    assert "tool_03" in [t.name for t in request.tools]
    assert "tool_03" not in report.tools_left_out
    assert request.tool_choice == NamedToolChoice(name="tool_03")


def test_forcing_a_tool_the_agent_does_not_have_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        _forced({"name": "no_such_tool"})
    assert caught.value.code == "unknown_tool_choice"
    assert "no_such_tool" in caught.value.message


def test_a_build_without_tools_forces_nothing() -> None:
    # The inspector's context preview builds without the run's tools.
    path = chain([node(Role.USER, [TextBlock(text="hi")], run_id=RUN)])
    agent = config(tool_choice={"name": "weather_lookup"})
    request, _ = ContextBuilder().build(path, session_id=SESSION, config=agent, run_id=RUN)
    assert request.tool_choice is None and request.tools == []


def test_tool_choice_is_validated_where_a_client_sets_it() -> None:
    assert AgentConfigOverrides.model_validate({"tool_choice": "required"}).overrides() == {
        "tool_choice": "required"
    }
    for bad in ("always", {"name": "has space"}, {"name": "x", "extra": 1}, {"type": "function"}):
        with pytest.raises(ValidationError):
            AgentConfigOverrides.model_validate({"tool_choice": bad})
