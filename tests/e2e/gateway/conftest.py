"""A stack of our own for the gateway's end-to-end tests (fake model), two accounts, helpers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_core.bus import Bus, BusNames, RpcClient, make_redis
from agent_core.bus.contracts.storage import AppendNode, CreateArtifact
from agent_core.ids import new_id
from agent_core.storage_client import StorageClient, raise_for_receipt
from agent_core.types.enums import EventType, Role
from agent_core.types.protocol import JsonBlock
from agent_core.types.runtime import ArtifactRef, Node, TimelineEvent
from services.gateway.keys import ApiKeyStore
from tests.conftest import Stack, start_stack, stop_stack

CONFIG = """
[gateway]
rate_limit_per_s = 5000.0
rate_limit_burst = 5000
max_sse_streams_per_key = 6
max_body_bytes = 65536
max_upload_bytes = 262144
auth_failures_per_minute = 100000
"""


@dataclass
class SseEvent:
    """One parsed SSE frame."""

    id: str | None
    event: str | None
    data: dict[str, Any] | None
    comment: bool = False


@dataclass
class Gw:
    """The running stack with a second account's key."""

    stack: Stack
    key_b: str
    redis_url: str
    seeded: dict[str, str] = field(default_factory=dict)

    def client(self, key: str | None = None, **kw: Any) -> httpx.Client:
        """A client authenticated as account A (dev) unless another key is given."""
        headers = {"Authorization": f"Bearer {key or self.stack.api_key}"}
        return httpx.Client(base_url=self.stack.gateway_url, headers=headers, timeout=30, **kw)


def _create_key(redis_url: str, account: str) -> str:
    async def go() -> str:
        redis = make_redis(redis_url)
        try:
            key, _ = await ApiKeyStore(redis, BusNames("soong")).create(account)
            return key
        finally:
            await redis.aclose()

    return asyncio.run(go())


@pytest.fixture(scope="session")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gw]:
    """The stack (fake provider) with tight body/stream limits and a generous rate limit."""
    home: Path = tmp_path_factory.mktemp("gateway-home")
    (home / "config.toml").write_text(CONFIG)
    stack = start_stack(home, workers=2, extra_env={"SOONG_MODEL_PROVIDER": "fake"})
    try:
        redis_url = json.loads((home / "run" / "stack.json").read_text())["redis_url"]
        yield Gw(stack, _create_key(redis_url, "bob"), redis_url)
    finally:
        stop_stack(stack.process)


def parse_sse(lines: Iterator[str], *, stop_after: int | None = None) -> list[SseEvent]:
    """Frames from SSE lines (comments kept as ``comment=True``); stops after ``stop_after``."""
    out: list[SseEvent] = []
    fields: dict[str, str] = {}
    for line in lines:
        if line == "":
            if fields:
                data = json.loads(fields["data"]) if "data" in fields else None
                out.append(SseEvent(fields.get("id"), fields.get("event"), data))
                fields = {}
                if stop_after is not None and len([e for e in out if e.id]) >= stop_after:
                    return out
            continue
        if line.startswith(":"):
            out.append(SseEvent(None, None, None, comment=True))
            continue
        name, _, value = line.partition(":")
        fields[name] = value[1:] if value.startswith(" ") else value
    return out


def read_events(
    client: httpx.Client,
    url: str,
    *,
    last_event_id: str | None = None,
    stop_after: int | None = None,
    params: dict[str, Any] | None = None,
) -> list[SseEvent]:
    """Open an event stream, read frames (all, or ``stop_after`` with ids), then close it."""
    headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
    with client.stream("GET", url, headers=headers, params=params) as response:
        assert response.status_code == 200, response.read()
        events = parse_sse(response.iter_lines(), stop_after=stop_after)
    return [e for e in events if not e.comment and e.id is not None]


def new_session(client: httpx.Client, **body: Any) -> str:
    """A new session's id."""
    response = client.post("/v1/sessions", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["session_id"])


def run_message(
    client: httpx.Client, session_id: str, text: str = "hi"
) -> tuple[str, list[SseEvent]]:
    """Post a message and read its run to the end; the run id and its events."""
    response = client.post(f"/v1/sessions/{session_id}/messages", json={"text": text})
    assert response.status_code == 202, response.text
    run_id = response.json()["run_id"]
    events = read_events(client, f"/v1/sessions/{session_id}/runs/{run_id}/events")
    assert events[-1].event == "run_finished"
    return run_id, events


async def seed_artifact(redis_url: str, session_id: str, path: str, *, size_bytes: int) -> str:
    """Record ``path`` of a session's workspace as an artifact through the bus (what a tool that
    makes a file does; the scripted model has no such tool); its id."""
    bus = Bus(make_redis(redis_url))
    names = BusNames("soong")
    rpc = RpcClient(bus, names.reply_channel(f"test-{new_id('cmd')}"))
    await rpc.start()
    try:
        artifact_id = new_id("artifact")
        command = CreateArtifact(
            command_id=new_id("cmd"),
            session_id=session_id,
            artifact=ArtifactRef(
                artifact_id=artifact_id,
                session_id=session_id,
                path=path,
                filename=path.rsplit("/", 1)[-1],
                mime_type="text/markdown",
                size_bytes=size_bytes,
            ),
        )
        raise_for_receipt(await StorageClient(rpc, names).send(command))
        return artifact_id
    finally:
        await rpc.stop()
        await bus.aclose()


async def seed_offloaded_json(redis_url: str, session_id: str, agent_id: str, data: object) -> str:
    """Append a user node holding one large ``json`` block through the bus: the storage-writer
    moves it out of the row into an artifact (what a tool's big JSON result becomes); the
    artifact's id."""
    bus = Bus(make_redis(redis_url))
    names = BusNames("soong")
    rpc = RpcClient(bus, names.reply_channel(f"test-{new_id('cmd')}"))
    await rpc.start()
    try:
        command = AppendNode(
            command_id=new_id("cmd"),
            session_id=session_id,
            node=Node(
                node_id=new_id("node"),
                agent_id=agent_id,
                role=Role.USER,
                content=[JsonBlock(data=data)],
            ),
            event=TimelineEvent(
                event_id=new_id("evt"), event_type=EventType.NODE_CREATED, agent_id=agent_id
            ),
            set_active=False,
        )
        receipt = raise_for_receipt(await StorageClient(rpc, names).send(command))
        [artifact_id] = receipt.result["artifact_ids"]
        return str(artifact_id)
    finally:
        await rpc.stop()
        await bus.aclose()
