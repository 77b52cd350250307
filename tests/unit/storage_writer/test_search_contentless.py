"""The search index keeps no copy of the texts (a contentless FTS5 table, catalog migration 3):
what the index holds after titles change, batches are applied again and sessions go, on the
writer's real SQLite files; and a catalog of the earlier layout moved onto it."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from agent_core.bus.contracts.storage import DeleteSession, SearchSessions, UpdateSession
from agent_core.ids import new_id
from agent_core.types.protocol import TextBlock
from services.storage_writer.queries import QueryEngine
from services.storage_writer.schema import CATALOG_MIGRATIONS
from services.storage_writer.search_index import IndexOp, apply_ops, scope_token
from services.storage_writer.search_texts import indexed_text
from services.storage_writer.shards import open_catalog
from services.storage_writer.writer import Writer
from tests.unit.storage_writer.conftest import index_terms
from tests.unit.storage_writer.factories import append_node, create_session


def _found(writer: Writer, q: str) -> list[tuple[str, str]]:
    """(session, snippet) of what a search of acct_a finds, once pending rows are indexed."""
    writer.flush_index()
    engine = QueryEngine(writer.layout)
    try:
        query = SearchSessions(account_id="acct_a", q=q)
        return [(m.session.session_id, m.snippet) for m in query.reply_of(engine.answer(query))]
    finally:
        engine.close()


def _catalog_bytes(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (db, Path(f"{db}-wal")) if p.exists())


def _title(session_id: str, title: str) -> UpdateSession:
    return UpdateSession(command_id=new_id("cmd"), session_id=session_id, metadata={"title": title})


def test_the_catalog_keeps_the_words_but_no_copy_of_a_text(sqlite_writer: Writer) -> None:
    s = create_session()
    sentence = "the quarterly revenue grew by nine percent"
    sqlite_writer.apply_batch([s, append_node(s, content=[TextBlock(text=sentence)])])
    [(sid, snippet)] = _found(sqlite_writer, "revenue")
    assert sid == s.session_id and snippet == "the quarterly [revenue] grew by nine percent"
    assert sentence.encode() not in _catalog_bytes(sqlite_writer.layout.db_path)
    terms = index_terms(sqlite_writer.layout.db_path)
    assert {"quarterly", "revenue", "nine", scope_token("acct_a")} <= terms.keys()


def test_renamed_titles_and_deleted_sessions_leave_no_words_behind(sqlite_writer: Writer) -> None:
    gone = create_session().model_copy(update={"metadata": {"title": "alpha plum"}})
    kept = create_session().model_copy(update={"metadata": {"title": "kiwi"}})
    w = sqlite_writer
    w.apply_batch([gone, kept, append_node(gone, content=[TextBlock(text="mango kiwi")])])
    w.flush_index()
    w.apply_batch([_title(gone.session_id, "beta")])
    w.flush_index()
    # Two titles before a flush: the index goes from "beta" to the last one only.
    w.apply_batch([_title(gone.session_id, "gamma"), _title(gone.session_id, "delta plum")])
    assert [sid for sid, _ in _found(w, "plum")] == [gone.session_id]
    assert [snippet for _, snippet in _found(w, "delta")] == ["[delta] plum"]
    assert _found(w, "beta") == [] and _found(w, "alpha") == []
    terms = index_terms(w.layout.db_path)
    assert "alpha" not in terms and "beta" not in terms and "gamma" not in terms
    assert terms["kiwi"] == 2 and terms["mango"] == 1
    delete = DeleteSession(
        command_id=new_id("cmd"), session_id=gone.session_id, account_id="acct_a"
    )
    [done] = w.apply_batch([delete])
    assert done.ok
    w.flush_index()
    assert index_terms(w.layout.db_path) == {"kiwi": 1, scope_token("acct_a"): 1}
    assert [sid for sid, _ in _found(w, "kiwi")] == [kept.session_id]


def test_rows_applied_again_change_nothing(sqlite_writer: Writer) -> None:
    s = create_session().model_copy(update={"metadata": {"title": "plum"}})
    node = append_node(s, content=[TextBlock(text="pear")])
    sqlite_writer.apply_batch([s, node])
    sqlite_writer.flush_index()
    node_id = node.node.node_id
    again = [
        IndexOp(s.session_id, "acct_a", node_id, "pear"),
        IndexOp(s.session_id, "acct_a", "", "plum"),
    ]
    catalog = sqlite3.connect(sqlite_writer.layout.db_path, isolation_level=None)
    try:
        apply_ops(catalog, again)  # as after a crash between the catalog's and a shard's commit
        apply_ops(catalog, again)
    finally:
        catalog.close()
    terms = index_terms(sqlite_writer.layout.db_path)
    assert terms["pear"] == 1 and terms["plum"] == 1 and terms[scope_token("acct_a")] == 2


def test_a_row_whose_text_is_gone_is_never_found(
    sqlite_writer: Writer, caplog: pytest.LogCaptureFixture
) -> None:
    s = create_session()
    sqlite_writer.apply_batch([s, append_node(s, content=[TextBlock(text="quince")])])
    sqlite_writer.flush_index()
    catalog = sqlite3.connect(sqlite_writer.layout.db_path, isolation_level=None)
    try:  # a deletion that does not know the message's text (none of the writer's paths)
        with caplog.at_level(logging.WARNING, "soong.storage_writer"):
            apply_ops(catalog, [IndexOp(s.session_id, "acct_a", None, texts={})])
    finally:
        catalog.close()
    assert "left unreachable" in caplog.text
    assert index_terms(sqlite_writer.layout.db_path)["quince"] == 1  # its words stay ...
    assert _found(sqlite_writer, "quince") == []  # ... and no search returns them
    # ... nor once its rowid would have been the next one given (AUTOINCREMENT)
    other = create_session()
    sqlite_writer.apply_batch([other, append_node(other, content=[TextBlock(text="lemon")])])
    assert [sid for sid, _ in _found(sqlite_writer, "lemon")] == [other.session_id]
    assert _found(sqlite_writer, "quince") == []


def _back_to_the_copying_layout(db: Path) -> None:
    """Turn a catalog into migration 2's layout: an FTS5 table holding a copy of each text (as
    the writer made it before migration 3), filled from what the index holds now."""
    layout = open_catalog(db)
    conn = sqlite3.connect(db, isolation_level=None)
    rows = conn.execute("SELECT row_id, session_id, node_id, title FROM search_rows").fetchall()
    copies = []
    for row_id, sid, node_id, title in rows:
        shard = sqlite3.connect(layout.path(layout.shard_of(sid)))
        (account,) = shard.execute(
            "SELECT account_id FROM sessions WHERE session_id = ?", (sid,)
        ).fetchone()
        copies.append(
            (row_id, indexed_text(shard, sid, node_id, title), scope_token(account), sid, node_id)
        )
        shard.close()
    conn.executescript(
        """BEGIN;
        DROP TABLE search;
        CREATE VIRTUAL TABLE search USING fts5(
            body, scope, session_id UNINDEXED, node_id UNINDEXED,
            tokenize = 'unicode61 remove_diacritics 2');
        DROP TABLE search_rows;
        CREATE TABLE search_rows (
            row_id INTEGER PRIMARY KEY, session_id TEXT NOT NULL, node_id TEXT NOT NULL,
            UNIQUE (session_id, node_id));
        DELETE FROM schema_migrations WHERE version = 3;
        COMMIT;"""
    )
    conn.executemany(
        "INSERT INTO search (rowid, body, scope, session_id, node_id) VALUES (?, ?, ?, ?, ?)",
        copies,
    )
    conn.executemany(
        "INSERT INTO search_rows (row_id, session_id, node_id) VALUES (?, ?, ?)",
        [(row_id, sid, node_id) for row_id, _, _, sid, node_id in copies],
    )
    conn.close()


def test_a_catalog_that_copied_its_texts_moves_onto_the_contentless_index(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    w = Writer(open_catalog(db, shard_count=2), tmp_path / "artifacts", 1024)
    s = create_session().model_copy(update={"metadata": {"title": "old plum"}})
    w.apply_batch([s, append_node(s, content=[TextBlock(text="the legacy orchard report")])])
    w.flush_index()
    w.close()
    _back_to_the_copying_layout(db)
    assert b"the legacy orchard report" in _catalog_bytes(db)  # the copy this migration drops
    w = Writer(open_catalog(db), tmp_path / "artifacts", 1024)
    try:
        assert [snippet for _, snippet in _found(w, "orchard")] == ["the legacy [orchard] report"]
        assert [snippet for _, snippet in _found(w, "plum")] == ["old [plum]"]
        w.apply_batch([_title(s.session_id, "new pear")])  # the kept title takes the old out
        assert _found(w, "plum") == [] and len(_found(w, "pear")) == 1
        delete = DeleteSession(
            command_id=new_id("cmd"), session_id=s.session_id, account_id="acct_a"
        )
        assert w.apply_batch([delete])[0].ok
        w.flush_index()
        assert index_terms(db) == {}
    finally:
        w.close()
    conn = sqlite3.connect(db)
    try:
        newest = max(version for version, _ in CATALOG_MIGRATIONS)
        assert conn.execute("SELECT max(version) FROM schema_migrations").fetchone() == (newest,)
    finally:
        conn.close()


def test_the_text_of_a_session_deleted_meanwhile_is_none(sqlite_writer: Writer) -> None:
    s = create_session()
    node = append_node(s, content=[TextBlock(text="fleeting")])
    sqlite_writer.apply_batch([s, node])
    layout = sqlite_writer.layout
    shard = sqlite3.connect(layout.path(layout.shard_of(s.session_id)))
    try:
        assert indexed_text(shard, s.session_id, node.node.node_id, None) == "fleeting"
        delete = DeleteSession(
            command_id=new_id("cmd"), session_id=s.session_id, account_id="acct_a"
        )
        assert sqlite_writer.apply_batch([delete])[0].ok
        assert indexed_text(shard, s.session_id, node.node.node_id, None) is None
    finally:
        shard.close()
