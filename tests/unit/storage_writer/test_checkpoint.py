"""Checkpoints beside the writer: commits never checkpoint, the checkpointer copies everything."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from agent_core.types.protocol import TextBlock
from services.storage_writer.checkpoint import Checkpointer, CheckpointPolicy
from services.storage_writer.shards import open_catalog
from services.storage_writer.writer import CATALOG, Writer
from tests.unit.storage_writer.factories import append_node, create_session

_PAGE = 4096


def _wal_frames(db: Path) -> int:
    wal = db.with_name(db.name + "-wal")
    return (wal.stat().st_size - 32) // (_PAGE + 24) if wal.exists() else 0


def test_commits_leave_checkpoints_to_the_checkpointer(tmp_path: Path) -> None:
    layout = open_catalog(tmp_path / "sessions.sqlite", shard_count=2)
    writer = Writer(layout, tmp_path / "artifacts", 1 << 20)  # keep the text inline
    s = create_session()
    shard = layout.shard_of(s.session_id)
    path = layout.path(shard)
    try:
        writer.apply_batch([s])
        text = [TextBlock(text="x" * 3000)]  # about a page per node
        for _ in range(15):
            writer.apply_batch([append_node(s, content=text) for _ in range(100)])
        # Past SQLite's default 1,000-page autocheckpoint, which would have restarted the log:
        # the commits left every frame in it.
        assert _wal_frames(path) > 1500
        # Commands applied, session included; the catalog counts the search index's rows
        # (moved there from the shard's outbox by a flush).
        assert writer.flush_index() == 1500
        assert writer.take_dirty() == {shard: 1501, CATALOG: 1500}
        assert writer.take_dirty() == {}  # taken: the next round sees only new writes

        checkpointer = Checkpointer()
        try:
            assert checkpointer.run([path]) == []  # fully copied
        finally:
            checkpointer.close()
        # The next commit restarts the log from its beginning (and trims the file).
        [receipt] = writer.apply_batch([append_node(s)])
        assert receipt.ok and receipt.result["node_seq"] == 1501
        assert _wal_frames(path) < 300
        conn = sqlite3.connect(path)
        try:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        finally:
            conn.close()
    finally:
        writer.close()


def test_policy_checkpoints_busy_shards_by_count_and_quiet_ones_by_age() -> None:
    policy = CheckpointPolicy(commands_due=100, max_age_s=10)
    assert policy.due({1: 60, 2: 5}, now=0) == []
    assert policy.due({1: 40}, now=1) == [1]  # 100 commands since its last checkpoint
    policy.done([1])
    assert policy.due({}, now=9.9) == []
    assert policy.due({3: 1}, now=10) == [2]  # 10 s after shard 2's first unsynced write
    policy.done([2])  # shard 3's clock started at 10
    assert policy.due({}, now=19.9) == []
    assert policy.due({}, now=20) == [3]
    assert policy.due({}, now=21) == [3]  # not done (the round fell behind): due again
