"""The SQLite writer's search outbox: texts wait in their shard, committed with what they index,
and reach FTS5 in bulk (``search_outbox.defer_ops``, ``Writer.flush_index``, ``index_flush``)."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agent_core.bus.contracts.storage import DeleteSession, SearchSessions, UpdateSession
from agent_core.config import load_settings
from agent_core.ids import new_id
from agent_core.types.protocol import TextBlock
from services.storage_writer.backends.sqlite import SqliteBackend
from services.storage_writer.index_flush import IndexFlusher
from services.storage_writer.queries import QueryEngine
from services.storage_writer.schema import MIGRATIONS, migrate
from services.storage_writer.search_outbox import OUTBOX_BODY_MAX, flush_outbox
from services.storage_writer.shards import open_catalog, open_shards
from services.storage_writer.writer import Writer
from tests.conftest import REPO
from tests.unit.storage_writer.conftest import index_terms
from tests.unit.storage_writer.factories import append_node, create_session


def _found(engine: QueryEngine, q: str) -> list[str]:
    query = SearchSessions(account_id="acct_a", q=q)
    return [m.session.session_id for m in query.reply_of(engine.answer(query))]


def _searched(writer: Writer, q: str) -> list[str]:
    """What a search finds once every pending row is flushed (a fresh engine)."""
    writer.flush_index()
    engine = QueryEngine(writer.layout)
    try:
        return _found(engine, q)
    finally:
        engine.close()


def _outbox(writer: Writer, session_id: str) -> list[str]:
    """The nodes a session has in the outbox (``''``: its title), read from its shard file."""
    layout = writer.layout
    conn = sqlite3.connect(layout.path(layout.shard_of(session_id)))
    try:
        rows = conn.execute(
            "SELECT node_id FROM search_outbox WHERE session_id = ? ORDER BY seq", (session_id,)
        )
        return [r[0] for r in rows]
    finally:
        conn.close()


def _indexed(writer: Writer, session_id: str) -> int:
    conn = sqlite3.connect(writer.layout.db_path)
    try:
        (count,) = conn.execute(
            "SELECT count(*) FROM search_rows WHERE session_id = ?", (session_id,)
        ).fetchone()
        return int(count)
    finally:
        conn.close()


def _text(session: object, text: str) -> object:
    return append_node(session, content=[TextBlock(text=text)])  # type: ignore[arg-type]


def test_rows_pending_after_a_batch_are_indexed_by_a_flush_and_then_dropped(
    sqlite_writer: Writer,
) -> None:
    w = sqlite_writer
    w.flush_index()  # the start-up scan: nothing left by an earlier run
    s = create_session().model_copy(update={"metadata": {"title": "Pelican notes"}})
    message = _text(s, "the pelican flies north")
    assert all(r.ok for r in w.apply_batch([s, message]))
    assert _outbox(w, s.session_id) == ["", message.node.node_id]  # type: ignore[attr-defined]
    assert w.index_pending == 2 and _indexed(w, s.session_id) == 0
    engine = QueryEngine(w.layout)
    try:
        assert _found(engine, "pelican") == []  # not searchable before a flush
        assert w.flush_index() == 2 and w.index_pending == 0
        assert _found(engine, "pelican") == [s.session_id]
        assert _found(engine, "north") == [s.session_id]
        # Flushed rows are deleted by the shard's next transaction, in which a new title waits.
        rename = UpdateSession(
            command_id=new_id("cmd"), session_id=s.session_id, metadata={"title": "Heron notes"}
        )
        assert w.apply_batch([rename])[0].ok
        assert _outbox(w, s.session_id) == [""]
        w.flush_index()
        assert _found(engine, "pelican notes") == [] and _found(engine, "heron") == [s.session_id]
    finally:
        engine.close()


def test_delete_removes_pending_and_indexed_rows(sqlite_writer: Writer) -> None:
    w = sqlite_writer
    s, keep = create_session(), create_session()
    w.apply_batch([s, keep, _text(s, "walrus indexed"), _text(keep, "walrus kept")])
    w.flush_index()
    w.apply_batch([_text(s, "walrus pending")])
    assert len(_outbox(w, s.session_id)) == 1 and _indexed(w, s.session_id) == 1
    delete = DeleteSession(command_id=new_id("cmd"), session_id=s.session_id, account_id="acct_a")
    assert w.apply_batch([delete])[0].ok
    assert _outbox(w, s.session_id) == [] and _indexed(w, s.session_id) == 0
    assert _searched(w, "walrus") == [keep.session_id]


def _bodies(writer: Writer, session_id: str) -> dict[str, str | None]:
    """node -> the text its outbox row carries (``''``: the title), read from the shard file."""
    layout = writer.layout
    conn = sqlite3.connect(layout.path(layout.shard_of(session_id)))
    try:
        rows = conn.execute(
            "SELECT node_id, body FROM search_outbox WHERE session_id = ?", (session_id,)
        )
        return dict(rows.fetchall())
    finally:
        conn.close()


def test_a_message_row_carries_its_text_unless_long_and_every_text_comes_out_again(
    sqlite_writer: Writer,
) -> None:
    """A short message's row carries the text the flush indexes; a long one's and a title's
    do not (the flush reads them). The index is emptied by the session's deletion, which takes
    each row out with the text read from its node: the carried text was exactly that one."""
    w = sqlite_writer
    s = create_session().model_copy(update={"metadata": {"title": "Egret log"}})
    short = _text(s, "  Café egret,\tsee  the marsh\n")
    long_text = "egret " + "longword " * (OUTBOX_BODY_MAX // 9)
    long = _text(s, long_text)
    assert all(r.ok for r in w.apply_batch([s, short, long]))
    assert _bodies(w, s.session_id) == {
        "": None,
        short.node.node_id: "Café egret,\tsee  the marsh",  # type: ignore[attr-defined]
        long.node.node_id: None,  # type: ignore[attr-defined]
    }
    assert _searched(w, "egret") == [s.session_id]
    assert _searched(w, "marsh") == [s.session_id] and _searched(w, "longword") == [s.session_id]
    assert _searched(w, "log") == [s.session_id]
    delete = DeleteSession(command_id=new_id("cmd"), session_id=s.session_id, account_id="acct_a")
    assert w.apply_batch([delete])[0].ok
    assert index_terms(w.layout.db_path) == {}


def test_rows_an_older_writer_queued_are_indexed_from_their_nodes(sqlite_writer: Writer) -> None:
    w = sqlite_writer
    s = create_session()
    assert all(r.ok for r in w.apply_batch([s, _text(s, "ibis wading")]))
    layout = w.layout
    conn = sqlite3.connect(layout.path(layout.shard_of(s.session_id)))
    try:
        with conn:  # as a writer before the rows carried texts left them
            conn.execute("UPDATE search_outbox SET body = NULL")
    finally:
        conn.close()
    assert _searched(w, "ibis") == [s.session_id]


_CRASH = """
import sys
from pathlib import Path
from services.storage_writer.shards import open_catalog
from services.storage_writer.writer import Writer
from tests.unit.storage_writer.factories import append_node, create_session
from agent_core.types.protocol import TextBlock
home = Path(sys.argv[1])
w = Writer(open_catalog(home / "sessions.sqlite", shard_count=2), home / "artifacts", 1024)
s = create_session()
assert all(r.ok for r in w.apply_batch([s, append_node(s, content=[TextBlock(text="phoenix")])]))
print(s.session_id, flush=True)
import os
os._exit(0)  # dies as a killed writer would: no close, no flush
"""


@pytest.mark.parametrize("counted_at_open", [False, True])
def test_pending_rows_survive_a_crash_and_are_drained_at_start(
    tmp_path: Path, counted_at_open: bool
) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _CRASH, str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    sid = out.stdout.strip()
    backend = None
    if counted_at_open:  # as the service opens it: the rows left are counted with the files
        settings = load_settings(env={"SOONG_AGENT_HOME": str(tmp_path)})
        backend = asyncio.run(SqliteBackend.open(settings))
        w = backend.writer
    else:
        w = Writer(open_catalog(tmp_path / "sessions.sqlite"), tmp_path / "artifacts", 1024)
    try:
        assert _indexed(w, sid) == 0 and len(_outbox(w, sid)) == 1
        # Counted: exactly the row left; otherwise unknown until the first flush scans.
        assert w.index_pending == 1 if counted_at_open else w.index_pending
        assert w.flush_index() == 1 and w.index_pending == 0
        engine = QueryEngine(w.layout)
        try:
            assert _found(engine, "phoenix") == [sid]
        finally:
            engine.close()
    finally:
        w.close()
        if backend is not None:
            backend.engine.close()
            backend.lock.release()
    assert _outbox(w, sid) == []  # a clean close deletes what was flushed


def test_a_home_opened_with_nothing_left_has_nothing_pending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No first flush to scan every shard: the service schedules none at start, and the writer
    has every shard's connection from the start, so no batch waits behind one being opened."""
    assert open_shards(tmp_path / "s.sqlite").outbox_left == {}
    settings = load_settings(env={"SOONG_AGENT_HOME": str(tmp_path)})
    backend = asyncio.run(SqliteBackend.open(settings))
    w = backend.writer
    opened: list[Path] = []
    connect = Writer.connect

    def counted(path: Path) -> sqlite3.Connection:
        opened.append(path)
        return connect(path)

    monkeypatch.setattr(Writer, "connect", staticmethod(counted))
    try:
        assert w.index_pending == 0 and w.plan_flush() is None
        s = create_session()
        assert all(r.ok for r in w.apply_batch([s, append_node(s, content=[TextBlock(text="x")])]))
        assert w.index_pending == 1 and w.flush_index() == 1 and w.index_pending == 0
        # The writer started with every shard's connection, opened with the files: the command
        # opened only the catalog's, for the flush.
        assert opened == [w.layout.db_path]
    finally:
        w.close()
        backend.engine.close()
        backend.lock.release()


def test_an_existing_shard_gets_the_outbox_by_migration(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "old.sqlite", isolation_level=None)
    try:
        assert migrate(conn, MIGRATIONS[:5]) == [1, 2, 3, 4, 5]  # a home of the version before
        assert migrate(conn) == [6, 7, 8]
        columns = [r[1] for r in conn.execute("PRAGMA table_info(search_outbox)")]
        assert columns == ["seq", "session_id", "node_id", "body"]
        (sql,) = conn.execute(
            "SELECT sql FROM sqlite_schema WHERE name = 'search_outbox'"
        ).fetchone()
        assert "AUTOINCREMENT" in sql  # seqs never given twice (see the next test)
    finally:
        conn.close()


async def test_the_flusher_indexes_pending_rows_after_a_batch_without_a_search(
    sqlite_writer: Writer,
) -> None:
    w = sqlite_writer
    thread = ThreadPoolExecutor(1)
    loop = asyncio.get_running_loop()
    flusher = IndexFlusher(w, thread, delay_s=0.01)
    try:
        s = create_session()
        await loop.run_in_executor(thread, w.apply_batch, [s, _text(s, "osprey")])
        flusher.after_batch()
        for _ in range(3000):  # bounds a hang only (30 s)
            if w.index_pending == 0:
                break
            await asyncio.sleep(0.01)
        assert _indexed(w, s.session_id) == 1
    finally:
        await flusher.close()
        thread.shutdown()


def test_a_flush_beside_the_writer_never_has_an_unindexed_row_deleted(
    sqlite_writer: Writer,
) -> None:
    """A flush reads a shard's outbox on connections of its own (as the index's process does)
    while the writer deletes a session, which empties that outbox, and queues another session's
    message. Its seq must be new: the writer then deletes every row up to the last seq the flush
    read, and a reused seq was deleted without being indexed."""
    w = sqlite_writer
    x, y = create_session(), create_session()
    while w.layout.shard_of(y.session_id) != w.layout.shard_of(x.session_id):
        y = create_session()
    w.apply_batch([x, y])
    w.flush_index()
    w.apply_batch([_text(x, "beta three")])
    plan = w.plan_flush()
    assert plan is not None
    catalog = sqlite3.connect(w.layout.db_path, isolation_level=None)
    shards = {s: sqlite3.connect(w.layout.path(s), isolation_level=None) for s in plan.after}
    try:
        last, moved = flush_outbox(catalog, {s: (shards[s], a) for s, a in plan.after.items()})
    finally:
        for conn in (catalog, *shards.values()):
            conn.close()
    delete = DeleteSession(command_id=new_id("cmd"), session_id=x.session_id, account_id="acct_a")
    assert all(r.ok for r in w.apply_batch([delete, _text(y, "gamma needle")]))
    w.record_flush(plan, last, moved)
    w.apply_batch([_text(y, "delta")])  # deletes the rows up to the flush's last seq
    assert _searched(w, "needle") == [y.session_id]
