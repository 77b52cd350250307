"""Typed helpers to talk to the memory-extraction service over the bus.

- the run-worker: :func:`publish_interaction` after a main run (no LLM on the request path) and
  :meth:`MemoryClient.render` at run start (the ``# 个性化记忆`` text);
- the gateway: :meth:`MemoryClient.read` / :meth:`MemoryClient.write` of one memory file with
  optimistic concurrency (``etag`` / ``if_match``; a stale ``if_match`` raises
  :class:`~agent_core.errors.StorageError` with code :data:`PRECONDITION_FAILED`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from redis.asyncio import Redis

from agent_core.bus import BusNames, RpcClient, publish
from agent_core.bus.contracts.memory import (
    Interaction,
    MemoryReply,
    ReadMemory,
    RenderMemory,
    WriteMemory,
)
from agent_core.errors import (
    AgentCoreError,
    ErrorPayload,
    SchemaError,
    StorageError,
)

__all__ = [
    "PRECONDITION_FAILED",
    "MemoryClient",
    "MemoryFile",
    "RenderedMemory",
    "publish_interaction",
]

PRECONDITION_FAILED = "precondition_failed"
_ERRORS: dict[str, type[AgentCoreError]] = {
    StorageError.error_type: StorageError,
    SchemaError.error_type: SchemaError,
}


class MemoryFile(BaseModel):
    """One memory file as the API sees it: raw Markdown and its ETag (``None``: no file yet)."""

    model_config = ConfigDict(extra="forbid")

    scope: str
    content: str
    etag: str | None = None


class RenderedMemory(BaseModel):
    """The injection text of a run (``""`` when the account has no memory)."""

    model_config = ConfigDict(extra="forbid")

    text: str


async def publish_interaction(
    redis: Redis, names: BusNames, interaction: Interaction, *, maxlen: int = 100_000
) -> None:
    """Append ``interaction`` to the memory stream (one XADD; consolidation happens later)."""
    await publish(redis, names.memory_interactions, interaction, maxlen=maxlen)


def _raise(error: ErrorPayload | None) -> None:
    if error is None:
        raise AgentCoreError("memory_error", "memory-extraction answered without a result")
    cls = _ERRORS.get(error.type, AgentCoreError)
    raise cls(error.code, error.message, retryable=error.retryable, details=error.details)


class MemoryClient:
    """Request/reply with the memory-extraction service through a started :class:`RpcClient`."""

    def __init__(self, rpc: RpcClient, names: BusNames, *, timeout_s: float = 5.0) -> None:
        self.rpc = rpc
        self.names = names
        self.timeout_s = timeout_s

    async def _ask(self, message: RenderMemory | ReadMemory | WriteMemory) -> MemoryReply:
        reply = await self.rpc.request(
            message, stream=self.names.memory_queries, reply=MemoryReply, timeout_s=self.timeout_s
        )
        if not reply.ok:
            _raise(reply.error)
        return reply

    async def render(self, account_id: str, skills: list[str]) -> str:
        """The memory text to inject for a run with ``skills`` enabled."""
        reply = await self._ask(RenderMemory(account_id=account_id, skills=skills))
        return RenderedMemory.model_validate(reply.data).text

    async def read(self, account_id: str, scope: str) -> MemoryFile:
        """``user.md`` (``scope="user"``) or ``skills/<name>.md`` (``"skill:<name>"``)."""
        reply = await self._ask(ReadMemory(account_id=account_id, scope=scope))
        return MemoryFile.model_validate(reply.data)

    async def write(
        self, account_id: str, scope: str, content: str, *, if_match: str | None
    ) -> MemoryFile:
        """Replace the file if its ETag still equals ``if_match`` (``None``: unconditionally)."""
        message = WriteMemory(
            account_id=account_id, scope=scope, content=content, if_match=if_match
        )
        reply = await self._ask(message)
        return MemoryFile.model_validate(reply.data)
