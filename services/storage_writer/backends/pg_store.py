"""The PostgreSQL backend's writer and query engine: SQLite's, over :class:`.pg_conn.PgConn`.

:class:`PgWriter` is :class:`~services.storage_writer.writer.Writer` — the same group commit, a
savepoint per command, receipts in the command's transaction — with one connection for every
session (the tables are shared, so a batch is one transaction) and the search index written in
that same transaction: on PostgreSQL the index and the rows it indexes commit together.
:class:`PgQueryEngine` is :class:`~services.storage_writer.queries.QueryEngine` on one read-only
connection, with the search done by PostgreSQL's full-text search instead of FTS5.

A connection that broke (the server restarted, a standby was promoted) is replaced on the next
batch or query; the batch that hit the break fails whole and stays pending on the bus, so it is
applied again (idempotently) once the server answers.
"""

from __future__ import annotations

import json
import re
import sqlite3
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from agent_core.bus.contracts.storage import QueryReply, SearchSessions, StorageQuery
from agent_core.errors import AgentCoreError
from agent_core.files import FileStore
from services.storage_writer.backends.pg_conn import PgConn
from services.storage_writer.queries import QueryEngine, _visible_session
from services.storage_writer.search_index import IndexOp, snippet
from services.storage_writer.shards import ShardLayout
from services.storage_writer.writer import Writer

__all__ = ["PgQueryEngine", "PgWriter", "apply_index_ops", "single_layout"]

Connect = Callable[[], PgConn]

_WORD: Final = re.compile(r"\w+", re.UNICODE)
_MAX_TERMS: Final = 12
_SEARCH_ROUND: Final = 200


def single_layout() -> ShardLayout:
    """One "shard" for every session: PostgreSQL's tables are shared (no files behind it)."""
    return ShardLayout(Path("postgres"), 1)


def fold(text: str) -> str:
    """Lower case without accents, as SQLite's ``unicode61 remove_diacritics 2``: "Café" and
    "cafe" are one word to the index."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


class PgWriter(Writer):
    """The writer over PostgreSQL (one thread calls it, as the SQLite writer)."""

    def __init__(
        self,
        connect: Connect,
        data_dir: Path,
        json_threshold_bytes: int,
        *,
        first: PgConn | None = None,
        files: FileStore | None = None,
    ) -> None:
        super().__init__(single_layout(), data_dir, json_threshold_bytes, files=files)
        self._connect = connect
        self._pg: PgConn | None = first

    # The shared writer's code is typed against sqlite3's connection; PgConn provides the part
    # of that API it uses (execute, executemany, in_transaction) for PostgreSQL.
    def _conn(self, shard: int) -> sqlite3.Connection:
        if self._pg is None or self._pg.raw.closed or self._pg.raw.broken:
            if self._pg is not None:
                self._pg.close()
            self._pg = self._connect()
        return self._pg  # type: ignore[return-value]  # see PgWriter._conn

    def _write_index(self, ops: list[IndexOp]) -> None:
        """In the batch's own transaction (the writer's one connection)."""
        apply_index_ops(self._conn(0), ops)  # type: ignore[arg-type]

    def close(self) -> None:
        """Close the connection."""
        if self._pg is not None:
            self._pg.close()
            self._pg = None


def apply_index_ops(conn: PgConn, ops: list[IndexOp]) -> None:
    """The search index's and audit log's changes (``search_index.IndexOp``), in the caller's
    transaction. Idempotent, as SQLite's: a replaced text gets a new rowid (newest first)."""
    for op in ops:
        if op.node_id is None:
            conn.execute("DELETE FROM search_docs WHERE session_id = ?", (op.session_id,))
        else:
            conn.execute(
                "DELETE FROM search_docs WHERE session_id = ? AND node_id = ?",
                (op.session_id, op.node_id),
            )
            if op.text is not None:
                conn.execute(
                    "INSERT INTO search_docs (session_id, node_id, account_id, body, tsv) "
                    "VALUES (?, ?, ?, ?, to_tsvector('simple', ?))",
                    (op.session_id, op.node_id, op.account_id, op.text, fold(op.text)),
                )
        if op.audit is not None:
            a = op.audit
            conn.execute(
                "INSERT INTO account_audit (event_id, account_id, event_type, session_id, "
                "payload_json, created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (
                    a.event_id,
                    a.account_id,
                    a.event_type,
                    a.session_id,
                    json.dumps(a.payload, separators=(",", ":"), ensure_ascii=False),
                    a.created_at,
                ),
            )


def ts_query(query: str) -> str | None:
    """A ``to_tsquery('simple', …)`` text for a user's query: every word (folded, quoted), the
    last also as a prefix once it has three characters; ``None`` without a word."""
    words = [fold(w) for w in _WORD.findall(query)[:_MAX_TERMS]]
    if not words:
        return None
    terms = [f"'{w}'" for w in words]  # \w+ only: no quote or operator inside
    if len(words[-1]) >= 3:
        terms[-1] += ":*"
    return " & ".join(terms)


class PgQueryEngine(QueryEngine):
    """The query engine on one read-only PostgreSQL connection."""

    def __init__(self, connect: Connect) -> None:
        super().__init__(single_layout())
        self._connect = connect
        self._pg: PgConn | None = None

    def _conn(self, shard: int) -> sqlite3.Connection:
        if self._pg is None or self._pg.raw.closed or self._pg.raw.broken:
            if self._pg is not None:
                self._pg.close()
            self._pg = self._connect()
            self._pg.execute("SET default_transaction_read_only = on")
        return self._pg  # type: ignore[return-value]  # see PgWriter._conn

    def close(self) -> None:
        """Close the connection."""
        if self._pg is not None:
            self._pg.close()
            self._pg = None

    def answer(self, query: StorageQuery) -> QueryReply:
        """As the SQLite engine's, with the search by PostgreSQL's full-text search."""
        if isinstance(query, SearchSessions):
            try:
                return QueryReply(ok=True, data=self._search(query))
            except AgentCoreError as exc:
                return QueryReply(ok=False, error=exc.to_payload())
        return super().answer(query)

    def _search(self, q: SearchSessions) -> list[dict[str, Any]]:
        """The account's matching rows newest first, up to ``limit`` distinct visible sessions
        (as ``queries._search_sessions``)."""
        expression = ts_query(q.q)
        if expression is None:
            return []
        conn: PgConn = self._conn(0)  # type: ignore[assignment]
        found: list[dict[str, Any]] = []
        seen: set[str] = set()
        last: int | None = None
        while len(found) < q.limit:
            bound = "" if last is None else "AND rowid < ? "
            args: tuple[Any, ...] = (q.account_id, expression)
            if last is not None:
                args += (last,)
            rows = conn.execute(
                "SELECT rowid AS row_no, session_id, node_id, body FROM search_docs "
                f"WHERE account_id = ? AND tsv @@ to_tsquery('simple', ?) {bound}"
                f"ORDER BY rowid DESC LIMIT {_SEARCH_ROUND}",
                args,
            ).fetchall()
            for _row_no, session_id, node_id, body in rows:
                if session_id in seen:
                    continue
                seen.add(session_id)
                session = _visible_session(self, session_id, q)
                if session is not None:
                    item = {"session": session, "node_id": node_id or None}
                    found.append({**item, "snippet": snippet(body, q.q)})
                    if len(found) == q.limit:
                        break
            if len(rows) < _SEARCH_ROUND:
                break
            last = int(rows[-1][0])
        return found
