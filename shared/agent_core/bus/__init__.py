"""The bus: names, message contracts, broker factory, typed consumers, recovery and request/reply.

See ``docs/architecture.md`` ("Bus") for why it is built this way: FastStream reads
new entries; pending entries are recovered here; replies travel over one Pub/Sub channel per process.
"""

from agent_core.bus.broker import make_broker, make_redis
from agent_core.bus.codec import DecodeError, decode_fields, validate_body
from agent_core.bus.consumer import ConsumerOptions, RawEntry, StreamConsumer
from agent_core.bus.dead_letters import DeadLetterSink
from agent_core.bus.delivery import Delivery
from agent_core.bus.names import (
    GROUP_MEMORY,
    GROUP_RUN_WORKERS,
    GROUP_STORAGE,
    GROUP_TASKS,
    SERVICE_NAMES,
    BusNames,
)
from agent_core.bus.publish import publish
from agent_core.bus.recovery import drain_own, reclaim_idle, reclaim_loop
from agent_core.bus.rpc import RpcClient

__all__ = [
    "GROUP_MEMORY",
    "GROUP_RUN_WORKERS",
    "GROUP_STORAGE",
    "GROUP_TASKS",
    "SERVICE_NAMES",
    "BusNames",
    "ConsumerOptions",
    "DeadLetterSink",
    "DecodeError",
    "Delivery",
    "RawEntry",
    "RpcClient",
    "StreamConsumer",
    "decode_fields",
    "drain_own",
    "make_broker",
    "make_redis",
    "publish",
    "reclaim_idle",
    "reclaim_loop",
    "validate_body",
]
