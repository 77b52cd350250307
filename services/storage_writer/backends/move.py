"""``soong-agent migrate-data``: a SQLite home's record moved into PostgreSQL, verified.

What moves: every shard's sessions, agents, runs, artifacts, receipts, usage totals and named
agents (with their versions), each session's nodes and events (into the shared tables, keyed by
session, with their sequence numbers as they were), and the catalog's audit log and search
index. The files beside the database (``artifacts/``) stay where they are: rows name them.

How it is checked: for every table, the number of rows and a checksum (BLAKE2b over the rows in
key order, each value as the writer's queries read it: times as ISO text, JSON as its text) are
computed on both sides after the copy; any difference rolls the whole move back and says which
table differs. The move is one transaction: PostgreSQL holds all of it or none of it.

The stack must be stopped (no writer on either side); a PostgreSQL database that already holds
sessions is refused (``target_not_empty``) rather than merged into.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agent_core.errors import StorageError
from services.storage_writer.backends.pg_conn import PgConn
from services.storage_writer.backends.pg_store import fold
from services.storage_writer.search_texts import indexed_text
from services.storage_writer.shards import ShardLayout, open_catalog

__all__ = ["MoveReport", "TableCheck", "move_home"]

# Shard tables moved as they are: name -> (columns, key order of the checksum).
_SHARD_TABLES: Final[dict[str, tuple[str, str]]] = {
    "sessions": (
        "session_id, account_id, cwd, root_agent_id, active_node_id, parent_session_id, "
        "status, metadata_json, created_at, updated_at",
        "session_id",
    ),
    "agents": (
        "agent_id, session_id, parent_agent_id, agent_type, created_by_run_id, "
        "fork_from_node_id, status, result_json, metadata_json, created_at, updated_at",
        "agent_id",
    ),
    "runs": (
        "run_id, session_id, agent_id, status, attempt, start_node_id, end_node_id, "
        "end_reason, turn_count, usage_json, error_json, metadata_json, created_at, "
        "updated_at, claim_command_id",
        "run_id",
    ),
    "artifacts": (
        "artifact_id, session_id, agent_id, run_id, node_id, tool_call_id, path, filename, "
        "mime_type, size_bytes, summary, metadata_json, created_at",
        "artifact_id",
    ),
    "command_receipts": ("command_id, session_id, result_json, created_at", "command_id"),
    "usage_totals": (
        "account_id, day, model, session_id, runs, input_tokens, output_tokens, "
        "cache_read_tokens, cache_write_tokens",
        "account_id, day, model, session_id",
    ),
    "assistants": (
        "assistant_id, account_id, name, version, status, created_at, updated_at",
        "assistant_id",
    ),
    "assistant_versions": (
        "assistant_id, version, definition_json, created_at",
        "assistant_id, version",
    ),
}
_WITHOUT_ROWID: Final = frozenset({"command_receipts", "usage_totals", "assistant_versions"})
_NODE_COLUMNS: Final = (
    "node_seq, node_id, parent_id, agent_id, run_id, role, node_type, content_json, "
    "metadata_json, token_count, created_at"
)
_EVENT_COLUMNS: Final = (
    "seq, event_id, run_seq, agent_id, run_id, level, event_type, node_id, tool_call_id, "
    "payload_json, created_at"
)
_AUDIT_COLUMNS: Final = "event_id, account_id, event_type, session_id, payload_json, created_at"
_BATCH: Final = 1000


@dataclass(frozen=True)
class TableCheck:
    """One table's rows and checksum, the same on both sides."""

    table: str
    rows: int
    checksum: str


@dataclass(frozen=True)
class MoveReport:
    """What was moved and verified."""

    sessions: int
    checks: list[TableCheck]


class _Digest:
    def __init__(self) -> None:
        self.rows = 0
        self._hash = hashlib.blake2b(digest_size=16)

    def add(self, row: Sequence[Any]) -> None:
        self.rows += 1
        self._hash.update(repr(tuple(row)).encode())

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def _chunks(rows: Iterable[Sequence[Any]]) -> Iterator[list[Sequence[Any]]]:
    batch: list[Sequence[Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) == _BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _sqlite(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)


def move_home(db_path: Path, pg: PgConn) -> MoveReport:
    """Copy the SQLite database at ``db_path`` into the migrated, empty PostgreSQL database of
    ``pg`` in one transaction, verify every table, and commit (see the module's docstring)."""
    if not db_path.exists():
        raise StorageError(
            "source_missing", f"no SQLite database at {db_path}", details={"path": str(db_path)}
        )
    layout = open_catalog(db_path)  # migrates an older home first: the columns are today's
    if pg.execute("SELECT 1 FROM sessions LIMIT 1").fetchone() is not None:
        raise StorageError(
            "target_not_empty",
            "the PostgreSQL database already holds sessions; move into an empty one",
        )
    pg.execute("BEGIN")
    try:
        _copy(layout, pg)
        checks = _verify(layout, pg)
        pg.execute("COMMIT")
    except BaseException:
        if pg.in_transaction:
            pg.execute("ROLLBACK")
        raise
    sessions = next(c.rows for c in checks if c.table == "sessions")
    return MoveReport(sessions=sessions, checks=checks)


def _copy(layout: ShardLayout, pg: PgConn) -> None:
    """Insert every row, in each table's order of insertion."""
    for path in layout.paths():
        shard = _sqlite(path)
        try:
            for table, (columns, key) in _SHARD_TABLES.items():
                # Insertion order where it breaks ties (rowid); WITHOUT ROWID tables by key.
                order = key if table in _WITHOUT_ROWID else "rowid"
                rows = shard.execute(f"SELECT {columns} FROM {table} ORDER BY {order}")
                marks = ", ".join("?" * len(columns.split(",")))
                for batch in _chunks(rows):
                    pg.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", batch)
            sessions = [sid for (sid,) in shard.execute("SELECT session_id FROM sessions")]
            _copy_sessions(shard, pg, sessions)
        finally:
            shard.close()
    catalog = _sqlite(layout.db_path)
    try:
        rows = catalog.execute(f"SELECT {_AUDIT_COLUMNS} FROM account_audit ORDER BY seq")
        marks = ", ".join("?" * len(_AUDIT_COLUMNS.split(",")))
        for batch in _chunks(rows):
            pg.executemany(f"INSERT INTO account_audit ({_AUDIT_COLUMNS}) VALUES ({marks})", batch)
        # The search index in its order (newest first reads the highest rowid first); the
        # account of each row comes from its session (audit rows keep deleted sessions' own).
        accounts: dict[str, str] = dict(
            pg.execute("SELECT session_id, account_id FROM sessions").fetchall()
        )
        found = catalog.execute(
            "SELECT session_id, node_id, title FROM search_rows ORDER BY row_id"
        ).fetchall()
        docs = [
            (sid, node_id, accounts[sid], body, fold(body))
            for sid, node_id, body in _indexed_texts(layout, [r for r in found if r[0] in accounts])
        ]
        pg.executemany(
            "INSERT INTO search_docs (session_id, node_id, account_id, body, tsv) "
            "VALUES (?, ?, ?, ?, to_tsvector('simple', ?))",
            docs,
        )
    finally:
        catalog.close()


def _indexed_texts(
    layout: ShardLayout, rows: list[tuple[str, str, str | None]]
) -> Iterator[tuple[str, str, str]]:
    """``(session_id, node_id, text)`` of the index's rows, in their order: the catalog keeps
    no texts but a title's, a message's is read from its session's shard."""
    shards: dict[int, sqlite3.Connection] = {}
    try:
        for sid, node_id, title in rows:
            shard = layout.shard_of(sid)
            if shard not in shards:
                shards[shard] = _sqlite(layout.path(shard))
            text = indexed_text(shards[shard], sid, node_id, title)
            if text is not None:
                yield sid, node_id, text
    finally:
        for conn in shards.values():
            conn.close()


def _copy_sessions(shard: sqlite3.Connection, pg: PgConn, sids: list[str]) -> None:
    """The nodes and events of a shard's sessions, each session's in its order; batches span
    sessions (a session has a few rows: one ``executemany`` each would be a round trip each)."""
    for view, columns in (("nodes", _NODE_COLUMNS), ("events", _EVENT_COLUMNS)):
        rows = (
            (sid, *row)
            for sid in sids
            for row in shard.execute(f'SELECT {columns} FROM "{view}_{sid}" ORDER BY 1')
        )
        marks = ", ".join("?" * (len(columns.split(",")) + 1))
        for batch in _chunks(rows):
            pg.executemany(f"INSERT INTO {view} (session_id, {columns}) VALUES ({marks})", batch)


def _verify(layout: ShardLayout, pg: PgConn) -> list[TableCheck]:
    """Count and checksum every table on both sides, rows sorted by key here (so no collation
    of either database decides the order); refuse any difference."""
    checks: list[TableCheck] = []
    shards = [_sqlite(p) for p in layout.paths()]
    try:
        for table, (columns, key) in _SHARD_TABLES.items():
            width = len(key.split(","))
            source = [tuple(r) for s in shards for r in s.execute(f"SELECT {columns} FROM {table}")]
            target = [tuple(r) for r in pg.execute(f"SELECT {columns} FROM {table}").fetchall()]
            checks.append(_compare(table, source, target, width))
        for view, columns in (("nodes", _NODE_COLUMNS), ("events", _EVENT_COLUMNS)):
            source = []
            for shard in shards:
                for (sid,) in shard.execute("SELECT session_id FROM sessions").fetchall():
                    rows = shard.execute(f'SELECT {columns} FROM "{view}_{sid}"')
                    source += [(sid, *row) for row in rows]
            target = [
                tuple(r) for r in pg.execute(f"SELECT session_id, {columns} FROM {view}").fetchall()
            ]
            checks.append(_compare(view, source, target, 2))
    finally:
        for shard in shards:
            shard.close()
    return checks


def _digest(rows: list[tuple[Any, ...]], width: int) -> _Digest:
    digest = _Digest()
    for row in sorted(rows, key=lambda r: r[:width]):
        digest.add(row)
    return digest


def _compare(
    table: str, source_rows: list[tuple[Any, ...]], target_rows: list[tuple[Any, ...]], width: int
) -> TableCheck:
    source, target = _digest(source_rows, width), _digest(target_rows, width)
    if (source.rows, source.hexdigest()) != (target.rows, target.hexdigest()):
        raise StorageError(
            "move_mismatch",
            f"{table}: {source.rows} rows in SQLite, {target.rows} in PostgreSQL, or their "
            "contents differ; nothing was moved",
            details={"table": table, "sqlite_rows": source.rows, "postgres_rows": target.rows},
        )
    return TableCheck(table, target.rows, target.hexdigest())
