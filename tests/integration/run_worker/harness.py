"""A storage-writer and run-workers as real processes, an OpenAI fake, and a bus client.

Each service is its own process, forked from a server that has imported the services once
(:mod:`tests.procs`): it runs what ``soong-agent serve`` runs, without paying the imports again.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_core.bus import BusNames
from agent_core.bus.contracts.storage import GetActivePath, GetRun, GetTree, ListEvents
from agent_core.config import load_settings
from agent_core.ids import new_id, new_session_id
from agent_core.runqueue import RunEventReader, SessionQueue, Submitted, submit_message
from agent_core.service import ServiceContext, ping_service
from agent_core.storage_client import StorageClient
from agent_core.types.enums import AgentType, MultitaskStrategy
from agent_core.types.protocol import TextBlock
from agent_core.types.runtime import RuntimeEvent
from tests.conftest import REPO
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import (
    Delay,
    Finish,
    ScriptedResponse,
    ScriptedTurn,
    Text,
    Usage,
    tool_call,
)
from tests.procs import ServiceProcess, spawn_service

CONFIG = """
[memory]
enabled = {memory}

[run_worker]

[bus]
min_idle_ms = 2000
claim_interval_s = 0.3
request_timeout_s = 5.0
"""


def last_role(request: Any) -> str:
    """Role of the last message of a Chat Completions request."""
    return str(request["messages"][-1]["role"])


def last_user_text(request: Any) -> str:
    """Text of the last user message of a Chat Completions request."""
    for message in reversed(request["messages"]):
        if message["role"] == "user":
            content = message["content"]
            return (
                content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
            )
    return ""


def text_answer(text: str, *, delay_s: float = 0.0, pieces: int = 1) -> ScriptedTurn:
    """A streamed text answer, optionally in ``pieces`` with delays between them."""
    steps: list[Any] = []
    size = max(1, len(text) // pieces)
    for i in range(0, len(text), size):
        if delay_s:
            steps.append(Delay(seconds=delay_s))
        steps.append(Text(text=text[i : i + size]))
    steps += [Usage(input_tokens=7, output_tokens=3), Finish(reason="end_turn")]
    return ScriptedTurn(steps=steps)


def tool_calls_turn(*calls: tuple[str, str, dict[str, Any]]) -> ScriptedTurn:
    """One response with parallel tool calls, each call's arguments split in two fragments."""
    steps: list[Any] = []
    for index, (call_id, name, arguments) in enumerate(calls):
        raw = json.dumps(arguments)
        steps += tool_call(index, call_id, name, [raw[: len(raw) // 2], raw[len(raw) // 2 :]])
    steps += [Usage(input_tokens=11, output_tokens=5), Finish(reason="tool_use")]
    return ScriptedTurn(steps=steps)


@dataclass
class Cluster:
    """The storage-writer and N run-workers of one test, on the test's namespace."""

    redis_url: str
    names: BusNames
    home: Path
    fake: FakeOpenAIServer
    workers: dict[int, ServiceProcess] = field(default_factory=dict)
    writer: ServiceProcess | None = None
    others: list[ServiceProcess] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)
    extra_env: dict[str, str] = field(default_factory=dict)  # over the defaults below

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "SOONG_REDIS_URL": self.redis_url,
            "SOONG_NAMESPACE": self.names.namespace,
            "SOONG_AGENT_HOME": str(self.home),
            "SOONG_MODEL_PROVIDER": "openai",
            "SOONG_MODEL_NAME": "fake-model",
            "SOONG_MODEL_BASE_URL": self.fake.sdk_base_url,
            "OPENAI_API_KEY": "sk-test-not-a-real-key-000000",
            "PYTHONUNBUFFERED": "1",
            **self.extra_env,
        }

    def _spawn(self, name: str, instance: str) -> ServiceProcess:
        log = self.home / f"{name}-{instance}-{len(self.logs)}.log"
        self.logs.append(log)
        return spawn_service(name, instance, env=self.env(), cwd=REPO, log=log)

    def start_writer(self) -> None:
        self.writer = self._spawn("storage_writer", "0")

    def start_service(self, name: str) -> None:
        self.others.append(self._spawn(name, "0"))

    def start_worker(self, index: int) -> None:
        self.workers[index] = self._spawn("run_worker", str(index))

    def signal_worker(self, index: int, sig: int) -> None:
        self.workers[index].send_signal(sig)
        if sig == signal.SIGKILL:
            self.workers[index].wait()

    def worker_pid(self, index: int) -> int:
        return self.workers[index].pid

    def stop(self) -> None:
        procs = [*self.workers.values(), *self.others, *([self.writer] if self.writer else [])]
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
        deadline = time.monotonic() + 20
        for proc in procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def log_text(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in self.logs if p.exists())


class BusClient:
    """What the gateway does, over the bus: create sessions, submit messages, read results."""

    def __init__(self, redis_url: str, names: BusNames, home: Path) -> None:
        settings = load_settings(
            env={
                "SOONG_AGENT_HOME": str(home),
                "SOONG_REDIS_URL": redis_url,
                "SOONG_NAMESPACE": names.namespace,
            }
        )
        self.ctx = ServiceContext(settings, "test-client", new_id("cmd"))
        self.storage = StorageClient(self.ctx.rpc, self.ctx.names, timeout_s=5.0, attempts=6)
        self.queue = SessionQueue(self.ctx.bus, self.ctx.names)
        self.reader = RunEventReader(self.ctx.redis, self.ctx.names)
        self.home = home

    async def start(self) -> None:
        await self.ctx.rpc.start()

    async def close(self) -> None:
        await self.ctx.rpc.stop()
        await self.ctx.bus.aclose()

    async def wait_ready(self, services: tuple[str, ...], timeout_s: float = 90) -> None:
        """Wait until each service answers a ping. The deadline is generous on purpose: it only
        bounds a hang; start-up takes seconds of CPU per process, and the suite runs in parallel."""
        deadline = time.monotonic() + timeout_s
        for service in services:
            while True:
                try:
                    reply = await ping_service(self.ctx, service, timeout_s=1.0)
                    if reply.ok:
                        break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                await asyncio.sleep(0.1)

    async def new_session(self, account: str = "acct1", *, orchestrator: bool = False) -> str:
        sid = new_session_id()
        receipt = await self.storage.create_session(
            sid,
            account_id=account,
            cwd="workspace",
            root_agent_id=new_id("agent"),
            root_agent_type=AgentType.ORCHESTRATOR if orchestrator else AgentType.MAIN,
        )
        assert receipt.ok, receipt.error
        return sid

    async def send(
        self,
        sid: str,
        text: str,
        *,
        account: str = "acct1",
        strategy: MultitaskStrategy = MultitaskStrategy.ENQUEUE,
        overrides: dict[str, Any] | None = None,
    ) -> Submitted:
        return await submit_message(
            self.storage,
            self.queue,
            account_id=account,
            session_id=sid,
            content=[TextBlock(text=text)],
            strategy=strategy,
            config_overrides=overrides,
        )

    async def events(
        self, sid: str, run_id: str, timeout_s: float = 30
    ) -> list[tuple[str, RuntimeEvent]]:
        out: list[tuple[str, RuntimeEvent]] = []

        async def collect() -> None:
            async for item in self.reader.follow(sid, run_id, block_ms=1000):
                if item is not None:
                    out.append(item)

        async with asyncio.timeout(timeout_s):
            await collect()
        return out

    async def wait_event(
        self, sid: str, run_id: str, match: Callable[[dict[str, Any]], bool], timeout_s: float
    ) -> dict[str, Any] | None:
        """The first event on ``run_id``'s stream that ``match`` accepts (as its JSON), polling
        the stream; ``None`` if none came within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        stream = self.ctx.names.run_events(sid, run_id)
        while time.monotonic() < deadline:
            for _, fields in await self.ctx.redis.xrange(stream):
                event: dict[str, Any] = json.loads(fields[b"data"])
                if match(event):
                    return event
            await asyncio.sleep(0.01)
        return None

    async def lease_holder_index(self, sid: str) -> int | None:
        """The index of the worker that holds the session's lease (``None``: nobody)."""
        token = await self.queue.lease_holder(sid)
        return None if token is None else int(token.split(":")[0].rsplit("-", 1)[1])

    async def run(self, run_id: str) -> dict[str, Any]:
        reply = await self.storage.query(GetRun(run_id=run_id))
        assert reply.ok and reply.data, reply
        return dict(reply.data)

    async def tree(self, sid: str) -> list[dict[str, Any]]:
        reply = await self.storage.query(GetTree(session_id=sid))
        assert reply.ok, reply
        return list(reply.data)

    async def path(self, sid: str, node_id: str) -> list[dict[str, Any]]:
        reply = await self.storage.query(GetActivePath(session_id=sid, node_id=node_id))
        assert reply.ok and reply.data is not None, reply
        return list(reply.data)

    async def timeline(self, sid: str, run_id: str | None = None) -> list[dict[str, Any]]:
        reply = await self.storage.query(ListEvents(session_id=sid, run_id=run_id, limit=5000))
        assert reply.ok, reply
        return list(reply.data)

    async def wait_terminal(
        self, run_ids: list[str], timeout_s: float = 60
    ) -> dict[str, dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        done: dict[str, dict[str, Any]] = {}
        while True:
            for run_id in run_ids:
                if run_id not in done:
                    run = await self.run(run_id)
                    if run["status"] in ("completed", "failed", "aborted", "cancelled"):
                        done[run_id] = run
            if len(done) == len(run_ids):
                return done
            if time.monotonic() > deadline:
                stuck = {r: (await self.run(r))["status"] for r in run_ids if r not in done}
                raise AssertionError(f"runs not terminal: {stuck}")
            await asyncio.sleep(0.1)


def fake_server(default: Callable[[Any], ScriptedResponse]) -> FakeOpenAIServer:
    """An OpenAI fake answering every request with ``default(request_json)``, in its own thread."""
    server = FakeOpenAIServer(default=default)
    server.start_in_thread()
    return server
