"""A big session for the console's windowed views and their bench: ``nodes`` nodes on one path
(user and assistant messages in turn), appended through the storage writer as runs append
theirs, so the session is exactly what a long conversation leaves."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor

import httpx

from agent_core.bus import Bus, BusNames, RpcClient, make_redis
from agent_core.bus.contracts.storage import AppendNode
from agent_core.ids import new_id
from agent_core.storage_client import StorageClient, raise_for_receipt
from agent_core.types.enums import EventType, Role
from agent_core.types.protocol import TextBlock
from agent_core.types.runtime import Node, TimelineEvent
from tests.conftest import Stack

# Commands in flight at once: the writer takes them in the order they were sent (one stream).
WINDOW = 32


def big_session(stack: Stack, nodes: int = 2500, *, title: str = "big") -> str:
    """A new session of ``stack`` holding ``nodes`` message nodes on its active path; its id."""
    headers = {"Authorization": f"Bearer {stack.api_key}"}
    with httpx.Client(base_url=stack.gateway_url, headers=headers, timeout=30) as c:
        made = c.post("/v1/sessions", json={"metadata": {"title": title}})
        assert made.status_code == 201, made.text
        session = made.json()
    redis_url = json.loads((stack.home / "run" / "stack.json").read_text())["redis_url"]
    coro = _append(redis_url, session["session_id"], session["root_agent_id"], nodes)
    # A thread of its own: the caller may run an event loop already (Playwright's sync API).
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, coro).result()
    return str(session["session_id"])


def _node(session_id: str, agent_id: str, parent: str | None, i: int) -> AppendNode:
    role = Role.USER if i % 2 == 0 else Role.ASSISTANT
    words = f"message {i}: " + " ".join(f"w{i}-{k}" for k in range(12 + i % 20))
    node_id = new_id("node")
    return AppendNode(
        command_id=new_id("cmd"),
        session_id=session_id,
        node=Node(
            node_id=node_id,
            parent_id=parent,
            agent_id=agent_id,
            role=role,
            content=[TextBlock(text=words)],
        ),
        event=TimelineEvent(
            event_id=new_id("evt"), event_type=EventType.NODE_CREATED, agent_id=agent_id
        ),
    )


async def _append(redis_url: str, session_id: str, agent_id: str, count: int) -> None:
    bus = Bus(make_redis(redis_url))
    names = BusNames("soong")
    rpc = RpcClient(bus, names.reply_channel(f"test-{new_id('cmd')}"))
    await rpc.start()
    try:
        client = StorageClient(rpc, names)
        parent: str | None = None
        commands = []
        for i in range(count):
            command = _node(session_id, agent_id, parent, i)
            parent = command.node.node_id
            commands.append(command)
        for start in range(0, count, WINDOW):
            # Sent in order (each task's first step is its send), answered in any order.
            receipts = await asyncio.gather(
                *(client.send(c) for c in commands[start : start + WINDOW])
            )
            for receipt in receipts:
                raise_for_receipt(receipt)
    finally:
        await rpc.stop()
        await bus.aclose()
