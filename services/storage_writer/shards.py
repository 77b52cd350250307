"""Sessions spread over several SQLite files, each holding the full schema for its sessions.

Why: every session has two tables of its own. SQLite keeps a database's whole schema in one
table that it parses as a unit: with 10,000 sessions in one file, creating a session's tables costs
~50 ms (the new entries are located by a scan of ``sqlite_schema``) and every *other* connection
re-parses the whole schema (~1 s measured here) on its next statement after a table appears. Both
costs grow with the schema of *one file*, so the writer routes each session to one of
``shard_count`` files by a stable hash of its id (inside one writer):
a new table invalidates the read connection's schema of one small shard only.

Every command concerns one session — or, for an account's named agents, one account, whose
assistants all live in the shard of its id (``shard_of_account``) — so every command touches
exactly one shard, and each shard's transaction is atomic on its own: no transaction ever spans two files (SQLite's multi-file
commits are not atomic in WAL mode). Layout::

    <db_path>                  catalog: schema_migrations + the shard count (fixed at creation),
                               the account-level search index and audit log (search_index)
    <db_path>.shards/NN.sqlite shard NN: sessions, agents, runs, artifacts, command_receipts,
                               nodes_<session_id>, events_<session_id>,
                               assistants, assistant_versions (of the accounts routed here),
                               search_outbox (texts not yet in the catalog's index)
"""

from __future__ import annotations

import sqlite3
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from services.storage_writer.schema import CATALOG_MIGRATIONS, configure, migrate
from services.storage_writer.search_index import apply_ops, backfill_shard

__all__ = [
    "CATALOG",
    "DEFAULT_SHARD_COUNT",
    "OpenedCatalog",
    "ShardLayout",
    "open_catalog",
    "open_shards",
]

# The catalog's number among the shards, where the writer and the reader keep connections (and
# dirty counts) by shard: its search index and audit log are written and checkpointed like one.
CATALOG: Final = -1

# 64 shards: 10,000 sessions are ~160 per file, so a schema re-parse stays ~15 ms.
DEFAULT_SHARD_COUNT: Final = 64


class ShardLayout:
    """Where a session's data lives; the shard count is read from the catalog, never changed."""

    def __init__(self, db_path: Path, shard_count: int) -> None:
        if not 1 <= shard_count <= 1024:
            raise ValueError("shard_count must be within 1..1024")
        self.db_path = db_path
        self.shard_count = shard_count

    @property
    def shard_dir(self) -> Path:
        """The directory of the shard files."""
        return self.db_path.with_name(self.db_path.name + ".shards")

    def shard_of(self, session_id: str) -> int:
        """The shard of a session: CRC-32 of its id modulo the shard count (stable forever)."""
        return zlib.crc32(session_id.encode()) % self.shard_count

    def shard_of_account(self, account_id: str) -> int:
        """The shard of an account's own records (its named agents): CRC-32 of
        ``account:<id>``, so they live together in one file, beside some sessions."""
        return self.shard_of(f"account:{account_id}")

    def path(self, shard: int) -> Path:
        """The file of one shard."""
        return self.shard_dir / f"{shard:02d}.sqlite"

    def paths(self) -> list[Path]:
        """Every shard file, in shard order."""
        return [self.path(i) for i in range(self.shard_count)]


@dataclass(frozen=True)
class OpenedCatalog:
    """What :func:`open_shards` found: the layout; the search-outbox rows a previous writer left
    unflushed (a crash), by shard, for the shards that have any; and, when a ``connect`` was
    given, every shard's connection it opened, left open for the caller (who closes them)."""

    layout: ShardLayout
    outbox_left: dict[int, int]
    connections: dict[int, sqlite3.Connection] = field(default_factory=dict)


def _plain(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    configure(conn)
    return conn


def open_catalog(db_path: Path, shard_count: int = DEFAULT_SHARD_COUNT) -> ShardLayout:
    """Create or read the catalog and migrate every shard; return the layout.

    On an existing database the stored shard count wins over ``shard_count``.
    """
    return open_shards(db_path, shard_count).layout


def open_shards(
    db_path: Path,
    shard_count: int = DEFAULT_SHARD_COUNT,
    *,
    connect: Callable[[Path], sqlite3.Connection] | None = None,
) -> OpenedCatalog:
    """:func:`open_catalog`, also counting each shard's search outbox while the shard is open,
    and with ``connect`` (an autocommit connection to a path, configured) keeping what it opened.

    The writer needs those counts before its first flush, and a connection to each shard whose
    schema is parsed already (~15 ms a shard at 10,000 sessions): both are had here, where every
    shard is opened anyway before the service takes a command, rather than on the writer's
    thread later while receipts wait.
    """
    db_path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(db_path, isolation_level=None)
    left: dict[int, int] = {}
    kept: dict[int, sqlite3.Connection] = {}
    try:
        configure(conn)
        applied = migrate(conn, CATALOG_MIGRATIONS)
        conn.execute(
            "INSERT OR IGNORE INTO shard_layout (id, shard_count) VALUES (1, ?)", (shard_count,)
        )
        (stored,) = conn.execute("SELECT shard_count FROM shard_layout WHERE id = 1").fetchone()
        layout = ShardLayout(db_path, int(stored))
        layout.shard_dir.mkdir(exist_ok=True)
        for number, path in enumerate(layout.paths()):
            shard = (connect or _plain)(path)
            try:
                migrate(shard)
                # A catalog that just got its search index: index what the shards hold already.
                if 2 in applied and 1 not in applied:
                    apply_ops(conn, list(backfill_shard(shard)))
                (rows,) = shard.execute("SELECT count(*) FROM search_outbox").fetchone()
                if rows:
                    left[number] = int(rows)
            except BaseException:
                shard.close()
                raise
            if connect is None:
                shard.close()
            else:
                kept[number] = shard
    except BaseException:
        for shard in kept.values():
            shard.close()
        raise
    finally:
        conn.close()
    return OpenedCatalog(layout, left, kept)
