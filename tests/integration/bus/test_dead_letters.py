"""Every stream: malformed, unknown-type and invalid messages are dead-lettered with the reason,
and the consumer goes on consuming (against the real server)."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import REGISTRY
from pydantic import TypeAdapter
from redis.asyncio import Redis

from agent_core.bus import Bus, BusNames, Delivery
from agent_core.bus.broker import make_broker  # publishes as another FastStream app would
from agent_core.bus.contracts import health, memory, runs, storage, tasks
from tests.integration.bus.helpers import dead_letters, make_consumer, running, wait_for

# (stream of a BusNames, its union, one valid message, one message of a known type with a bad field)
STREAMS: list[tuple[str, Any, dict[str, Any], dict[str, Any]]] = [
    ("runs", runs.RUNS_MESSAGE, {"type": "run_nudge", "session_id": "s"}, {"type": "run_nudge"}),
    (
        "storage_commands",
        storage.STORAGE_COMMAND,
        {"type": "switch_active_node", "command_id": "cmd_1", "session_id": "s", "node_id": "n"},
        {"type": "append_event", "command_id": "cmd_2", "session_id": "s", "event": {"x": 1}},
    ),
    (
        "storage_queries",
        storage.STORAGE_QUERY,
        {"type": "get_tree", "session_id": "s"},
        {"type": "list_events", "session_id": "s", "after_seq": -4},
    ),
    (
        "task_commands",
        tasks.TASK_MESSAGE,
        {"type": "task_query", "session_id": "s", "scope": {"account_id": "a"}},
        {"type": "task_command", "session_id": "s", "cwd": "/tmp"},
    ),
    (
        "memory_interactions",
        memory.MEMORY_INTERACTION,
        {
            "type": "interaction",
            "interaction_id": "i1",
            "account_id": "a",
            "session_id": "s",
            "run_id": "r",
            "turns": [{"role": "user", "content": "hi"}],
        },
        {"type": "interaction", "turns": "not a list"},
    ),
    (
        "memory_queries",
        memory.MEMORY_QUERY,
        {"type": "render_memory", "account_id": "a"},
        {"type": "write_memory", "account_id": "a", "scope": "user", "extra": 1},
    ),
    ("health", health.HEALTH_MESSAGE, {"type": "health_ping"}, {"type": "health_ping", "nonce": 5}),
]


def _stream(names: BusNames, attr: str) -> str:
    value = getattr(names, attr)
    return value("svc") if attr == "health" else (value() if callable(value) else value)


@pytest.mark.parametrize(
    ("attr", "adapter", "valid", "invalid"), STREAMS, ids=[s[0] for s in STREAMS]
)
async def test_bad_messages_are_dead_lettered_and_consumption_goes_on(
    redis_url: str,
    bus: Bus,
    redis: Redis,
    names: BusNames,
    attr: str,
    adapter: TypeAdapter[Any],
    valid: dict[str, Any],
    invalid: dict[str, Any],
) -> None:
    stream = _stream(names, attr)
    handled: list[Any] = []

    async def handler(message: Any, _: Delivery) -> None:
        handled.append(message)

    consumer = make_consumer(bus, names, stream, adapter, handler)
    broker = make_broker(redis_url)
    await broker.connect()
    async with running(redis_url, consumer):
        await redis.xadd(stream, {"__data__": b"{not json"})
        await broker.publish({"type": "no_such_type"}, stream=stream)
        await broker.publish(invalid, stream=stream)
        await redis.xadd(stream, {"__data__": b"\x89BIN\r\n\x1a\n\x00\x01\xff"})  # torn envelope
        await broker.publish(valid, stream=stream)
        await wait_for(lambda: len(handled) == 1)
        await wait_for(lambda: _count(redis, names, 4))
    await broker.stop()

    assert handled == [adapter.validate_python(valid)]
    letters = await dead_letters(redis, names)
    assert [d["reason"] for d in letters] == ["malformed", "unknown_type", "invalid", "malformed"]
    assert all(d["stream"] == stream and d["group"] == "g" for d in letters)
    assert "no_such_type" in letters[1]["body_preview"]
    assert letters[2]["error"]  # names the field that was wrong
    pending = await redis.xpending(stream, "g")
    assert pending["pending"] == 0
    # The process that dead-lettered them counts them, by stream and reason.
    counted = {
        reason: REGISTRY.get_sample_value(
            "soong_bus_dead_letters_total", {"stream": stream, "reason": reason}
        )
        for reason in ("malformed", "unknown_type", "invalid")
    }
    assert counted == {"malformed": 2.0, "unknown_type": 1.0, "invalid": 1.0}


async def _count(redis: Redis, names: BusNames, n: int) -> bool:
    return int(await redis.xlen(names.dead_letter)) >= n


async def test_dead_letter_preview_is_redacted(
    redis_url: str, bus: Bus, redis: Redis, names: BusNames
) -> None:
    stream = names.runs

    async def handler(message: Any, _: Delivery) -> None:
        return None

    consumer = make_consumer(bus, names, stream, runs.RUNS_MESSAGE, handler)
    async with running(redis_url, consumer):
        await redis.xadd(
            stream, {"__data__": b'{"type": "x", "api_key": "sk-abcdefghijklmnopqrstuv"}'}
        )
        await wait_for(lambda: _count(redis, names, 1))
    letter = (await dead_letters(redis, names))[0]
    assert "sk-abcdefghijklmnopqrstuv" not in letter["body_preview"]
    assert letter["reason"] == "unknown_type"
