"""A writer and a query engine on a fresh database, once per backend: real SQLite files in
tmp_path (4 shards), and PostgreSQL (tests/engines/postgres.py: one server per pytest process,
one database per module, emptied before each test)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from services.storage_writer.backends.pg_schema import migrate
from services.storage_writer.backends.pg_store import PgQueryEngine, PgWriter
from services.storage_writer.backends.postgres import open_connection
from services.storage_writer.queries import QueryEngine
from services.storage_writer.shards import open_catalog
from services.storage_writer.writer import Writer
from tests.engines.postgres import postgres_cluster, postgres_dsn

__all__ = ["postgres_cluster", "postgres_dsn"]

BACKENDS = ("sqlite", "postgres")
# Every table with rows (the layout and the applied migrations stay).
_TABLES = (
    "sessions, agents, runs, nodes, events, artifacts, command_receipts, usage_totals, "
    "assistants, assistant_versions, search_docs, account_audit, partition_owners"
)
_MIGRATED: set[str] = set()


def empty_postgres(dsn: str) -> None:
    """Migrate the module's database once, and empty it."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        if dsn not in _MIGRATED:
            migrate(conn, partitions=1)
            _MIGRATED.add(dsn)
        conn.execute(f"TRUNCATE {_TABLES} RESTART IDENTITY")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The backend under test."""
    return str(request.param)


@pytest.fixture
def writer(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Writer]:
    """A writer with a 1 KiB json-artifact threshold: over 4 SQLite shards, or PostgreSQL."""
    w: Writer
    if backend == "postgres":
        dsn: str = request.getfixturevalue("postgres_dsn")
        empty_postgres(dsn)
        w = PgWriter(lambda: open_connection(dsn), tmp_path / "artifacts", 1024)
        w.dsn = dsn  # type: ignore[attr-defined]  # the engine fixture opens its own
    else:
        layout = open_catalog(tmp_path / "sessions.sqlite", shard_count=4)
        w = Writer(layout, tmp_path / "artifacts", 1024)
    yield w
    w.close()


def open_engine(writer: Writer) -> QueryEngine:
    """A query engine over what ``writer`` wrote, on the same backend (close it)."""
    dsn: Any = getattr(writer, "dsn", None)
    return PgQueryEngine(lambda: open_connection(dsn)) if dsn else QueryEngine(writer.layout)


@pytest.fixture
def engine(writer: Writer) -> Iterator[QueryEngine]:
    """Read-only queries over what the writer wrote."""
    e = open_engine(writer)
    yield e
    e.close()


@pytest.fixture
def sqlite_writer(tmp_path: Path) -> Iterator[Writer]:
    """A writer over 4 SQLite shards, for what only SQLite has (its files, shards, disk full)."""
    w = Writer(
        open_catalog(tmp_path / "sessions.sqlite", shard_count=4), tmp_path / "artifacts", 1024
    )
    yield w
    w.close()


def read_rows(writer: Writer, session_id: str, sql: str) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` (SQLite's dialect, a session's tables named as in SQLite) read beside
    the writer: from the session's shard file, or from PostgreSQL."""
    dsn = getattr(writer, "dsn", None)
    if dsn is not None:
        pg = open_connection(dsn)
        try:
            return [tuple(r) for r in pg.execute(sql).fetchall()]
        finally:
            pg.close()
    conn = sqlite3.connect(writer.layout.path(writer.layout.shard_of(session_id)))
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def index_terms(db: Path) -> dict[str, int]:
    """Every term the index holds -> how many rows hold it, after FTS5's own consistency check
    of the index (which fails on a row taken out with other words than it was given)."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("INSERT INTO search (search) VALUES ('integrity-check')")
        conn.execute("CREATE VIRTUAL TABLE temp.terms USING fts5vocab(main, search, 'row')")
        return dict(conn.execute("SELECT term, doc FROM temp.terms").fetchall())
    finally:
        conn.close()
