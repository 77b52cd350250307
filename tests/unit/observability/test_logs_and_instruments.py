"""Log lines carry the ids bound to their task; model and tool calls are measured where they run."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY

from agent_core.observability.instrument import InstrumentedAdapter, tool_call
from agent_core.observability.logs import configure_logging, log_ids
from agent_core.runtime.scripted import ScriptedModel, ScriptedReply
from agent_core.types.protocol import ModelMessage, ModelRequest, Role, TextBlock


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    out = io.StringIO()
    try:
        yield out
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def _json_lines(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


async def test_json_lines_carry_the_ids_of_their_own_task(captured: io.StringIO) -> None:
    configure_logging("INFO", "run_worker", "3", "json")
    logging.getLogger().handlers[0].setStream(captured)  # type: ignore[attr-defined]
    log = logging.getLogger("soong.test")

    async def run(run_id: str) -> None:
        with log_ids(session_id="sess_a", run_id=run_id, agent_id=None):
            await asyncio.sleep(0)
            log.info("step", extra={"fields": {"turns": 2, "key": "sk-abcdefghijklmnopqrstuvwx"}})

    await asyncio.gather(run("run_1"), run("run_2"))
    log.info("outside")
    lines = _json_lines(captured)
    assert {(x["run_id"], x["session_id"]) for x in lines[:2]} == {
        ("run_1", "sess_a"),
        ("run_2", "sess_a"),
    }
    assert all(x["service"] == "run_worker" and x["instance"] == "3" for x in lines)
    assert "agent_id" not in lines[0] and lines[0]["turns"] == 2
    assert "abcdefghijklmnop" not in captured.getvalue()  # redacted
    assert "run_id" not in lines[2]  # the ids belong to the block that bound them


def test_text_is_the_default_and_third_parties_are_debug_only(captured: io.StringIO) -> None:
    configure_logging("INFO", "gateway", "0")
    logging.getLogger().handlers[0].setStream(captured)  # type: ignore[attr-defined]
    with log_ids(run_id="run_9"):
        logging.getLogger("soong.x").info("hello")
    logging.getLogger("httpx2").info("HTTP Request: POST https://api.openai.com/v1 200")
    text = captured.getvalue()
    assert "INFO gateway[0] soong.x: hello run_id=run_9" in text
    assert "HTTP Request" not in text
    configure_logging("DEBUG", "gateway", "0")
    assert logging.getLogger("httpx2").isEnabledFor(logging.INFO)


def _sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_a_model_call_is_measured_by_provider_and_model() -> None:
    model = InstrumentedAdapter(ScriptedModel(lambda _: ScriptedReply(text="hello")), "scripted")
    labels = {"provider": "scripted", "model": "m-test"}
    before = _sample("soong_model_calls_total", **labels, outcome="ok")
    timed_before = _sample("soong_model_call_seconds_count", **labels)
    tokens_before = _sample("soong_model_tokens_total", **labels, direction="out")
    request = ModelRequest(
        model="m-test", messages=[ModelMessage(role=Role.USER, content=[TextBlock(text="hi")])]
    )
    events = [e.type async for e in model.stream(request)]
    assert events[0] == "message_start" and events[-1] == "message_end"
    assert _sample("soong_model_calls_total", **labels, outcome="ok") == before + 1
    assert _sample("soong_model_call_seconds_count", **labels) == timed_before + 1
    assert _sample("soong_model_tokens_total", **labels, direction="out") == tokens_before + 10
    assert _sample("soong_model_time_to_first_token_seconds_count", **labels) >= 1


def test_a_tool_call_is_counted_by_tool_and_outcome() -> None:
    before_ok = _sample("soong_tool_calls_total", tool="t_unit", outcome="ok")
    before_err = _sample("soong_tool_calls_total", tool="t_unit", outcome="error")
    with tool_call("t_unit", "call_1"):
        pass
    with tool_call("t_unit", "call_2") as measure:
        measure.failed("tool_timeout")
    with pytest.raises(RuntimeError), tool_call("t_unit", "call_3"):
        raise RuntimeError("boom")
    assert _sample("soong_tool_calls_total", tool="t_unit", outcome="ok") == before_ok + 1
    assert _sample("soong_tool_calls_total", tool="t_unit", outcome="error") == before_err + 2
    assert _sample("soong_tool_call_seconds_count", tool="t_unit") >= 3
