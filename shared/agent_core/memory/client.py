"""Typed helpers to talk to the memory-extraction service over the bus.

- the run-worker: :func:`publish_interaction` after a main run (no LLM on the request path) and
  :meth:`MemoryClient.render` at run start (the memory block's text);
- the gateway: :meth:`MemoryClient.read` / :meth:`MemoryClient.write` of one memory file with
  optimistic concurrency (``etag`` / ``if_match``; a stale ``if_match`` raises
  :class:`~agent_core.errors.StorageError` with code :data:`PRECONDITION_FAILED`),
  :meth:`MemoryClient.list` of the files, :meth:`MemoryClient.history` of one file (from the
  change log) and :meth:`MemoryClient.restore` of an earlier version.
"""

from __future__ import annotations

from agent_core.bus import BusNames, RpcClient
from agent_core.bus.calls import Bus
from agent_core.bus.contracts.memory import (
    Interaction,
    ListMemory,
    MemoryHistory,
    MemoryReply,
    ReadMemory,
    RenderMemory,
    RestoreMemory,
    WriteMemory,
)
from agent_core.bus.publishing import publish
from agent_core.errors import (
    AgentCoreError,
    ErrorPayload,
    SchemaError,
    StorageError,
)
from agent_core.memory.views import (
    MemoryChange,
    MemoryFile,
    MemoryFileInfo,
    MemoryFiles,
    MemoryHistoryView,
    MemoryVersion,
    RenderedMemory,
)

__all__ = [
    "PRECONDITION_FAILED",
    "MemoryChange",
    "MemoryClient",
    "MemoryFile",
    "MemoryFileInfo",
    "MemoryFiles",
    "MemoryHistoryView",
    "MemoryVersion",
    "RenderedMemory",
    "publish_interaction",
]

PRECONDITION_FAILED = "precondition_failed"
_ERRORS: dict[str, type[AgentCoreError]] = {
    StorageError.error_type: StorageError,
    SchemaError.error_type: SchemaError,
}


async def publish_interaction(
    bus: Bus, names: BusNames, interaction: Interaction, *, maxlen: int = 100_000
) -> None:
    """Append ``interaction`` to the memory stream (one XADD; consolidation happens later)."""
    await publish(bus, names.memory_interactions, interaction, maxlen=maxlen)


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

    async def _ask(
        self,
        message: RenderMemory
        | ReadMemory
        | WriteMemory
        | ListMemory
        | MemoryHistory
        | RestoreMemory,
    ) -> MemoryReply:
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

    async def list(self, account_id: str) -> MemoryFiles:
        """Every memory file of the account."""
        reply = await self._ask(ListMemory(account_id=account_id))
        return MemoryFiles.model_validate(reply.data)

    async def history(self, account_id: str, scope: str, *, limit: int = 50) -> MemoryHistoryView:
        """The versions of one file, newest first."""
        reply = await self._ask(MemoryHistory(account_id=account_id, scope=scope, limit=limit))
        return MemoryHistoryView.model_validate(reply.data)

    async def restore(
        self, account_id: str, scope: str, version: str, *, if_match: str | None
    ) -> MemoryFile:
        """Write ``version`` of the file back (``if_match`` as for :meth:`write`)."""
        message = RestoreMemory(
            account_id=account_id, scope=scope, version=version, if_match=if_match
        )
        reply = await self._ask(message)
        return MemoryFile.model_validate(reply.data)
