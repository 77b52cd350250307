"""One bus client per process, handed to its users: nothing finds it through a registry.

The service context makes the process's :class:`~agent_core.bus.calls.Bus`; every object that
calls the bus gets that one through its constructor. A module-level table keyed by the redis-py
client (what ``lean_for`` looked its lean client up in) would let a second, unowned client appear
behind the owner's back and outlive its close; these tests keep it from coming back.
"""

from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
from pydantic import TypeAdapter

from agent_core.bus.calls import Bus, RedisPyCalls, WriteRounds
from agent_core.bus.connection import make_redis
from agent_core.bus.names import BusNames
from agent_core.config import load_settings
from agent_core.runqueue import RunEventWriter
from agent_core.service import ServiceContext
from services.gateway.state import Gateway

ROOT = Path(__file__).resolve().parents[3]
CALLS = ROOT / "shared" / "agent_core" / "bus" / "calls.py"

# Containers a module could keep clients in, by the name of what builds them.
_TABLES = {"WeakKeyDictionary", "WeakValueDictionary", "WeakSet", "dict", "defaultdict"}


def _builder(node: ast.expr | None) -> str | None:
    """The name of what builds a module-level value: ``weakref.WeakKeyDictionary()`` → its name,
    a ``{}`` literal → ``dict``."""
    if isinstance(node, ast.Dict):
        return "dict"
    if isinstance(node, ast.Call):
        func = node.func
        return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return None


def test_the_calls_module_keeps_no_table_of_clients() -> None:
    tree = ast.parse(CALLS.read_text(encoding="utf-8"))
    tables = [
        ast.unparse(node)
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign) and _builder(node.value) in _TABLES
    ]
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    assert tables == []
    assert not functions & {"lean_for", "close_lean"}


# A module-level table whose keys are bus clients: what the run-events batchers were kept in.
_CLIENT_KEYED = re.compile(r"\[\s*(Bus|Redis|RedisCluster|LeanRedis|BusCalls)\b")


def test_no_module_keeps_a_table_keyed_by_a_bus_client() -> None:
    tables = [
        f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}"
        for tree_root in (ROOT / "shared", ROOT / "services")
        for path in tree_root.rglob("*.py")
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, ast.AnnAssign)
        and _builder(node.value) in _TABLES
        and _CLIENT_KEYED.search(ast.unparse(node.annotation))
    ]
    assert tables == []


async def test_the_bus_owns_the_write_rounds_its_event_writers_share() -> None:
    names = BusNames("t")
    buses = [Bus(make_redis("redis://127.0.0.1:1")) for _ in range(2)]  # never connected
    writers = [RunEventWriter(bus, names, "sess_1", f"run_{i}") for i, bus in enumerate(buses)]
    for writer in writers:
        writer.start()
    same_bus = RunEventWriter(buses[0], names, "sess_1", "run_2")
    same_bus.start()
    assert writers[0]._rounds is buses[0].rounds is same_bus._rounds
    assert writers[1]._rounds is buses[1].rounds
    assert buses[0].rounds is not buses[1].rounds
    for writer in [*writers, same_bus]:
        await writer.abort()


def test_a_bus_used_from_another_loop_gets_write_rounds_of_that_loop() -> None:
    bus = Bus(make_redis("redis://127.0.0.1:1"))  # never connected

    async def rounds() -> object:
        return bus.rounds

    first, second = asyncio.run(rounds()), asyncio.run(rounds())
    assert first is not second


def test_no_module_looks_a_client_up_by_its_redis_py_client() -> None:
    users = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for tree_root in (ROOT / "shared", ROOT / "services")
        for path in tree_root.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if (isinstance(node, ast.Name) and node.id in {"lean_for", "close_lean"})
        or (isinstance(node, ast.alias) and node.name in {"lean_for", "close_lean"})
    ]
    assert users == []


@pytest.fixture
def ctx(tmp_path: Path) -> ServiceContext:
    settings = load_settings(
        env={
            "SOONG_AGENT_HOME": str(tmp_path),
            "SOONG_REDIS_URL": "redis://127.0.0.1:1",  # never connected: nothing here does I/O
        }
    )
    return ServiceContext(settings, "gateway", "0")


def test_the_service_context_hands_its_one_bus_to_what_it_builds(ctx: ServiceContext) -> None:
    assert ctx.bus.redis is ctx.redis
    consumer = ctx.consumer("s", "g", TypeAdapter(int), handler=lambda *_: _none())
    gateway = Gateway.build(ctx)
    assert consumer.bus is ctx.bus
    assert gateway.queue.bus is ctx.bus
    assert gateway.events._bus is ctx.bus
    assert ctx.rpc._bus is ctx.bus


async def _none() -> None:
    return None


def test_a_topology_the_lean_client_does_not_speak_gets_redis_py_calls_at_once() -> None:
    # TLS (``rediss://``): redis-py speaks it, the lean socket does not; decided when made.
    bus = Bus(make_redis("rediss://127.0.0.1:1"))
    assert not bus.plain
    assert isinstance(bus.calls, RedisPyCalls)
    assert bus.calls is bus.calls


class _Recorded:
    """The calls of a bus that only records the batches it is asked to write."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[object, ...]]] = []

    async def execute_many(self, commands: list[tuple[object, ...]]) -> list[object]:
        await asyncio.sleep(0)  # a real write yields to the loop
        self.batches.append(list(commands))
        return [b"OK"] * len(commands)


class _Source:
    def __init__(self, commands: list[tuple[object, ...]]) -> None:
        self.commands, self.errors = commands, list[BaseException | None]()

    def take(self) -> list[tuple[object, ...]]:
        taken, self.commands = self.commands, []
        return taken

    def written(self, error: BaseException | None) -> None:
        self.errors.append(error)


async def test_closing_the_rounds_writes_what_is_queued_and_ends_their_task() -> None:
    calls = _Recorded()
    bus = cast(Bus, SimpleNamespace(calls=calls))
    rounds = WriteRounds(bus)
    first, second = _Source([("XADD", "a", "1")]), _Source([("XADD", "b", "2")])
    rounds.wake(first)
    rounds.wake(second)
    await rounds.aclose()
    assert calls.batches == [[("XADD", "a", "1"), ("XADD", "b", "2")]]
    assert first.errors == second.errors == [None]
    pending = [t for t in asyncio.all_tasks() if t.get_name() == "bus-write-rounds"]
    assert pending == []
