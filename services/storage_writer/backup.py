"""Copies of the database that a backup takes while the stack runs, and puts back on restore.

Each file (the catalog and every shard) is copied with SQLite's online backup API in one step,
from a read-only connection: the copy is the file as one read transaction saw it, while the
storage-writer goes on writing (in WAL mode a reader never blocks the writer). No transaction
spans two files (``shards``), so a copy per file is consistent per session. The copies are
checked (``PRAGMA quick_check``) and hashed before the backup says it is done. Nothing here writes
to the live database: the storage-writer stays its only writer.
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from services.storage_writer.run_queries import ENTRY_COLUMNS, ENTRY_FROM, queue_entry
from services.storage_writer.shards import ShardLayout

__all__ = ["DatabaseCopy", "copy_database", "ended_runs", "place_database", "runs_in_flight"]


class DatabaseCopy(dict[str, str]):
    """The copied files, by path relative to the copy's folder, with their SHA-256."""


_CATALOG = "catalog.sqlite"
_SHARDS = "shards"


def _files(db_path: Path) -> list[tuple[Path, str]]:
    """Each database file with its name in a copy: ``catalog.sqlite``, ``shards/NN.sqlite``."""
    if not db_path.exists():
        return []
    shard_dir = ShardLayout(db_path, 1).shard_dir  # its folder naming only
    shards = sorted(shard_dir.glob("*.sqlite")) if shard_dir.is_dir() else []
    return [(db_path, _CATALOG), *((s, f"{_SHARDS}/{s.name}") for s in shards)]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def copy_database(db_path: Path, dest: Path) -> DatabaseCopy:
    """Copy the catalog and every shard of ``db_path`` into ``dest`` (``catalog.sqlite`` and
    ``shards/NN.sqlite``); raises ``FileNotFoundError`` when there is no database and
    ``sqlite3.DatabaseError`` when a copy fails its check."""
    files = _files(db_path)
    if not files:
        raise FileNotFoundError(f"no database at {db_path}")
    copied = DatabaseCopy()
    for source, relative in files:
        target = dest / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        reader = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
        try:
            writer = sqlite3.connect(target)
            try:
                reader.backup(writer)  # one step: one read transaction's view of the file
                writer.execute("PRAGMA journal_mode=DELETE")  # a self-contained file, no -wal
                (verdict,) = writer.execute("PRAGMA quick_check").fetchone()
                if verdict != "ok":
                    raise sqlite3.DatabaseError(f"the copy of {relative} is damaged: {verdict}")
            finally:
                writer.close()
        finally:
            reader.close()
        copied[relative] = _sha256(target)
    return copied


def place_database(copy: Path, expected: dict[str, str], db_path: Path) -> None:
    """Put a copy taken by :func:`copy_database` at ``db_path`` (which must not exist yet),
    after checking each file against its SHA-256 in ``expected``; raises ``ValueError`` on a
    missing or changed file."""
    for relative, digest in expected.items():
        source = copy / relative
        known = relative == _CATALOG or relative.startswith(f"{_SHARDS}/")
        if not known or "/" in relative.removeprefix(f"{_SHARDS}/") or ".." in relative:
            raise ValueError(f"the backup names a file that is not the database's: {relative}")
        if not source.is_file() or _sha256(source) != digest:
            raise ValueError(f"the backup's {relative} is missing or changed")
    shard_dir = ShardLayout(db_path, 1).shard_dir
    for relative in expected:
        name = relative.removeprefix(f"{_SHARDS}/")
        target = db_path if relative == _CATALOG else shard_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(copy / relative, target)


# The columns a restore needs to queue a run again (what the gateway put in its queue entry),
# then its status and last attempt.
_IN_FLIGHT = f"""
SELECT {ENTRY_COLUMNS}, r.status, r.attempt {ENTRY_FROM}
WHERE r.status IN ('queued', 'running', 'pending')
ORDER BY r.created_at, r.run_id
"""


def runs_in_flight(db_path: Path) -> list[dict[str, Any]]:
    """The runs of the database at ``db_path`` that have not ended (queued, running or waiting
    for a permission), oldest first, as the fields of their queue entries plus ``status`` and
    ``attempt`` (the last attempt claimed; 0 for none) (read-only; for a restore, with no writer
    running)."""
    found: list[dict[str, Any]] = []
    for source, _ in _files(db_path)[1:]:
        conn = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
        try:
            for row in conn.execute(_IN_FLIGHT):
                found.append({**queue_entry(row), "status": row[9], "attempt": int(row[10])})
        finally:
            conn.close()
    return found


def ended_runs(db_path: Path, run_ids: list[str]) -> set[str]:
    """Those of ``run_ids`` that the database at ``db_path`` holds as ended (read-only)."""
    ended: set[str] = set()
    batch = 500  # under SQLite's limit on bound parameters
    for source, _ in _files(db_path)[1:]:
        conn = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
        try:
            for i in range(0, len(run_ids), batch):
                chunk = run_ids[i : i + batch]
                marks = ",".join("?" * len(chunk))
                query = (
                    f"SELECT run_id FROM runs WHERE run_id IN ({marks})"
                    " AND status NOT IN ('queued', 'running', 'pending')"
                )
                ended.update(row[0] for row in conn.execute(query, chunk))
        finally:
            conn.close()
    return ended
