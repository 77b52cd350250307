"""Storage reads the executor needs: typed queries, active paths, a run's last node."""

from __future__ import annotations

from typing import Any

from agent_core.bus.contracts.storage import GetActivePath, GetTree, StorageQuery
from agent_core.errors import StorageError
from agent_core.storage_client import StorageClient
from agent_core.types.mappers import to_node
from agent_core.types.runtime import Node
from agent_core.types.storage import NodeRecord

__all__ = ["RunReads"]


class RunReads:
    """Queries over the storage client; a refused query is a :class:`StorageError`."""

    def __init__(self, storage: StorageClient) -> None:
        self.storage = storage

    async def query(self, query: StorageQuery) -> Any:
        """The reply's data (``None`` when nothing visible matched)."""
        reply = await self.storage.query(query)
        if not reply.ok:
            err = reply.error
            raise StorageError(
                err.code if err else "query_failed", err.message if err else "query failed"
            )
        return reply.data

    async def path_or_none(self, session_id: str, node_id: str | None) -> list[Node] | None:
        """Nodes from the root to ``node_id`` (the active node when ``None``); ``None`` if missing."""
        rows = await self.query(GetActivePath(session_id=session_id, node_id=node_id))
        if rows is None:  # the storage-writer answers a missing node with no data
            return None
        return nodes(rows)

    async def path(self, session_id: str, node_id: str) -> list[Node]:
        """Like :meth:`path_or_none`, but a missing node is an error."""
        found = await self.path_or_none(session_id, node_id)
        if found is None:
            raise StorageError("not_found", "node not found", details={"node_id": node_id})
        return found

    async def last_node_of(self, session_id: str, run_id: str) -> str | None:
        """The newest stored node of ``run_id`` (where a taken-over run stands)."""
        tree = await self.query(GetTree(session_id=session_id))
        own = [n for n in tree if n.get("run_id") == run_id]
        return str(own[-1]["node_id"]) if own else None


def nodes(rows: list[dict[str, Any]]) -> list[Node]:
    """Runtime nodes from stored rows."""
    return [to_node(NodeRecord.model_validate(r)) for r in rows]
