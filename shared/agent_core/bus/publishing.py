"""Publishing a typed message to a stream with plain redis-py.

The entry is ``__data__`` (the message's JSON) plus one field per header. Every consumer of ours
reads it (see :mod:`agent_core.bus.codec`), it costs one XADD with no envelope encoding, and it
keeps working while a service shuts down and its FastStream broker is already stopped. The
current trace context rides along as a ``traceparent`` header (none when nothing is traced).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel

from agent_core.bus.calls import Bus
from agent_core.bus.resp_wire import xadd
from agent_core.observability.tracing import trace_headers

__all__ = ["publish"]


async def publish(
    bus: Bus,
    stream: str,
    message: BaseModel,
    *,
    headers: Mapping[str, str] | None = None,
    maxlen: int | None = 100_000,
) -> str:
    """Append ``message`` to ``stream``; return the entry id.

    The XADD goes through ``bus.calls`` (the lean client, :mod:`agent_core.bus.resp`, where it
    speaks the topology): the same bytes on the wire as redis-py's ``xadd(..., approximate=True)``,
    a fraction of the CPU.
    """
    fields: dict[str, str] = {"__data__": message.model_dump_json()}
    fields.update(trace_headers())
    if headers:
        fields.update(headers)
    entry = await bus.calls.execute(*xadd(stream, fields, maxlen=maxlen))
    return entry.decode() if isinstance(entry, bytes) else str(entry)
