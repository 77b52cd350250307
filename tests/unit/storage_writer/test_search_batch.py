"""Messages' texts are indexed in batches (``search_index._put_messages``): the index a batch of
ops leaves is the one applying the same ops one at a time leaves, whatever the ops' mix — a
message indexed again, in the same batch or a later one, titles set and cleared between them, a
session deleted — on real SQLite catalogs."""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.storage_writer.search_index import AuditRow, IndexOp, apply_ops
from services.storage_writer.shards import open_catalog

SESSIONS = ("sess_20261207_000000_00000000000000a1", "sess_20261207_000000_00000000000000b2")
NODES = ("node_1", "node_2", "node_3", "node_4")
WORDS = ("wren", "otter", "basalt", "quill", "fern")
# A message's text is a function of its node (it never changes once written).
TEXT = {
    (s, n): f"{WORDS[i % 5]} {WORDS[(i + j) % 5]} m{i}{j}"
    for i, s in enumerate(SESSIONS)
    for j, n in enumerate(NODES)
}


def _message(session: str, node: str) -> IndexOp:
    return IndexOp(session, "acct_a", node, TEXT[session, node])


def _title(session: str, word: str | None) -> IndexOp:
    return IndexOp(session, "acct_a", "", None if word is None else f"title {word}")


def _delete(session: str) -> IndexOp:
    texts = {n: TEXT[session, n] for n in NODES}
    event = f"evt_{next(_EVENTS):016x}"
    audit = AuditRow(event, "acct_a", "session_deleted", session, {}, "2026-12-07T00:00:00+00:00")
    return IndexOp(session, "acct_a", None, texts=texts, audit=audit)


_EVENTS = itertools.count()


OPS = st.one_of(
    st.builds(_message, st.sampled_from(SESSIONS), st.sampled_from(NODES)),
    st.builds(_title, st.sampled_from(SESSIONS), st.sampled_from((*WORDS, None))),
    st.builds(_delete, st.sampled_from(SESSIONS)),
)


def _state(conn: sqlite3.Connection) -> tuple[list[tuple[object, ...]], dict[str, list[int]]]:
    """The rows the index maps and, for each word, the rows a search of it finds (after FTS5's
    own check that every row was taken out with the words it was given)."""
    conn.execute("INSERT INTO search (search) VALUES ('integrity-check')")
    rows = conn.execute("SELECT row_id, session_id, node_id, title FROM search_rows ORDER BY 1")
    found = {
        w: [r for (r,) in conn.execute("SELECT rowid FROM search WHERE search MATCH ?", (w,))]
        for w in (*WORDS, "title")
    }
    return rows.fetchall(), found


@settings(max_examples=60, deadline=None)
@given(batches=st.lists(st.lists(OPS, max_size=12), min_size=1, max_size=4))
def test_a_batch_leaves_the_index_one_op_at_a_time_leaves(
    tmp_path_factory: pytest.TempPathFactory, batches: list[list[IndexOp]]
) -> None:
    base = tmp_path_factory.mktemp("batch")
    together = sqlite3.connect(open_catalog(base / "a.sqlite", 2).db_path, isolation_level=None)
    alone = sqlite3.connect(open_catalog(base / "b.sqlite", 2).db_path, isolation_level=None)
    try:
        for batch in batches:
            apply_ops(together, batch)
            for op in batch:
                apply_ops(alone, [op])
        assert _state(together) == _state(alone)
    finally:
        together.close()
        alone.close()


def test_a_message_twice_in_one_batch_is_indexed_once(tmp_path: Path) -> None:
    conn = sqlite3.connect(open_catalog(tmp_path / "c.sqlite", 2).db_path, isolation_level=None)
    try:
        s, n = SESSIONS[0], NODES[0]
        apply_ops(conn, [_message(s, n), _title(s, "quill"), _message(s, n), _message(s, NODES[1])])
        rows, found = _state(conn)
        assert [(r[1], r[2]) for r in rows] == [(s, n), (s, ""), (s, NODES[1])]
        assert found["title"] == [rows[1][0]]
        apply_ops(conn, [_message(s, n)])  # applied again later: still the one row
        assert _state(conn)[0] == rows
    finally:
        conn.close()
