"""The worker's path reads against the real writer: incremental, and equal to a full read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_core.bus import BusNames
from agent_core.bus.contracts.storage import (
    GetActivePath,
    QueryReply,
    StorageQuery,
    SwitchActiveNode,
)
from agent_core.ids import new_id
from agent_core.storage_client import StorageClient
from services.run_worker.reads import RunReads
from tests.integration.storage_writer.helpers import (
    in_process_writer,
    storage_client,
    writer_settings,
)
from tests.unit.storage_writer.factories import append_node, create_session


class _Recording:
    """The real client, remembering how many rows each path read carried."""

    def __init__(self, client: StorageClient) -> None:
        self._client = client
        self.rows: list[int] = []

    async def query(self, query: StorageQuery) -> QueryReply:
        reply = await self._client.query(query)
        if isinstance(query, GetActivePath) and isinstance(reply.data, list):
            self.rows.append(len(reply.data))
        return reply


async def test_active_path_reads_only_new_nodes_and_matches_a_full_read(
    tmp_path: Path, redis_url: str, names: BusNames
) -> None:
    settings = writer_settings(tmp_path, redis_url, names)
    s = create_session()
    async with in_process_writer(settings), storage_client(redis_url, names) as client:
        recording = _Recording(client)
        reads = RunReads(recording)  # type: ignore[arg-type]
        full = RunReads(client)  # no history: reads whole paths

        async def extend(parent: str | None, n: int) -> str | None:
            for _ in range(n):
                cmd = append_node(s, parent_id=parent)
                assert (await client.send(cmd)).ok
                parent = cmd.node.node_id
            return parent

        def ids(path: list[Any] | None) -> list[str]:
            assert path is not None
            return [node.node_id for node in path]

        assert (await client.send(s)).ok
        first = await extend(None, 30)
        assert len(ids(await reads.active_path(s.session_id))) == 30
        tip = await extend(first, 4)
        path = await reads.active_path(s.session_id)
        assert ids(path) == ids(await full.active_path(s.session_id))
        assert len(ids(path)) == 34 and recording.rows == [30, 4]  # the second read: 4 rows
        assert ids(await reads.active_path(s.session_id)) == ids(path)  # nothing new: no rows
        assert recording.rows[-1] == 0

        # The user moves to an earlier node and branches: the held path is no prefix any more.
        fork = ids(path)[9]
        switch = SwitchActiveNode(command_id=new_id("cmd"), session_id=s.session_id, node_id=fork)
        assert (await client.send(switch)).ok
        branch_tip = await extend(fork, 2)
        branched = await reads.active_path(s.session_id)
        assert ids(branched) == ids(await full.active_path(s.session_id))
        assert ids(branched)[-1] == branch_tip and len(ids(branched)) == 12
        assert recording.rows[-1] == 12  # a whole path, from the root
        assert tip is not None and await reads.active_path(s.session_id, "node_nope") is None
