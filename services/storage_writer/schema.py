"""The SQLite schema: connection pragmas, built-in migrations and per-session table names.

Every shard file (see :mod:`services.storage_writer.shards`) holds the full schema (docs/architecture.md, "Storage") for
the sessions routed to it: the global tables ``sessions, agents, runs, artifacts`` (plus
``sessions.account_id``, ``runs.attempt`` and ``runs.claim_command_id``), the idempotency table
``command_receipts`` and, per session, ``nodes_<session_id>`` and ``events_<session_id>``.

Deviation from the seed's column constraints, kept to the seed's columns: ``node_seq`` and ``seq``
are the tables' ``INTEGER PRIMARY KEY`` (the rowid, so scans in sequence order are free and a
duplicate seq is impossible) and ``node_id``/``event_id`` are ``NOT NULL UNIQUE``. That is two
schema objects per table instead of three, and schema size is what every create and every
re-parse pays for (see the module docstring of ``shards``).
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final

from agent_core.ids import validate_session_id

__all__ = [
    "BUSY_TIMEOUT_MS",
    "CATALOG_MIGRATIONS",
    "MIGRATIONS",
    "PAGE_SIZE",
    "SYNCHRONOUS",
    "applied_versions",
    "configure",
    "create_session_tables",
    "events_table",
    "migrate",
    "nodes_table",
]

# Durability decision (the writer sets these, users do not): WAL + synchronous=NORMAL.
# In WAL mode NORMAL fsyncs at checkpoints, not at every COMMIT. A receipt (sent only after COMMIT)
# therefore means: the write survives any *process* crash — the writer, a worker, SIGKILL, OOM —
# which is what the crash tests prove. On *power loss or an OS crash* the last commits before the
# loss can roll back — those since the WAL was last synced, which happens at each checkpoint
# (within 10 s of a shard's first unsynced write, see services/storage_writer/checkpoint.py). The database
# stays consistent (atomic transactions, integrity_check ok); it just ends earlier.
# Why not FULL: the bus (Redis/Valkey with appendfsync everysec) already bounds what a power loss
# can lose to about a second, so FULL would buy little for the system as a whole, while costing an
# fsync per batch *per shard touched* (~3 ms each here) on every step of every run. Deployments that
# need acknowledged writes to survive power loss should run Redis with `appendfsync always` and
# change this constant to FULL together.
SYNCHRONOUS: Final = "NORMAL"
# The writer is the only process that writes; the wait covers checkpoints and external readers
# such as the sqlite3 CLI, never another writer (the lock file refuses a second one).
BUSY_TIMEOUT_MS: Final = 5_000
JOURNAL_SIZE_LIMIT: Final = 1 << 20
# Page size of files created from now on (a file keeps the size it was created with). A command
# of a busy writer dirties a page in each B-tree it touches — a session's nodes and events, their
# id indexes, the run index, the sessions row — and with many sessions writing at once no two
# commands of a batch share those pages, so each COMMIT writes about six pages a command to the
# WAL. Half-size pages halve those bytes; a row larger than a page overflows into a chain, which
# costs reads of big tool results a page or two more. Measured by bench/storage_writer.py.
# At 128 sessions writing at once: 93–106 µs of writer CPU a command with 4 KiB pages, 73–85 with
# 2 KiB, 75–86 with 1 KiB (rows of a few KiB would overflow the smaller pages more often).
PAGE_SIZE: Final = 2048


def configure(conn: sqlite3.Connection, *, readonly: bool = False) -> None:
    """Set the pragmas every connection of the writer uses."""
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys=OFF")  # per-session tables have no FK targets to check
    if readonly:
        conn.execute("PRAGMA query_only=ON")
        return
    conn.execute(f"PRAGMA page_size={PAGE_SIZE}")  # a no-op once the file has its first table
    mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise RuntimeError(f"could not switch the database to WAL (got {mode!r})")
    conn.execute(f"PRAGMA synchronous={SYNCHRONOUS}")
    # A checkpointed WAL is reused, never shrunk, unless limited: with one WAL per shard that
    # would keep up to ~4 MB of dead log per shard on disk.
    conn.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")


def nodes_table(session_id: str) -> str:
    """The quoted name of a session's node table; refuses any id the core could not generate."""
    return _table("nodes_", session_id)


def events_table(session_id: str) -> str:
    """The quoted name of a session's event table; refuses any id the core could not generate."""
    return _table("events_", session_id)


def _table(prefix: str, session_id: str) -> str:
    if not isinstance(session_id, str):  # refused as the id check refuses it (and unhashable)
        validate_session_id(session_id)
    return _checked_table(prefix, session_id)


# A run's commands name its session's tables some thirty times, and each check of the id runs two
# regular expressions: the names of recent sessions are kept. A refused id raises every time (an
# exception is never cached).
@functools.lru_cache(maxsize=4096)
def _checked_table(prefix: str, session_id: str) -> str:
    return f'"{prefix}{validate_session_id(session_id)}"'


def create_session_tables(conn: sqlite3.Connection, session_id: str) -> None:
    """Create a session's two tables (inside the caller's transaction)."""
    nodes, events = nodes_table(session_id), events_table(session_id)
    conn.execute(
        f"CREATE TABLE {nodes} ("
        "node_seq INTEGER PRIMARY KEY, node_id TEXT NOT NULL UNIQUE, parent_id TEXT, "
        "agent_id TEXT NOT NULL, run_id TEXT, role TEXT NOT NULL, node_type TEXT NOT NULL, "
        "content_json TEXT NOT NULL, metadata_json TEXT, token_count INTEGER, "
        "created_at TEXT NOT NULL)"
    )
    # UNIQUE(run_id, run_seq) doubles as the run-replay index; NULL run ids stay distinct.
    conn.execute(
        f"CREATE TABLE {events} ("
        "seq INTEGER PRIMARY KEY, event_id TEXT NOT NULL UNIQUE, run_seq INTEGER, "
        "agent_id TEXT, run_id TEXT, level TEXT NOT NULL, event_type TEXT NOT NULL, "
        "node_id TEXT, tool_call_id TEXT, payload_json TEXT, created_at TEXT NOT NULL, "
        "UNIQUE (run_id, run_seq))"
    )


_V1: Final = (
    """CREATE TABLE sessions (
        session_id TEXT PRIMARY KEY, account_id TEXT NOT NULL, cwd TEXT NOT NULL,
        root_agent_id TEXT NOT NULL, active_node_id TEXT, parent_session_id TEXT,
        status TEXT NOT NULL, metadata_json TEXT, created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL)""",
    # Listing: an account's sessions newest first, optionally by status, with a keyset cursor.
    "CREATE INDEX sessions_account ON sessions (account_id, created_at DESC, session_id DESC)",
    """CREATE INDEX sessions_account_status
        ON sessions (account_id, status, created_at DESC, session_id DESC)""",
    """CREATE TABLE agents (
        agent_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, parent_agent_id TEXT,
        agent_type TEXT NOT NULL, created_by_run_id TEXT, fork_from_node_id TEXT,
        status TEXT NOT NULL, result_json TEXT, metadata_json TEXT, created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL)""",
    "CREATE INDEX agents_session ON agents (session_id, created_at)",
    """CREATE TABLE runs (
        run_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, agent_id TEXT NOT NULL,
        status TEXT NOT NULL, attempt INTEGER NOT NULL DEFAULT 0, start_node_id TEXT,
        end_node_id TEXT, end_reason TEXT, turn_count INTEGER, usage_json TEXT, error_json TEXT,
        metadata_json TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL)""",
    "CREATE INDEX runs_session ON runs (session_id, created_at)",
    """CREATE TABLE artifacts (
        artifact_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, agent_id TEXT, run_id TEXT,
        node_id TEXT, tool_call_id TEXT, path TEXT NOT NULL, filename TEXT, mime_type TEXT,
        size_bytes INTEGER, summary TEXT, metadata_json TEXT, created_at TEXT NOT NULL)""",
    "CREATE INDEX artifacts_session ON artifacts (session_id, created_at)",
    # Idempotency: the first receipt of every applied command, returned again on redelivery.
    """CREATE TABLE command_receipts (
        command_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, receipt_json TEXT NOT NULL,
        created_at TEXT NOT NULL)""",
)

Migration = Callable[[sqlite3.Connection], None]


def _statements(*sql: str) -> Migration:
    def apply(conn: sqlite3.Connection) -> None:
        for statement in sql:
            conn.execute(statement)

    return apply


# v2: receipts hold only what a duplicate's answer needs — the result — keyed by command id in
# a WITHOUT ROWID table (no second index holding the key again), with an integer timestamp: ~100
# bytes a command instead of ~370, about 2 KB less per agent turn (8 commands).
_V2 = (
    """CREATE TABLE command_receipts_v2 (
        command_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, result_json TEXT NOT NULL,
        created_at INTEGER NOT NULL) WITHOUT ROWID""",
    """INSERT INTO command_receipts_v2 (command_id, session_id, result_json, created_at)
        SELECT command_id, session_id, coalesce(json_extract(receipt_json, '$.result'), '{}'),
               CAST(strftime('%s', created_at) AS INTEGER)
        FROM command_receipts""",
    "DROP TABLE command_receipts",
    "ALTER TABLE command_receipts_v2 RENAME TO command_receipts",
)

# v3: the command that claimed a run's current attempt. A repeated claim is recognised by it
# (the run row is its record, as a created run's and an appended node's rows are theirs), so no
# command of a turn's path stores a receipt any more; another claim naming the same attempt is
# still refused as stale.
_V3 = ("ALTER TABLE runs ADD COLUMN claim_command_id TEXT",)

# v4: named agents (assistants) of the accounts routed to this shard (``shards.shard_of_account``).
# A row per assistant (its latest version and status) and a row per version, never changed once
# written: an update adds the next version, old ones stay readable. An account's active names are
# unique; an archived assistant frees its name.
_V4 = (
    """CREATE TABLE assistants (
        assistant_id TEXT PRIMARY KEY, account_id TEXT NOT NULL, name TEXT NOT NULL,
        version INTEGER NOT NULL, status TEXT NOT NULL, created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL)""",
    """CREATE UNIQUE INDEX assistants_active_name ON assistants (account_id, name)
        WHERE status = 'active'""",
    "CREATE INDEX assistants_account ON assistants (account_id, name)",
    """CREATE TABLE assistant_versions (
        assistant_id TEXT NOT NULL, version INTEGER NOT NULL, definition_json TEXT NOT NULL,
        created_at TEXT NOT NULL, PRIMARY KEY (assistant_id, version)) WITHOUT ROWID""",
)

# Catalog v2: the account-level search index and audit log (see search_index).
# unicode61 folds case and, with remove_diacritics 2, accents: "Café" finds "cafe".
_CATALOG_V2: Final = (
    """CREATE VIRTUAL TABLE search USING fts5(
        body, scope, session_id UNINDEXED, node_id UNINDEXED,
        tokenize = 'unicode61 remove_diacritics 2')""",
    """CREATE TABLE search_rows (
        row_id INTEGER PRIMARY KEY, session_id TEXT NOT NULL, node_id TEXT NOT NULL,
        UNIQUE (session_id, node_id))""",
    """CREATE TABLE account_audit (
        seq INTEGER PRIMARY KEY, event_id TEXT NOT NULL UNIQUE, account_id TEXT NOT NULL,
        event_type TEXT NOT NULL, session_id TEXT, payload_json TEXT, created_at TEXT NOT NULL)""",
    "CREATE INDEX account_audit_account ON account_audit (account_id, seq)",
)

# Catalog v3: the index keeps no copy of the texts. A contentless FTS5 table (``content=''``)
# holds only the tokens; a row's text is read where it lives (a message's node in its shard,
# which never changes; a title, which does, in ``search_rows.title``). The copy was the largest
# part of what a turn added to the database. No column sizes either: results are ordered by
# rowid, never ranked. SQLite before 3.43 removes a row from a contentless table only given its
# exact text (``search_index._unindex``), which is why the title is kept; a row whose words could
# not be removed stays unreachable, and AUTOINCREMENT keeps its rowid from being given to another.
_CATALOG_V3: Final = (
    """CREATE VIRTUAL TABLE search_v3 USING fts5(
        body, scope, content = '', columnsize = 0,
        tokenize = 'unicode61 remove_diacritics 2')""",
    "INSERT INTO search_v3 (rowid, body, scope) SELECT rowid, body, scope FROM search",
    """CREATE TABLE search_rows_v3 (
        row_id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,
        node_id TEXT NOT NULL, title TEXT, UNIQUE (session_id, node_id))""",
    """INSERT INTO search_rows_v3 (row_id, session_id, node_id, title)
        SELECT r.row_id, r.session_id, r.node_id, CASE WHEN r.node_id = '' THEN s.body END
        FROM search_rows AS r LEFT JOIN search AS s ON s.rowid = r.row_id ORDER BY r.row_id""",
    "DROP TABLE search_rows",
    "ALTER TABLE search_rows_v3 RENAME TO search_rows",
    "DROP TABLE search",
    "ALTER TABLE search_v3 RENAME TO search",
)

# Catalog v4: the sessions whose deletion the catalog recorded, by id. The index is flushed by a
# process of its own (``index_process``), which may have read a session's texts just before the
# writer deleted it; its transaction skips such a session's texts (``search_index.apply_ops``).
_CATALOG_V4: Final = (
    """CREATE INDEX account_audit_deleted ON account_audit (session_id)
        WHERE event_type = 'session_deleted'""",
)

# v5: usage totals kept as counters, added to by the transaction that ends a run
# (``apply_end``): a row per account, day (UTC, of the end), model and session, so an account's
# usage by day and model (the key's prefix) and a session's totals (its index) are read by index,
# never summed over runs. A session's rows live in its own shard, so the end and the counters
# commit together; an account's totals are the union of every shard's rows for it.
_V5 = (
    """CREATE TABLE usage_totals (
        account_id TEXT NOT NULL, day TEXT NOT NULL, model TEXT NOT NULL,
        session_id TEXT NOT NULL, runs INTEGER NOT NULL, input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL, cache_read_tokens INTEGER NOT NULL,
        cache_write_tokens INTEGER NOT NULL,
        PRIMARY KEY (account_id, day, model, session_id)) WITHOUT ROWID""",
    "CREATE INDEX usage_totals_session ON usage_totals (session_id)",
)

# v6: the search index's outbox (``search_outbox.defer_ops``): the node (or, ``node_id`` ``''``,
# the title) whose text is to be indexed, written in the shard's transaction that stores it,
# until the writer moves many rows at once into the catalog's FTS5 table (one small FTS5
# transaction per batch costs ~100 µs). A reference, not the text: a long message is not
# written, then deleted, a second time. Flushed rows are deleted, so it stays small: no index
# beyond the rowid (a session's deletion scans it).
_V6 = (
    """CREATE TABLE search_outbox (
        seq INTEGER PRIMARY KEY, session_id TEXT NOT NULL, node_id TEXT NOT NULL)""",
)

# v7: outbox seqs are never given twice (AUTOINCREMENT). The index's own process reads an outbox
# beside the writer; the writer then deletes the rows up to the last seq that flush read. With
# a plain rowid, an outbox emptied meanwhile (a session's deletion drops its rows) gave its next
# row a seq already read, and that row was deleted without ever being indexed.
_V7 = (
    """CREATE TABLE search_outbox_v7 (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, node_id TEXT NOT NULL)""",
    """INSERT INTO search_outbox_v7 (seq, session_id, node_id)
        SELECT seq, session_id, node_id FROM search_outbox ORDER BY seq""",
    "DROP TABLE search_outbox",
    "ALTER TABLE search_outbox_v7 RENAME TO search_outbox",
)

# v8: a message's text travels in its outbox row (``body``). It never changes once stored, so the
# flush indexes the row as it is instead of reading the node back and parsing its content (about
# a third of what a flush cost a row). The row is deleted once flushed: the copy is the WAL's
# traffic and room in the outbox's pages until then (bounded: ``search_outbox.OUTBOX_BODY_MAX``).
# ``body`` is NULL for a longer text, for a title (which changes: the flush reads the current one)
# and for the rows an older writer queued (the flush reads their nodes, as before).
_V8 = ("ALTER TABLE search_outbox ADD COLUMN body TEXT",)

# Ordered; a version is never edited once released, only new ones appended.
MIGRATIONS: Final[tuple[tuple[int, Migration], ...]] = (
    (1, _statements(*_V1)),
    (2, _statements(*_V2)),
    (3, _statements(*_V3)),
    (4, _statements(*_V4)),
    (5, _statements(*_V5)),
    (6, _statements(*_V6)),
    (7, _statements(*_V7)),
    (8, _statements(*_V8)),
)
# The catalog file (``<db_path>``) only records how sessions are spread over shard files.
CATALOG_MIGRATIONS: Final[tuple[tuple[int, Migration], ...]] = (
    (
        1,
        _statements(
            "CREATE TABLE shard_layout (id INTEGER PRIMARY KEY CHECK (id = 1), "
            "shard_count INTEGER NOT NULL)"
        ),
    ),
    (2, _statements(*_CATALOG_V2)),
    (3, _statements(*_CATALOG_V3)),
    (4, _statements(*_CATALOG_V4)),
)


def applied_versions(conn: sqlite3.Connection) -> set[int]:
    """Versions recorded in ``schema_migrations`` (creating the table if needed)."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations "
        "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    return {int(v) for (v,) in conn.execute("SELECT version FROM schema_migrations")}


def migrate(
    conn: sqlite3.Connection, migrations: tuple[tuple[int, Migration], ...] = MIGRATIONS
) -> list[int]:
    """Apply missing migrations in order, all in one transaction; return those applied.

    A database is left at the version it had or at the newest, never between: a migration that
    fails rolls back every one applied with it, and the error reaches the caller. Idempotent:
    on a current database nothing runs and nothing changes. ``conn`` must be in autocommit mode
    (``isolation_level=None``) so that the explicit transaction below is real.
    """
    done = applied_versions(conn)
    newest = max(v for v, _ in migrations)
    if done and max(done) > newest:
        # Written by a newer writer: this one would misread it (e.g. take repeats of commands
        # it stores no receipts for as new commands). Refuse rather than guess.
        raise RuntimeError(
            f"the database is at schema version {max(done)}, newer than this writer knows "
            f"({newest}): run the newer version"
        )
    if all(version in done for version, _ in migrations):
        return []
    applied: list[int] = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Read again inside the write lock: another opener may have applied some meanwhile.
        done = {int(v) for (v,) in conn.execute("SELECT version FROM schema_migrations")}
        now = datetime.now(UTC).isoformat(timespec="microseconds")
        for version, migration in migrations:
            if version in done:
                continue
            migration(conn)
            conn.execute(
                "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                (version, now),
            )
            applied.append(version)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return applied
