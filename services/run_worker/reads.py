"""Storage reads the executor needs: typed queries, active paths, a run's last node."""

from __future__ import annotations

from typing import TypeVar, cast

from agent_core.bus.contracts._replies import TypedQuery
from agent_core.bus.contracts.storage import GetActivePath, GetTree, StorageQuery
from agent_core.errors import StorageError
from agent_core.recent import Recent
from agent_core.storage_client import StorageClient
from agent_core.types.mappers import to_node
from agent_core.types.runtime import Node
from agent_core.types.storage import NodeRecord

__all__ = ["RunReads"]

R = TypeVar("R")


class RunReads:
    """Queries over the storage client; a refused query is a :class:`StorageError`.

    Keeps the last active path read for each of the most recent ``cached_paths`` sessions: nodes
    never change once written, so the next read of a session asks only for the nodes after the
    held path's last one (see :class:`GetActivePath`) instead of the whole, ever longer, path.
    """

    def __init__(self, storage: StorageClient, *, cached_paths: int = 128) -> None:
        self.storage = storage
        self._paths: Recent[str, list[Node]] = Recent(cached_paths)

    async def read(self, query: TypedQuery[R]) -> R:
        """The reply's data, typed by the query (``None`` when nothing visible matched)."""
        return query.reply_of(await self.storage.query(cast("StorageQuery", query)))

    async def active_path(self, session_id: str, node_id: str | None = None) -> list[Node] | None:
        """Nodes from the root to ``node_id`` (the active node when ``None``); ``None`` if missing.

        Reads only the nodes after the path held for the session when the new path extends it.
        """
        held = self.held(session_id)
        after = held[-1].node_id if held else None
        records = await self.read(
            GetActivePath(session_id=session_id, node_id=node_id, after_node_id=after)
        )
        if records is None:
            return None
        return self.extend(session_id, held, records)

    def held(self, session_id: str) -> list[Node]:
        """The path held for the session (empty when none): a path read may ask only for the
        nodes after its last one. Never changed in place (so it may be held across an await)."""
        return self._paths.get(session_id) or []

    def extend(self, session_id: str, held: list[Node], records: list[NodeRecord]) -> list[Node]:
        """The whole path from ``records`` read after ``held``'s last node (by
        ``get_active_path`` or a claim that returned its path), held for the next read."""
        after = held[-1].node_id if held else None
        new = nodes(records)
        # The writer's walk stopped below ``after`` (a continuation) or reached the root.
        extends = bool(held) and (not new or new[0].parent_id == after)
        path = [*held, *new] if extends else new
        if path:
            self._paths.put(session_id, path)
        return list(path)

    async def path_or_none(self, session_id: str, node_id: str | None) -> list[Node] | None:
        """Nodes from the root to ``node_id`` (the active node when ``None``); ``None`` if missing."""
        records = await self.read(GetActivePath(session_id=session_id, node_id=node_id))
        if records is None:  # the storage-writer answers a missing node with no data
            return None
        return nodes(records)

    async def path(self, session_id: str, node_id: str) -> list[Node]:
        """Like :meth:`path_or_none`, but a missing node is an error."""
        found = await self.path_or_none(session_id, node_id)
        if found is None:
            raise StorageError("not_found", "node not found", details={"node_id": node_id})
        return found

    async def last_node_of(self, session_id: str, run_id: str) -> str | None:
        """The newest stored node of ``run_id`` (where a taken-over run stands)."""
        tree = await self.read(GetTree(session_id=session_id)) or []
        own = [n for n in tree if n.run_id == run_id]
        return own[-1].node_id if own else None

    async def resume_path(self, session_id: str, run_id: str) -> list[Node] | None:
        """The path to ``run_id``'s newest stored node (where a taken-over run stands); ``None``
        when the run stored none. Read it only once the reader's claim has fenced out the run's
        earlier attempts, or one of them may still add a node behind it."""
        last = await self.last_node_of(session_id, run_id)
        return None if last is None else await self.path(session_id, last)


def nodes(records: list[NodeRecord]) -> list[Node]:
    """Runtime nodes from stored rows."""
    return [to_node(r) for r in records]
