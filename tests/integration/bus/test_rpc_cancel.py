"""A request cancelled in the very step its reply arrives ends cancelled: the caller (a run being
cancelled) does not go on with the reply."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel
from redis.asyncio import Redis

from agent_core.bus import Bus
from agent_core.bus.rpc import RpcClient
from agent_core.ids import new_id


class Ask(BaseModel):
    type: str = "ask"


class Answer(BaseModel):
    ok: bool


async def test_a_cancel_that_lands_with_the_reply_is_not_dropped(bus: Bus, redis: Redis) -> None:
    client = RpcClient(bus, f"replies:{new_id('test')}")
    await client.start()
    try:
        stream = f"asks:{new_id('test')}"
        task = asyncio.create_task(
            client.request(Ask(), stream=stream, reply=Answer, timeout_s=30.0)
        )
        while not await redis.xlen(stream):  # published
            await asyncio.sleep(0.01)
        [reply] = client._waiting.values()
        for _ in range(1000):  # back in request, waiting for the reply
            if task.get_stack()[-1].f_code.co_name == "request":
                break
            await asyncio.sleep(0.01)
        else:
            pytest.fail("the request never came to wait for its reply")
        reply.set_result(b'{"ok": true}')  # the reply arrives, and in the same step the cancel
        task.cancel()
        outcome = await asyncio.gather(task, return_exceptions=True)
        assert task.cancelled(), outcome
    finally:
        await client.stop()
