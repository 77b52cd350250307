"""The search index's own process (``index_process``): flushes run in a real child process on the
writer's files, planned and recorded on the writer's thread; a child that dies loses nothing;
a flush that read a session just before its deletion puts nothing of it back."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest

from agent_core.bus.contracts.storage import DeleteSession, SearchSessions
from agent_core.config import load_settings
from agent_core.ids import new_id
from agent_core.types.protocol import TextBlock
from services.storage_writer import index_process
from services.storage_writer.index_flush import IndexFlusher
from services.storage_writer.index_process import IndexProcess, IndexProcessError
from services.storage_writer.queries import QueryEngine
from services.storage_writer.search_index import IndexOp, apply_ops
from services.storage_writer.service import _index_flusher
from services.storage_writer.shards import open_catalog
from services.storage_writer.writer import Writer
from tests.unit.storage_writer.factories import append_node, create_session


class _Rig:
    """A writer on its own thread, its flusher and the index's process, as the service has them."""

    def __init__(self, tmp_path: Path) -> None:
        self.writer = Writer(
            open_catalog(tmp_path / "s.sqlite", shard_count=4), tmp_path / "artifacts", 1024
        )
        self.thread = ThreadPoolExecutor(1)
        self.indexer = IndexProcess(self.writer.layout)
        # No timed flush: each test says when one runs (a search's).
        self.flusher = IndexFlusher(self.writer, self.thread, delay_s=3600, indexer=self.indexer)

    async def apply(self, *commands: object) -> None:
        loop = asyncio.get_running_loop()
        receipts = await loop.run_in_executor(self.thread, self.writer.apply_batch, list(commands))
        assert all(r.ok for r in receipts), receipts

    async def found(self, q: str) -> list[str]:
        """As the service answers a search: every row pending when it came is flushed first."""
        await self.flusher.before_search()
        engine = QueryEngine(self.writer.layout)
        try:
            query = SearchSessions(account_id="acct_a", q=q)
            return [m.session.session_id for m in query.reply_of(engine.answer(query))]
        finally:
            engine.close()

    def outbox_rows(self) -> int:
        total = 0
        for path in self.writer.layout.paths():
            conn = sqlite3.connect(path)
            try:
                total += conn.execute("SELECT count(*) FROM search_outbox").fetchone()[0]
            finally:
                conn.close()
        return total


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[_Rig]:
    r = _Rig(tmp_path)
    await r.indexer.start()
    try:
        yield r
    finally:
        await r.flusher.close()
        await r.indexer.close()
        await asyncio.get_running_loop().run_in_executor(r.thread, r.writer.close)
        r.thread.shutdown()


def _text(session: object, text: str) -> object:
    return append_node(session, content=[TextBlock(text=text)])  # type: ignore[arg-type]


async def test_the_child_indexes_what_the_writer_queued_and_the_writer_drops_it(rig: _Rig) -> None:
    s = create_session()
    await rig.apply(s, _text(s, "the heron flies"))
    assert rig.outbox_rows() == 1 and rig.writer.index_pending > 0
    child = rig.indexer.pid
    assert child is not None and child != os.getpid()
    assert await rig.found("heron") == [s.session_id]
    assert rig.writer.index_pending == 0
    assert rig.outbox_rows() == 1  # indexed; deleted by the shard's next transaction
    await rig.apply(_text(s, "and lands"))
    assert rig.outbox_rows() == 1  # the flushed row went; the new one waits
    assert await rig.found("lands") == [s.session_id]


async def test_a_killed_child_loses_no_row_and_the_next_flush_starts_another(rig: _Rig) -> None:
    s = create_session()
    await rig.apply(s, _text(s, "first osprey"))
    assert await rig.found("osprey") == [s.session_id]
    first = rig.indexer.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    await rig.apply(_text(s, "second kestrel"))
    found: list[str] = []
    for _ in range(3):  # the flush that meets the dead child fails; its rows stay pending
        found = await rig.found("kestrel")
        if found:
            break
    assert found == [s.session_id]
    assert rig.indexer.pid not in (None, first)
    assert rig.writer.index_pending == 0 and await rig.found("osprey") == [s.session_id]


async def test_a_flush_that_read_a_session_before_its_deletion_adds_nothing_of_it(
    rig: _Rig,
) -> None:
    s = create_session()
    await rig.apply(s, _text(s, "doomed wren"))
    # The texts a flush read before the deletion (as the child reads them)...
    early = [IndexOp(s.session_id, "acct_a", new_id("node"), "doomed wren")]
    delete = DeleteSession(command_id=new_id("cmd"), session_id=s.session_id, account_id="acct_a")
    await rig.apply(delete)
    catalog = sqlite3.connect(rig.writer.layout.db_path, isolation_level=None)
    try:  # ... committed after it: skipped, since the catalog recorded the deletion
        apply_ops(catalog, early, flush=True)
        assert catalog.execute("SELECT count(*) FROM search_rows").fetchone() == (0,)
        apply_ops(catalog, early)  # what the check prevents (not a flush: applied)
        assert catalog.execute("SELECT count(*) FROM search_rows").fetchone() == (1,)
    finally:
        catalog.close()


def test_a_bad_request_gets_an_error_reply_and_a_log_line_in_the_services_format(
    tmp_path: Path,
) -> None:
    layout = open_catalog(tmp_path / "s.sqlite", shard_count=2)
    argv = [str(layout.db_path), "2", "INFO", "json", "0", "3"]
    done = subprocess.run(
        [sys.executable, "-m", "services.storage_writer.index_child", *argv],
        input=b'{"after": {"x": 1}}\n{"after": {}}\n',
        capture_output=True,
        timeout=60,
        check=True,
    )
    bad, empty = (json.loads(line) for line in done.stdout.splitlines())
    assert bad["error"].startswith("ValueError") and empty == {"last": {}, "moved": 0}
    [logged] = [json.loads(line) for line in done.stderr.splitlines()]
    assert logged["service"] == "search_index" and logged["level"] == "ERROR"
    assert "search index flush failed" in logged["message"]


async def _ends(pid: int) -> bool:
    """Whether ``pid`` is gone or a zombie within a generous bound (a kill is delivered
    asynchronously, and asyncio's watcher reaps it when it gets to it)."""
    for _ in range(500):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except (FileNotFoundError, ProcessLookupError):  # reaped before or while read
            return True
        if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return True
        await asyncio.sleep(0.01)
    return False


async def test_a_silent_child_is_killed_and_a_closed_process_starts_none(
    rig: _Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    reply_s = index_process._REPLY_S
    monkeypatch.setattr(index_process, "_REPLY_S", 0.5)
    s = create_session()
    await rig.apply(s, _text(s, "stuck swift"))
    stuck = rig.indexer.pid
    assert stuck is not None
    os.kill(stuck, signal.SIGSTOP)  # alive, never answering
    try:
        with pytest.raises(IndexProcessError):
            await rig.indexer.flush({rig.writer.layout.shard_of(s.session_id): 0})
    finally:
        # The kill may already have been reaped (no such process): that is the goal.
        with contextlib.suppress(ProcessLookupError):
            os.kill(stuck, signal.SIGCONT)
    assert rig.indexer.pid is None  # killed; the search's flush starts another
    assert await _ends(stuck)
    # The next child's start counts in its first reply's time: a busy machine may need more.
    monkeypatch.setattr(index_process, "_REPLY_S", reply_s)
    assert await rig.found("swift") == [s.session_id]
    await rig.indexer.close()
    with pytest.raises(IndexProcessError, match="closed"):
        await rig.indexer.flush({0: 0})
    assert rig.indexer.pid is None


async def test_a_writer_taking_over_starts_its_index_process_at_its_first_flush(
    tmp_path: Path,
) -> None:
    """A standby taking over serves first; a writer starting with the stack starts it at once."""
    writer = Writer(open_catalog(tmp_path / "sessions.sqlite", shard_count=2), tmp_path / "a", 1024)
    thread = ThreadPoolExecutor(max_workers=1)
    # What the flusher reads of the service's context: its settings (for the child's logs).
    ctx = SimpleNamespace(settings=load_settings(env={}), instance="0")
    flushers = []
    try:
        for start in (False, True):
            flusher = await _index_flusher(ctx, writer, thread, start=start)  # type: ignore[arg-type]
            assert flusher is not None and flusher._indexer is not None
            flushers.append(flusher)
            assert (flusher._indexer.pid is not None) is start
    finally:
        for flusher in flushers:
            await flusher.close()
        thread.shutdown()
        writer.close()
