"""The PostgreSQL schema: shared tables keyed by session, and migrations that run once.

Unlike SQLite's layout (per-session node and event tables in shard files, see
``services.storage_writer.shards``), PostgreSQL keeps every session in the same tables: one
catalog parse, one set of indexes, and ``session_id`` leads every key a session's rows are read
by, so a session's nodes and events stay together in their B-trees.

Column choices:

- Times are ``timestamptz`` (UTC); amounts and counters ``bigint``.
- Documents the API returns as they were written (a node's content, an event's payload,
  metadata) are ``json``, not ``jsonb``: ``json`` keeps the text as written, key order included,
  so an answer is the same before and after ``migrate-data`` moves a SQLite home here.
- Sequence numbers: ``sessions.last_node_seq`` / ``last_event_seq`` are bumped by the command
  that places a node or event, in the same transaction (one writer owns a session's partition, so
  there is no race; the row lock would serialise one if there were). Gap-free, like SQLite's.
- ``partition`` of a session is fixed at creation (``layout.partitions`` is fixed too), so a
  partition's owner finds its sessions by index.

Migrations are applied in one transaction each, under a transaction-level advisory lock, so two
writers starting together apply each version once; a database newer than this writer is refused.
"""

from __future__ import annotations

from typing import Final

import psycopg

from agent_core.errors import StorageError

__all__ = ["MIGRATIONS", "MIGRATION_LOCK", "migrate", "schema_version"]

# pg_advisory_xact_lock key of the migrations ("soong" in ASCII, any constant would do).
MIGRATION_LOCK: Final = 0x736F6F6E67

_V1: Final = (
    """CREATE TABLE layout (
        id smallint PRIMARY KEY CHECK (id = 1), partitions integer NOT NULL
        CHECK (partitions BETWEEN 1 AND 256))""",
    """CREATE TABLE sessions (
        session_id text PRIMARY KEY, partition integer NOT NULL, account_id text NOT NULL,
        cwd text NOT NULL, root_agent_id text NOT NULL, active_node_id text,
        parent_session_id text, status text NOT NULL, metadata json,
        last_node_seq bigint NOT NULL DEFAULT 0, last_event_seq bigint NOT NULL DEFAULT 0,
        created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL)""",
    "CREATE INDEX sessions_account ON sessions (account_id, created_at DESC, session_id DESC)",
    """CREATE INDEX sessions_account_status
        ON sessions (account_id, status, created_at DESC, session_id DESC)""",
    "CREATE INDEX sessions_partition ON sessions (partition)",
    """CREATE TABLE agents (
        agent_id text PRIMARY KEY, session_id text NOT NULL, parent_agent_id text,
        agent_type text NOT NULL, created_by_run_id text, fork_from_node_id text,
        status text NOT NULL, result json, metadata json, created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL)""",
    "CREATE INDEX agents_session ON agents (session_id, created_at)",
    """CREATE TABLE runs (
        run_id text PRIMARY KEY, session_id text NOT NULL, agent_id text NOT NULL,
        status text NOT NULL, attempt integer NOT NULL DEFAULT 0, claim_command_id text,
        start_node_id text, end_node_id text, end_reason text, turn_count integer,
        usage json, error json, metadata json, created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL)""",
    "CREATE INDEX runs_session ON runs (session_id, created_at)",
    """CREATE TABLE nodes (
        session_id text NOT NULL, node_seq bigint NOT NULL, node_id text NOT NULL,
        parent_id text, agent_id text NOT NULL, run_id text, role text NOT NULL,
        node_type text NOT NULL, content json NOT NULL, metadata json, token_count integer,
        created_at timestamptz NOT NULL,
        PRIMARY KEY (session_id, node_seq), UNIQUE (session_id, node_id))""",
    """CREATE TABLE events (
        session_id text NOT NULL, seq bigint NOT NULL, event_id text NOT NULL,
        run_seq bigint, agent_id text, run_id text, level text NOT NULL,
        event_type text NOT NULL, node_id text, tool_call_id text, payload json,
        created_at timestamptz NOT NULL,
        PRIMARY KEY (session_id, seq), UNIQUE (session_id, event_id),
        UNIQUE (session_id, run_id, run_seq))""",
    """CREATE TABLE artifacts (
        artifact_id text PRIMARY KEY, session_id text NOT NULL, agent_id text, run_id text,
        node_id text, tool_call_id text, path text NOT NULL, filename text, mime_type text,
        size_bytes bigint, summary text, metadata json, created_at timestamptz NOT NULL)""",
    "CREATE INDEX artifacts_session ON artifacts (session_id, created_at)",
    # The result of every applied command that its own rows do not record (see the writer).
    """CREATE TABLE command_receipts (
        command_id text PRIMARY KEY, session_id text NOT NULL, result json NOT NULL,
        created_at timestamptz NOT NULL)""",
    """CREATE TABLE usage_totals (
        account_id text NOT NULL, day date NOT NULL, model text NOT NULL,
        session_id text NOT NULL, runs bigint NOT NULL, input_tokens bigint NOT NULL,
        output_tokens bigint NOT NULL, cache_read_tokens bigint NOT NULL,
        cache_write_tokens bigint NOT NULL, PRIMARY KEY (account_id, day, model, session_id))""",
    "CREATE INDEX usage_totals_session ON usage_totals (session_id)",
    """CREATE TABLE assistants (
        assistant_id text PRIMARY KEY, account_id text NOT NULL, name text NOT NULL,
        version integer NOT NULL, status text NOT NULL, created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL)""",
    """CREATE UNIQUE INDEX assistants_active_name ON assistants (account_id, name)
        WHERE status = 'active'""",
    "CREATE INDEX assistants_account ON assistants (account_id, name)",
    """CREATE TABLE assistant_versions (
        assistant_id text NOT NULL, version integer NOT NULL, definition json NOT NULL,
        created_at timestamptz NOT NULL, PRIMARY KEY (assistant_id, version))""",
    # The account-level search index: PostgreSQL's own full-text search over a generated
    # tsvector ('simple': no stemming, as SQLite's unicode61 tokenizer does none either).
    """CREATE TABLE search_docs (
        session_id text NOT NULL, node_id text NOT NULL, account_id text NOT NULL,
        scope text NOT NULL, body text NOT NULL,
        tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED,
        PRIMARY KEY (session_id, node_id))""",
    "CREATE INDEX search_docs_tsv ON search_docs USING gin (tsv)",
    "CREATE INDEX search_docs_account ON search_docs (account_id)",
    """CREATE TABLE account_audit (
        seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, event_id text NOT NULL UNIQUE,
        account_id text NOT NULL, event_type text NOT NULL, session_id text, payload json,
        created_at timestamptz NOT NULL)""",
    "CREATE INDEX account_audit_account ON account_audit (account_id, seq)",
    # Who owns each partition now (advisory locks decide; this row says who, for operators).
    """CREATE TABLE partition_owners (
        partition integer PRIMARY KEY, owner text NOT NULL, since timestamptz NOT NULL)""",
)

# Ordered; a released version is never edited, only new ones appended.
MIGRATIONS: Final[tuple[tuple[int, tuple[str, ...]], ...]] = ((1, _V1),)


def schema_version(conn: psycopg.Connection[tuple[object, ...]]) -> int:
    """The newest applied version (0: an empty database)."""
    row = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()
    if row is None or not row[0]:
        return 0
    (newest,) = conn.execute(
        "SELECT coalesce(max(version), 0) FROM schema_migrations"
    ).fetchone() or (0,)
    return int(str(newest))


def migrate(conn: psycopg.Connection[tuple[object, ...]], partitions: int) -> list[int]:
    """Apply the missing migrations, each once; return the versions applied now.

    ``conn`` must be in autocommit mode: each version runs in a transaction of its own, taken
    under :data:`MIGRATION_LOCK` so that a second writer starting at the same moment waits, then
    finds the version applied. ``partitions`` is recorded by the first run and kept after.
    """
    applied: list[int] = []
    newest = max(v for v, _ in MIGRATIONS)
    for version, statements in MIGRATIONS:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                "version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            current = schema_version(conn)
            if current > newest:
                raise StorageError(
                    "schema_too_new",
                    f"the database is at schema version {current}, newer than this writer knows "
                    f"({newest}): run the newer version",
                    details={"schema_version": current, "known": newest},
                )
            done = conn.execute(
                "SELECT 1 FROM schema_migrations WHERE version = %s", (version,)
            ).fetchone()
            if done is not None:
                continue
            for statement in statements:
                conn.execute(statement)
            if version == 1:
                conn.execute("INSERT INTO layout (id, partitions) VALUES (1, %s)", (partitions,))
            conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (version,))
            applied.append(version)
    return applied
