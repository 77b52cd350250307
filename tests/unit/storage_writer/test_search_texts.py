"""Reading many of a session's texts at once (``search_texts.node_texts``), as a flush does."""

from __future__ import annotations

import sqlite3

from agent_core.types.protocol import TextBlock, ToolCallBlock
from services.storage_writer.schema import nodes_table
from services.storage_writer.search_texts import node_texts
from services.storage_writer.writer import Writer
from tests.unit.storage_writer.factories import append_node, create_session


def test_many_nodes_are_read_in_chunks_each_with_its_own_text(sqlite_writer: Writer) -> None:
    w = sqlite_writer
    s = create_session()
    texts = [append_node(s, content=[TextBlock(text=f"note {i}")]) for i in range(600)]
    call = append_node(s, content=[ToolCallBlock(id="call_1", name="lookup", arguments={"q": "x"})])
    assert all(r.ok for r in w.apply_batch([s, *texts, call]))
    layout = w.layout
    shard = sqlite3.connect(layout.path(layout.shard_of(s.session_id)))
    try:
        wanted = [c.node.node_id for c in texts] + [call.node.node_id, "node_absent"]
        got = node_texts(shard, s.session_id, [*wanted, texts[0].node.node_id])
        assert {n: got[n] for n in wanted[:600]} == {
            c.node.node_id: f"note {i}" for i, c in enumerate(texts)
        }
        assert got[call.node.node_id] is None  # no text block: nothing to index
        assert "node_absent" not in got and len(got) == 601
        shard.execute(f"DROP TABLE {nodes_table(s.session_id)}")
        assert node_texts(shard, s.session_id, wanted) == {}  # a session deleted meanwhile
    finally:
        shard.close()
