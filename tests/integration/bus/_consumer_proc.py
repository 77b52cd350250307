"""A consumer process for the SIGKILL test: it reads entries and then hangs holding them.

Usage: python -m tests.integration.bus._consumer_proc REDIS_URL NAMESPACE CONSUMER_NAME
Each handled message id is pushed to the list ``<ns>:seen:<consumer>`` before the handler blocks.
"""

from __future__ import annotations

import asyncio
import sys

from agent_core.bus import (
    Bus,
    BusNames,
    ConsumerOptions,
    DeadLetterSink,
    StreamConsumer,
    make_redis,
)
from agent_core.bus.contracts.runs import RUNS_MESSAGE, RunsMessage
from agent_core.bus.delivery import Delivery


async def main(url: str, namespace: str, name: str) -> None:
    names = BusNames(namespace)
    bus = Bus(make_redis(url))
    redis = bus.redis

    async def handler(message: RunsMessage, delivery: Delivery) -> None:
        await redis.rpush(names.key("seen", name), delivery.entry_id)
        await asyncio.sleep(3600)  # hold the entry until killed

    consumer = StreamConsumer(
        stream=names.runs,
        group="g",
        consumer=name,
        adapter=RUNS_MESSAGE,
        dead_letters=DeadLetterSink(redis, names.dead_letter),
        bus=bus,
        handler=handler,
        options=ConsumerOptions(max_records=10),
    )
    await consumer.ensure_group()
    consumer.start_reading()
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
