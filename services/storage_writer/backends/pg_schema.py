"""The PostgreSQL schema: shared tables keyed by session, and migrations that run once.

Unlike SQLite's layout (per-session node and event tables in shard files, see
``services.storage_writer.shards``), PostgreSQL keeps every session in the same tables: one
catalog parse, one set of indexes, and ``session_id`` leads every key a session's rows are read
by, so a session's nodes and events stay together in their B-trees.

Column choices:

- Column names are SQLite's (``metadata_json``, ``content_json`` ...): the appliers and queries
  are shared by both backends (:mod:`.pg_conn` speaks their SQL to PostgreSQL).
- Times are ``timestamptz`` (UTC), usage days ``date``; the connection reads both back as the ISO
  text SQLite stores, so answers are the same on both backends.
- Documents the API returns as they were written (a node's content, an event's payload,
  metadata) are ``json``, not ``jsonb``: ``json`` keeps the text as written, key order included,
  so an answer is the same before and after ``migrate-data`` moves a SQLite home here.
- A session's nodes and events are read through the views ``session_nodes`` and
  ``session_events``: the rows of the session named by the connection's ``soong.session_id``
  setting, without the key column, i.e. exactly SQLite's per-session tables. The views are simply
  updatable, so the shared SQL inserts, updates and deletes through them too; the base tables'
  ``session_id`` defaults to the setting.
- Sequence numbers (``node_seq``, ``seq``) are given by a trigger, ``max + 1`` within the
  session, in the inserting transaction: gap-free like SQLite's rowids, as rows are never deleted
  but with their session, and one writer owns a session's partition.
- ``rowid`` (agents, runs, artifacts, search rows) is an identity column standing for SQLite's
  implicit rowid (insertion order breaks ties of one batch's timestamps); the connection hides it
  from ``SELECT *`` as SQLite does.

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

_SESSION: Final = "current_setting('soong.session_id', true)"


def _seq_trigger(table: str, column: str, function: str) -> tuple[str, str]:
    """The function and trigger that number ``table``'s rows by ``column``: ``max + 1`` within
    the row's session, when the insert gives none (a move copies the numbers it has)."""
    return (
        f"""CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.{column} IS NULL THEN
            SELECT coalesce(max({column}), 0) + 1 INTO NEW.{column}
              FROM {table} WHERE session_id = NEW.session_id;
          END IF;
          RETURN NEW;
        END $$""",
        f"""CREATE TRIGGER {table}_seq BEFORE INSERT ON {table}
        FOR EACH ROW EXECUTE FUNCTION {function}()""",
    )


_V1: Final = (
    """CREATE TABLE layout (
        id smallint PRIMARY KEY CHECK (id = 1), partitions integer NOT NULL
        CHECK (partitions BETWEEN 1 AND 256))""",
    """CREATE TABLE sessions (
        session_id text PRIMARY KEY, account_id text NOT NULL, cwd text NOT NULL,
        root_agent_id text NOT NULL, active_node_id text, parent_session_id text,
        status text NOT NULL, metadata_json json, created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL)""",
    "CREATE INDEX sessions_account ON sessions (account_id, created_at DESC, session_id DESC)",
    """CREATE INDEX sessions_account_status
        ON sessions (account_id, status, created_at DESC, session_id DESC)""",
    """CREATE TABLE agents (
        agent_id text PRIMARY KEY, session_id text NOT NULL, parent_agent_id text,
        agent_type text NOT NULL, created_by_run_id text, fork_from_node_id text,
        status text NOT NULL, result_json json, metadata_json json,
        created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL,
        rowid bigint GENERATED ALWAYS AS IDENTITY)""",
    "CREATE INDEX agents_session ON agents (session_id, created_at)",
    """CREATE TABLE runs (
        run_id text PRIMARY KEY, session_id text NOT NULL, agent_id text NOT NULL,
        status text NOT NULL, attempt integer NOT NULL DEFAULT 0, start_node_id text,
        end_node_id text, end_reason text, turn_count integer, usage_json json,
        error_json json, metadata_json json, created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL, claim_command_id text,
        rowid bigint GENERATED ALWAYS AS IDENTITY)""",
    "CREATE INDEX runs_session ON runs (session_id, created_at)",
    f"""CREATE TABLE nodes (
        session_id text NOT NULL DEFAULT {_SESSION}, node_seq bigint NOT NULL,
        node_id text NOT NULL, parent_id text, agent_id text NOT NULL, run_id text,
        role text NOT NULL, node_type text NOT NULL, content_json json NOT NULL,
        metadata_json json, token_count integer, created_at timestamptz NOT NULL,
        PRIMARY KEY (session_id, node_seq), UNIQUE (session_id, node_id))""",
    f"""CREATE TABLE events (
        session_id text NOT NULL DEFAULT {_SESSION}, seq bigint NOT NULL,
        event_id text NOT NULL, run_seq bigint, agent_id text, run_id text, level text NOT NULL,
        event_type text NOT NULL, node_id text, tool_call_id text, payload_json json,
        created_at timestamptz NOT NULL,
        PRIMARY KEY (session_id, seq), UNIQUE (session_id, event_id),
        UNIQUE (session_id, run_id, run_seq))""",
    f"""CREATE VIEW session_nodes AS SELECT node_seq, node_id, parent_id, agent_id, run_id, role,
        node_type, content_json, metadata_json, token_count, created_at
        FROM nodes WHERE session_id = {_SESSION}""",
    f"""CREATE VIEW session_events AS SELECT seq, event_id, run_seq, agent_id, run_id, level,
        event_type, node_id, tool_call_id, payload_json, created_at
        FROM events WHERE session_id = {_SESSION}""",
    *_seq_trigger("nodes", "node_seq", "next_node_seq"),
    *_seq_trigger("events", "seq", "next_event_seq"),
    """CREATE TABLE artifacts (
        artifact_id text PRIMARY KEY, session_id text NOT NULL, agent_id text, run_id text,
        node_id text, tool_call_id text, path text NOT NULL, filename text, mime_type text,
        size_bytes bigint, summary text, metadata_json json, created_at timestamptz NOT NULL,
        rowid bigint GENERATED ALWAYS AS IDENTITY)""",
    "CREATE INDEX artifacts_session ON artifacts (session_id, created_at)",
    # The result of every applied command that its own rows do not record (see the writer);
    # created_at in Unix seconds, as SQLite's.
    """CREATE TABLE command_receipts (
        command_id text PRIMARY KEY, session_id text NOT NULL, result_json json NOT NULL,
        created_at bigint NOT NULL)""",
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
        assistant_id text NOT NULL, version integer NOT NULL, definition_json json NOT NULL,
        created_at timestamptz NOT NULL, PRIMARY KEY (assistant_id, version))""",
    # The account-level search index: PostgreSQL's own full-text search ('simple': no stemming,
    # as SQLite's unicode61 tokenizer does none either) over the body folded by the writer
    # (lower case, no accents: pg_store.fold); newest first by rowid, as from SQLite's FTS5.
    """CREATE TABLE search_docs (
        rowid bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, session_id text NOT NULL,
        node_id text NOT NULL, account_id text NOT NULL, body text NOT NULL,
        tsv tsvector NOT NULL,
        UNIQUE (session_id, node_id))""",
    "CREATE INDEX search_docs_tsv ON search_docs USING gin (tsv)",
    "CREATE INDEX search_docs_account ON search_docs (account_id, rowid DESC)",
    """CREATE TABLE account_audit (
        seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, event_id text NOT NULL UNIQUE,
        account_id text NOT NULL, event_type text NOT NULL, session_id text, payload_json json,
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
