"""The AsyncAPI document of the bus, generated from the message contracts."""

from __future__ import annotations

import json
from typing import Any

from faststream import FastStream
from faststream.redis import StreamSub
from faststream.specification import AsyncAPI

from agent_core.bus.broker import make_broker
from agent_core.bus.contracts import dead_letter, health, memory, runs, storage, tasks
from agent_core.bus.names import (
    GROUP_MEMORY,
    GROUP_RUN_WORKERS,
    GROUP_STORAGE,
    GROUP_TASKS,
    BusNames,
)

__all__ = ["asyncapi_document"]


def asyncapi_document(names: BusNames | None = None) -> str:
    """The AsyncAPI 3.0 document (JSON, stable key order) for the default namespace."""
    names = names or BusNames()
    broker = make_broker("redis://127.0.0.1:6379")  # never connected: only described
    channels: list[tuple[str, str | None, Any, str]] = [
        (names.runs, GROUP_RUN_WORKERS, runs.RunsMessage, "Run nudges: a session's FIFO has runs."),
        (
            names.storage_commands(),
            GROUP_STORAGE,
            storage.StorageCommand,
            "Storage commands (group commit); partition p > 0 of [storage] partitions reads "
            "the same address with ':<p>' appended.",
        ),
        (
            names.storage_queries,
            GROUP_STORAGE,
            storage.StorageQuery,
            "Storage queries (request/reply).",
        ),
        (names.task_commands, GROUP_TASKS, tasks.TaskMessage, "Task DAG commands and queries."),
        (
            names.memory_interactions,
            GROUP_MEMORY,
            memory.MemoryInteractionMessage,
            "Finished interactions.",
        ),
        (names.memory_queries, GROUP_MEMORY, memory.MemoryQuery, "Memory render/read/write."),
        (names.health("<service>"), "health-<service>", health.HealthMessage, "Health pings."),
        (names.dead_letter, None, dead_letter.DeadLetter, "Dead letters with their reason."),
    ]
    for stream, group, schema, description in channels:
        sub = StreamSub(stream, group=group, consumer="<instance>") if group else StreamSub(stream)

        async def handler(body: Any) -> None:  # pragma: no cover - never called
            return None

        broker.subscriber(stream=sub, title=stream, description=description)(handler)
        broker.publisher(stream=stream, title=f"{stream}:publish", schema=schema)
    replies = [
        ("storage receipts", storage.CommandReceipt),
        ("storage query replies", storage.QueryReply),
        ("task replies", tasks.TaskReply),
        ("memory replies", memory.MemoryReply),
        ("health replies", health.HealthReply),
    ]
    for title, model in replies:
        broker.publisher(
            channel=names.reply_channel("<instance>"),
            title=f"reply:{title}",
            schema=model,
            description=(
                "Replies travel on the requester's Pub/Sub channel: classic PUBLISH/SUBSCRIBE on"
                " one node, sharded SPUBLISH/SSUBSCRIBE on a Cluster."
            ),
        )
    app = FastStream(
        broker,
        specification=AsyncAPI(title="soong-agent bus", version="1.0.0", schema_version="3.0.0"),
    )
    document = json.loads(app.schema.to_specification().to_json())
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
