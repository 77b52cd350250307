"""The account-level search index and session deletion, on the writer's real SQLite files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from agent_core.bus.contracts.storage import (
    DeleteSession,
    ListAuditEvents,
    SearchSessions,
    UpdateSession,
)
from agent_core.ids import new_id
from agent_core.types.enums import SessionStatus
from agent_core.types.protocol import TextBlock
from services.storage_writer.queries import QueryEngine
from services.storage_writer.search_query import match_expression
from services.storage_writer.shards import open_catalog
from services.storage_writer.writer import Writer
from tests.unit.storage_writer.conftest import read_rows
from tests.unit.storage_writer.factories import append_node, create_run, create_session


def _search(
    writer: Writer | None, engine: QueryEngine, q: str, account: str = "acct_a", **kw: object
) -> list[str]:
    """The sessions a search finds, once the writer's pending index rows are flushed (as the
    service does before it answers a search)."""
    if writer is not None:
        writer.flush_index()
    query = SearchSessions(account_id=account, q=q, **kw)  # type: ignore[arg-type]
    return [m.session.session_id for m in query.reply_of(engine.answer(query))]


def _text(session: object, text: str) -> object:
    return append_node(session, content=[TextBlock(text=text)])  # type: ignore[arg-type]


def test_search_finds_titles_and_message_text_newest_first(
    writer: Writer, engine: QueryEngine
) -> None:
    titled = create_session().model_copy(update={"metadata": {"title": "Quarterly Café report"}})
    talk = create_session()
    other = create_session(account="acct_b")
    writer.apply_batch([titled, talk, other])
    writer.apply_batch([_text(talk, "please deploy the kiwi service"), _text(other, "kiwi too")])
    assert _search(writer, engine, "cafe") == [titled.session_id]  # accents and case folded
    assert _search(writer, engine, "KIWI") == [
        talk.session_id
    ]  # another account's rows never match
    assert _search(writer, engine, "kiwi", "acct_b") == [other.session_id]
    assert _search(writer, engine, "deplo") == [talk.session_id]  # the last word as a prefix
    assert _search(writer, engine, "kiwi report") == []  # every word, in one text
    writer.apply_batch([_text(titled, "a kiwi, finally")])
    assert _search(writer, engine, "kiwi") == [titled.session_id, talk.session_id]
    assert _search(writer, engine, "kiwi", limit=1) == [titled.session_id]
    assert _search(writer, engine, '"); DROP TABLE search; --') == []  # no user text is syntax
    writer.flush_index()
    [match] = SearchSessions(account_id="acct_a", q="deploy").reply_of(
        engine.answer(SearchSessions(account_id="acct_a", q="deploy"))
    )
    assert "[deploy]" in match.snippet and match.node_id is not None


def test_a_new_title_replaces_the_old_and_status_filters(
    writer: Writer, engine: QueryEngine
) -> None:
    s = create_session().model_copy(update={"metadata": {"title": "alpha"}})
    writer.apply_batch([s])
    rename = UpdateSession(
        command_id=new_id("cmd"),
        session_id=s.session_id,
        metadata={"title": "beta"},
        status=SessionStatus.ARCHIVED,
    )
    writer.apply_batch([rename])
    assert _search(writer, engine, "alpha") == []
    assert _search(writer, engine, "beta") == [s.session_id]
    assert _search(writer, engine, "beta", status=SessionStatus.ACTIVE) == []


def test_a_refused_command_leaves_no_index_row(writer: Writer, engine: QueryEngine) -> None:
    s = create_session()
    writer.apply_batch([s])
    orphan = _text(s, "ghostword").model_copy(update={"session_id": "sess_" + "0" * 26})
    dup_parent = append_node(s, parent_id="node_missing", content=[TextBlock(text="ghostword")])
    receipts = writer.apply_batch([orphan, dup_parent])
    assert not any(r.ok for r in receipts)
    assert _search(writer, engine, "ghostword") == []


def test_delete_session_removes_rows_tables_index_and_files_and_audits(
    writer: Writer, engine: QueryEngine
) -> None:
    s = create_session().model_copy(update={"metadata": {"title": "doomed"}})
    keep = create_session().model_copy(update={"metadata": {"title": "doomed too"}})
    writer.apply_batch([s, keep, _text(s, "zebra")])
    files = writer.data_dir / s.session_id
    files.mkdir(parents=True)
    (files / "x.json").write_text("{}")
    delete = DeleteSession(command_id=new_id("cmd"), session_id=s.session_id, account_id="acct_a")
    [done] = writer.apply_batch([delete])
    assert done.ok and done.result["nodes"] == 1
    assert (
        _search(writer, engine, "doomed") == [keep.session_id]
        and _search(writer, engine, "zebra") == []
    )
    assert not files.exists()
    sid = s.session_id
    if getattr(writer, "dsn", None) is None:  # SQLite: the session's own tables are dropped
        tables = [r[0] for r in read_rows(writer, sid, "SELECT name FROM sqlite_schema")]
        assert not any(sid in t for t in tables)
    else:  # PostgreSQL: its rows of the shared tables are deleted
        for table in ("nodes", "events"):
            count = f"SELECT count(*) FROM {table} WHERE session_id = '{sid}'"
            assert read_rows(writer, sid, count) == [(0,)]
    assert read_rows(writer, sid, f"SELECT 1 FROM sessions WHERE session_id = '{sid}'") == []
    [again] = writer.apply_batch([delete])  # a redelivered delete answers as before
    assert again.ok and again.duplicate
    audit = ListAuditEvents(account_id="acct_a")
    [event] = audit.reply_of(engine.answer(audit))
    assert (event.event_type, event.session_id) == ("session_deleted", s.session_id)
    assert event.event_id == done.result["audit_event_id"] and '"doomed"' in str(event.payload_json)
    assert (
        ListAuditEvents(account_id="acct_b").reply_of(
            engine.answer(ListAuditEvents(account_id="acct_b"))
        )
        == []
    )


def test_delete_is_refused_while_a_run_is_active_or_for_another_account(writer: Writer) -> None:
    s = create_session()
    run = create_run(s)
    writer.apply_batch([s, run])
    busy = DeleteSession(command_id=new_id("cmd"), session_id=s.session_id, account_id="acct_a")
    stranger = DeleteSession(command_id=new_id("cmd"), session_id=s.session_id, account_id="acct_b")
    refused, foreign = writer.apply_batch([busy, stranger])
    assert refused.error is not None and refused.error.code == "runs_active"
    assert refused.error.details["run_ids"] == [run.run_id]
    assert foreign.error is not None and foreign.error.code == "session_not_found"


def test_an_older_catalog_gets_its_index_built_from_the_shards(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    layout = open_catalog(db, shard_count=2)
    w = Writer(layout, tmp_path / "artifacts", 1024)
    s = create_session().model_copy(update={"metadata": {"title": "legacy"}})
    w.apply_batch([s, _text(s, "ancient words")])
    w.close()
    catalog = sqlite3.connect(db)  # back to a catalog without the index
    for table in ("search", "search_rows", "account_audit"):
        catalog.execute(f"DROP TABLE {table}")
    catalog.execute("DELETE FROM schema_migrations WHERE version IN (2, 3, 4)")
    catalog.commit()
    catalog.close()
    engine = QueryEngine(open_catalog(db))
    try:
        assert _search(None, engine, "ancient") == [s.session_id]
        assert _search(None, engine, "legacy") == [s.session_id]
    finally:
        engine.close()


def test_a_query_without_words_matches_nothing() -> None:
    assert match_expression("acct_a", " ,;!? ") is None
