"""Writing to the dead-letter stream: the entry is recorded with its reason, then acknowledged."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime

from redis.asyncio import Redis

from agent_core.bus.contracts.dead_letter import DeadLetter, DeadLetterReason
from agent_core.errors import redact
from agent_core.observability.metrics import DEAD_LETTERS

__all__ = ["DeadLetterSink"]

log = logging.getLogger(__name__)

_PREVIEW_BYTES = 2048
_DLQ_MAXLEN = 100_000


class DeadLetterSink:
    """Moves entries that cannot be processed to the dead-letter stream, never silently."""

    def __init__(self, redis: Redis, stream: str) -> None:
        self._redis = redis
        self._stream = stream

    async def put(
        self,
        *,
        source_stream: str,
        group: str,
        entry_id: str,
        reason: DeadLetterReason,
        error: str,
        deliveries: int,
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Record the entry in the dead-letter stream, then XACK it in its source group.

        The record comes first: a crash in between leaves the entry pending and it is
        dead-lettered again (a duplicate record), never lost.
        """
        letter = DeadLetter(
            stream=source_stream,
            group=group,
            entry_id=entry_id,
            reason=reason,
            error=redact(error)[:1000],
            deliveries=deliveries,
            body_preview=redact(body[:_PREVIEW_BYTES].decode("utf-8", "replace")),
            headers={k: redact(v)[:200] for k, v in (headers or {}).items()},
            dead_at=datetime.now(UTC).isoformat(),
        )
        await self._redis.xadd(
            self._stream,
            {"data": letter.model_dump_json()},
            maxlen=_DLQ_MAXLEN,
            approximate=True,
        )
        await self._redis.xack(source_stream, group, entry_id)
        DEAD_LETTERS.labels(source_stream, reason).inc()
        log.warning(
            "dead-lettered %s %s from %s: %s (%s)",
            entry_id,
            reason,
            source_stream,
            letter.error,
            deliveries,
        )
