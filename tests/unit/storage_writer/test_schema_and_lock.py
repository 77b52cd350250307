"""Migrations are idempotent on an empty and on a current database; one writer owns the files."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent_core.errors import SchemaError, StorageError
from services.storage_writer.lock import WriterLock, _Waiter
from services.storage_writer.schema import (
    MIGRATIONS,
    PAGE_SIZE,
    configure,
    events_table,
    migrate,
    nodes_table,
)
from services.storage_writer.shards import open_catalog
from services.storage_writer.writer import Writer
from tests.unit.storage_writer.factories import append_node, create_session
from tests.waiting import HangGuard


def _dump(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def test_migrations_on_empty_then_current_database(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "a.sqlite", isolation_level=None)
    assert migrate(conn) == [v for v, _ in MIGRATIONS]
    conn.close()
    before = _dump(tmp_path / "a.sqlite")
    conn = sqlite3.connect(tmp_path / "a.sqlite", isolation_level=None)
    assert migrate(conn) == []
    conn.close()
    assert _dump(tmp_path / "a.sqlite") == before
    assert any(
        line.startswith("CREATE TABLE") and "command_receipts" in line and "WITHOUT ROWID" in line
        for line in before
    )


def test_a_failed_migration_changes_nothing_and_says_so(tmp_path: Path) -> None:
    """What docs/operations.md promises an upgrade: the failing migration's transaction is
    rolled back (its half-done changes with it) and the error reaches the writer's start."""
    conn = sqlite3.connect(tmp_path / "a.sqlite", isolation_level=None)
    assert migrate(conn) == [v for v, _ in MIGRATIONS]
    conn.close()
    before = _dump(tmp_path / "a.sqlite")
    newest = max(v for v, _ in MIGRATIONS)

    def half_done(c: sqlite3.Connection) -> None:
        c.execute("CREATE TABLE upgrade_half_done (x INTEGER)")
        c.execute("INSERT INTO upgrade_half_done VALUES (1)")
        raise sqlite3.OperationalError("the upgrade met something it did not expect")

    conn = sqlite3.connect(tmp_path / "a.sqlite", isolation_level=None)
    with pytest.raises(sqlite3.OperationalError, match="did not expect"):
        migrate(conn, (*MIGRATIONS, (newest + 1, half_done)))
    conn.close()
    assert _dump(tmp_path / "a.sqlite") == before


def test_migrations_from_an_older_version_all_land_or_none_does(tmp_path: Path) -> None:
    """Several versions behind, the missing migrations go in one transaction: one that fails
    leaves the database at the version it had, not at the one before the failure."""
    conn = sqlite3.connect(tmp_path / "a.sqlite", isolation_level=None)
    try:
        assert migrate(conn, MIGRATIONS[:5]) == [1, 2, 3, 4, 5]
        before = _dump(tmp_path / "a.sqlite")
        newest = max(v for v, _ in MIGRATIONS)

        def fails(c: sqlite3.Connection) -> None:
            raise sqlite3.OperationalError("the upgrade met something it did not expect")

        with pytest.raises(sqlite3.OperationalError, match="did not expect"):
            migrate(conn, (*MIGRATIONS, (newest + 1, fails)))
        assert _dump(tmp_path / "a.sqlite") == before
        assert migrate(conn) == [v for v, _ in MIGRATIONS[5:]]  # then the upgrade, whole
        versions = [v for (v,) in conn.execute("SELECT version FROM schema_migrations")]
        assert sorted(versions) == [v for v, _ in MIGRATIONS]
    finally:
        conn.close()


def _page_size(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA page_size").fetchone()[0])
    finally:
        conn.close()


def test_new_shards_get_the_writers_page_size_and_old_files_keep_theirs(tmp_path: Path) -> None:
    layout = open_catalog(tmp_path / "new" / "db.sqlite", shard_count=2)
    assert PAGE_SIZE != 4096  # else this test proves nothing
    assert {_page_size(p) for p in layout.paths()} == {PAGE_SIZE}
    # A database made before the change: its shards were created with SQLite's default pages.
    old = tmp_path / "old" / "db.sqlite"
    old_layout = open_catalog(old, shard_count=2)
    for path in old_layout.paths():
        path.unlink()
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("PRAGMA page_size=4096")
        conn.execute("PRAGMA journal_mode=WAL")
        migrate(conn)
        conn.close()
    layout = open_catalog(old, shard_count=2)
    assert {_page_size(p) for p in layout.paths()} == {4096}
    writer = Writer(layout, tmp_path / "old" / "artifacts", 65536)
    s = create_session()
    receipts = writer.apply_batch([s, append_node(s)])
    writer.close()
    assert all(r.ok for r in receipts)
    conn = sqlite3.connect(layout.path(layout.shard_of(s.session_id)), isolation_level=None)
    configure(conn)  # setting the page size again changes nothing on a file that has tables
    assert int(conn.execute("PRAGMA page_size").fetchone()[0]) == 4096
    conn.close()


def test_reopening_keeps_the_stored_shard_count(tmp_path: Path) -> None:
    layout = open_catalog(tmp_path / "s.sqlite", shard_count=3)
    dumps = [_dump(p) for p in layout.paths()]
    again = open_catalog(tmp_path / "s.sqlite", shard_count=9)
    assert again.shard_count == 3
    assert [_dump(p) for p in again.paths()] == dumps


def test_a_second_lock_holder_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    first = WriterLock(db)
    first.acquire()
    # flock locks belong to open file descriptions: a second process is the honest contender.
    code = (
        "import sys; from pathlib import Path; from services.storage_writer.lock import WriterLock\n"
        "from agent_core.errors import StorageError\n"
        f"try:\n    WriterLock(Path({str(db)!r})).acquire()\nexcept StorageError as e:\n"
        "    print(e.code); sys.exit(7)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 7 and proc.stdout.strip() == "writer_locked", proc.stderr
    first.release()
    second = WriterLock(db)
    second.acquire()
    assert second.held
    second.release()


def test_lock_in_the_same_process_is_refused_too(tmp_path: Path) -> None:
    first = WriterLock(tmp_path / "s.sqlite")
    first.acquire()
    with pytest.raises(StorageError) as info:
        WriterLock(tmp_path / "s.sqlite").acquire()
    assert info.value.code == "writer_locked"
    first.release()


def _holder(db: Path) -> subprocess.Popen[str]:
    """Another process owning ``db``'s lock (it says so on stdout) until it is killed."""
    code = (
        "import sys; from pathlib import Path; from services.storage_writer.lock import WriterLock\n"
        f"WriterLock(Path({str(db)!r})).acquire(); print('held', flush=True); sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


async def _taken_by_us(db: Path) -> None:
    """Return once a fresh :class:`WriterLock` on ``db`` can be taken here (then released):
    nothing else, an abandoned waiter included, still holds it."""
    guard = HangGuard(30, "the lock to be free")
    while True:
        other = WriterLock(db)
        try:
            other.acquire()
        except StorageError:
            guard.check()
            await asyncio.sleep(0.01)
            continue
        other.release()
        return


async def test_a_standby_takes_the_lock_when_its_owner_dies(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    owner = _holder(db)
    standby = WriterLock(db)
    waiting = asyncio.create_task(standby.acquire_when_free())
    for _ in range(20):
        await asyncio.sleep(0)
    assert not waiting.done() and not standby.held
    assert standby.path.read_text() == str(owner.pid)
    owner.kill()  # SIGKILL: the kernel drops its lock, and the blocked flock is granted
    owner.wait()
    async with asyncio.timeout(30):
        took_over = await waiting
    assert took_over  # it waited: the service starts its index's process later (a takeover)
    assert standby.held and standby.path.read_text() == str(os.getpid())
    standby.release()


async def test_a_cancelled_standby_leaves_the_lock_to_the_next(tmp_path: Path) -> None:
    first = WriterLock(tmp_path / "s.sqlite")
    first.acquire()
    standby = WriterLock(tmp_path / "s.sqlite")
    waiting = asyncio.create_task(standby.acquire_when_free())
    for _ in range(20):
        await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    first.release()  # granted now to the abandoned wait, which must let it go
    await _taken_by_us(tmp_path / "s.sqlite")
    assert not standby.held


async def test_a_grant_settled_before_a_cancel_is_released(tmp_path: Path) -> None:
    """The task was cancelled after the thread's grant reached the loop, before it resumed."""
    lock = WriterLock(tmp_path / "s.sqlite")
    lock.path.touch()
    waiter = _Waiter(os.open(lock.path, os.O_RDWR), asyncio.get_running_loop())
    async with asyncio.timeout(30):
        await asyncio.shield(waiter.granted)
    with pytest.raises(StorageError):
        WriterLock(tmp_path / "s.sqlite").acquire()  # the waiter holds it
    waiter.abandon()
    await _taken_by_us(tmp_path / "s.sqlite")


async def test_a_free_lock_is_taken_at_once_by_a_standby(tmp_path: Path) -> None:
    standby = WriterLock(tmp_path / "s.sqlite")
    assert not await standby.acquire_when_free()  # nobody to take over from
    assert standby.held and standby.path.read_text() == str(os.getpid())
    standby.release()


def test_v2_keeps_the_results_of_receipts_stored_by_v1(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite"
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        assert migrate(conn, MIGRATIONS[:1]) == [1]
        receipt = '{"type":"command_receipt","command_id":"cmd_1","ok":true,"result":{"seq":7}}'
        conn.execute(
            "INSERT INTO command_receipts VALUES ('cmd_1', 'sess_x', ?, ?)",
            (receipt, "2026-11-29T10:00:00.000000+00:00"),
        )
        assert migrate(conn, MIGRATIONS[:2]) == [2]
        row = conn.execute("SELECT * FROM command_receipts").fetchone()
        without_rowid = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'command_receipts'"
        ).fetchone()[0]
    finally:
        conn.close()
    stamp = int(datetime(2026, 11, 29, 10, tzinfo=UTC).timestamp())
    assert row == ("cmd_1", "sess_x", '{"seq":7}', stamp)
    assert "WITHOUT ROWID" in without_rowid


def test_a_database_from_a_newer_writer_is_refused(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "new.sqlite", isolation_level=None)
    try:
        migrate(conn)
        newest = max(v for v, _ in MIGRATIONS)
        conn.execute(
            "INSERT INTO schema_migrations (version, applied_at) VALUES (?, 'later')",
            (newest + 1,),
        )
        with pytest.raises(RuntimeError, match="newer than this writer knows"):
            migrate(conn)
    finally:
        conn.close()


@pytest.mark.parametrize("table", [nodes_table, events_table])
def test_table_names_are_kept_but_a_refused_id_is_refused_every_time(table: Any) -> None:
    good = "sess_20260101_000000_0123456789abcdef"
    assert table(good) == table(good) and table(good).endswith(f'_{good}"')
    for hostile in ['sess_20260101_000000_abcd"; DROP TABLE x; --', "nodes_x", good + " "]:
        for _ in range(2):  # a refusal is never remembered as a name
            with pytest.raises(SchemaError):
                table(hostile)
    for wrong in [None, 7, [good], {good: 1}]:  # not even hashable: the same typed refusal
        with pytest.raises(SchemaError):
            table(wrong)
