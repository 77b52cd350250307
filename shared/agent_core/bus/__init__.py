"""The bus: names, message contracts, the Redis client, typed consumers, recovery and request/reply.

See ``docs/architecture.md`` ("Bus") for why it is built this way: each consumer reads its
stream with its own loop; pending entries are recovered here; replies travel over one Pub/Sub
channel per process. FastStream (``agent_core.bus.broker``) only describes the bus.

Only the names are imported eagerly: the rest (``publish`` included) loads on first use, so a
command that needs a stream's name (``soong-agent keys``) and the HTTP SDK, which reaches the
names through the memory types, do not pay for importing redis-py, hiredis or the broker.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agent_core.bus.names import (
    GROUP_MEMORY,
    GROUP_RUN_WORKERS,
    GROUP_STORAGE,
    GROUP_TASKS,
    SERVICE_NAMES,
    BusNames,
)

if TYPE_CHECKING:
    from agent_core.bus.calls import Bus
    from agent_core.bus.codec import DecodeError, decode_fields, validate_body
    from agent_core.bus.connection import make_redis
    from agent_core.bus.consumer import ConsumerOptions, RawEntry, StreamConsumer
    from agent_core.bus.dead_letters import DeadLetterSink
    from agent_core.bus.delivery import Delivery
    from agent_core.bus.publishing import publish
    from agent_core.bus.recovery import drain_own, hand_back, reclaim_idle, reclaim_loop
    from agent_core.bus.rpc import RpcClient

# name → the submodule that defines it, imported when the name is first asked for
_LAZY = {
    "Bus": "calls",
    "make_redis": "connection",
    "DecodeError": "codec",
    "decode_fields": "codec",
    "validate_body": "codec",
    "ConsumerOptions": "consumer",
    "RawEntry": "consumer",
    "StreamConsumer": "consumer",
    "DeadLetterSink": "dead_letters",
    "Delivery": "delivery",
    "drain_own": "recovery",
    "hand_back": "recovery",
    "reclaim_idle": "recovery",
    "reclaim_loop": "recovery",
    "RpcClient": "rpc",
    # Its module is not named ``publish``: importing it would bind the package attribute to
    # the module. Lazy like the rest, so a user of the names (the HTTP SDK through the memory
    # types) loads no redis-py nor hiredis.
    "publish": "publishing",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # once: later lookups are plain module attributes
    return value


__all__ = [
    "GROUP_MEMORY",
    "GROUP_RUN_WORKERS",
    "GROUP_STORAGE",
    "GROUP_TASKS",
    "SERVICE_NAMES",
    "Bus",
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
    "hand_back",
    "make_redis",
    "publish",
    "reclaim_idle",
    "reclaim_loop",
    "validate_body",
]
