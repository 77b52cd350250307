"""The PostgreSQL backend's writer and query engine: SQLite's, over :class:`.pg_conn.PgConn`.

:class:`PgWriter` is :class:`~services.storage_writer.writer.Writer` — the same group commit, a
savepoint per command, receipts in the command's transaction — with one connection for every
session (the tables are shared, so a batch is one transaction) and the search index written in
that same transaction: on PostgreSQL the index and the rows it indexes commit together.
:class:`PgQueryEngine` is :class:`~services.storage_writer.queries.QueryEngine` on one read-only
connection, with the search done by PostgreSQL's full-text search instead of FTS5.

A lost connection (the server restarted, its primary died and a standby was promoted) never
refuses a command. The writer holds the batch that met it — the bus reads nothing more meanwhile
— and reconnects with backoff (0.05 s doubling to 1 s), logging the loss, the wait and the
return; the held batch is then applied again on the new connection, idempotently, so a commit
whose answer was lost is answered as the duplicate it is. A multi-host DSN with
``target_session_attrs=read-write`` makes the reconnection find whichever server is the primary
now. Reconnecting means owning the partition again (:func:`.postgres.owned_connection`): if
another writer took it over meanwhile, this writer is superseded and stops
(``writer_superseded``), its batch left pending for the new owner; it never writes without
owning. The query engine reconnects too, answering the query that met the loss on the new
connection.

One savepoint per command keeps a refused command from aborting its batch, but on PostgreSQL
each costs two round trips and a subtransaction (and a batch of more than 64 overflows the
server's per-backend subtransaction cache). A batch is therefore first applied without them
(:attr:`.pg_conn.PgConn.savepoints` off); if a command is refused or a statement fails, that
pass is rolled back whole and the batch is applied again exactly as before, a savepoint per
command. Nothing of the first pass outlives its rollback: the apply context is the batch's, the
receipts are written in the transaction, and artifact files are written idempotently (as for a
batch applied again after a lost connection).
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
import threading
import time
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import psycopg

from agent_core.bus.contracts.storage import (
    CommandReceipt,
    QueryReply,
    SearchSessions,
    StorageCommand,
    StorageQuery,
)
from agent_core.errors import AgentCoreError, StorageError
from agent_core.files import FileStore
from services.storage_writer.backends.pg_conn import PgConn, SavepointNeeded, connection_lost
from services.storage_writer.queries import QueryEngine, _visible_session
from services.storage_writer.search_index import IndexOp
from services.storage_writer.search_query import snippet
from services.storage_writer.shards import ShardLayout
from services.storage_writer.writer import Writer

__all__ = ["PgQueryEngine", "PgWriter", "apply_index_ops", "single_layout"]

log = logging.getLogger("soong.storage_writer")

Connect = Callable[[], PgConn]

_BACKOFF_FIRST_S: Final = 0.05
_BACKOFF_MAX_S: Final = 1.0  # a promoted standby is found within a second of its promotion
_REPORT_EVERY: Final = 10  # attempts between "still reconnecting" lines

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
    """The writer over PostgreSQL (one thread calls it, as the SQLite writer).

    ``superseded`` is set (and ``on_superseded`` called, from the write thread) when another
    writer took the partition over while this one's connection was down; every batch after that
    raises it. :meth:`stop_holding` (any thread) ends a wait for the server: the held batch
    raises and stays pending on the bus.
    """

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
        self._stopping = threading.Event()
        self.superseded: StorageError | None = None
        self.on_superseded: Callable[[], None] | None = None
        self._savepoints = True  # whether the pass under way sets a savepoint per command

    def stop_holding(self) -> None:
        """Give up waiting for the server (the service is stopping)."""
        self._stopping.set()

    def apply_batch(self, commands: Sequence[StorageCommand]) -> list[CommandReceipt]:
        """The shared writer's batch, held through a lost connection (see the module)."""
        lost_at: float | None = None
        delay = _BACKOFF_FIRST_S
        attempts = 0
        while True:
            if self.superseded is not None:
                raise self.superseded
            try:
                receipts = self._apply_passes(commands)
            except (psycopg.OperationalError, StorageError) as exc:
                if not self._lost(exc) or self._stopping.is_set():
                    raise
                attempts += 1
                if lost_at is None:
                    lost_at = time.monotonic()
                    log.warning(
                        "PostgreSQL connection lost (%s); reconnecting, commands held: %d",
                        _brief(exc),
                        len(commands),
                    )
                elif attempts % _REPORT_EVERY == 0:
                    log.warning(
                        "still reconnecting to PostgreSQL after %.1f s (%s); commands held: %d",
                        time.monotonic() - lost_at,
                        _brief(exc),
                        len(commands),
                    )
                self._drop()
                if self._stopping.wait(delay):
                    raise
                delay = min(delay * 2, _BACKOFF_MAX_S)
                continue
            if lost_at is not None:
                log.warning(
                    "reconnected to PostgreSQL at %s after %.1f s; commands held and applied: %d",
                    self._where(),
                    time.monotonic() - lost_at,
                    len(commands),
                )
            return receipts

    def _apply_passes(self, commands: Sequence[StorageCommand]) -> list[CommandReceipt]:
        """The batch without savepoints; again with one per command if a command was refused
        or a statement failed (see the module)."""
        self._savepoints = False
        try:
            return super().apply_batch(commands)
        except SavepointNeeded:
            pass  # rolled back whole by the shared writer; the error, if any, comes again
        finally:
            self._savepoints = True
        return super().apply_batch(commands)

    def _lost(self, exc: Exception) -> bool:
        if isinstance(exc, StorageError):  # from reconnecting: retryable means unreachable
            return exc.code == "postgres_unreachable"
        return connection_lost(exc, self._pg)

    def _drop(self) -> None:
        if self._pg is not None:
            self._pg.close()
            self._pg = None

    def _where(self) -> str:
        info = None if self._pg is None else self._pg.raw.info
        return "?" if info is None else f"{info.host}:{info.port}"

    # The shared writer's code is typed against sqlite3's connection; PgConn provides the part
    # of that API it uses (execute, executemany, in_transaction) for PostgreSQL.
    def _conn(self, shard: int) -> sqlite3.Connection:
        if self._pg is None or self._pg.raw.closed or self._pg.raw.broken:
            self._drop()
            try:
                self._pg = self._connect()
            except StorageError as exc:
                if exc.code == "writer_locked":
                    raise self._supersede(exc) from None
                raise
        self._pg.savepoints = self._savepoints
        return self._pg  # type: ignore[return-value]  # see PgWriter._conn

    def _supersede(self, locked: StorageError) -> StorageError:
        holder = locked.details.get("holder", "unknown")
        self.superseded = StorageError(
            "writer_superseded",
            f"this storage-writer's PostgreSQL connection broke and another writer ({holder}) "
            f"took its partition over meanwhile; it stops and leaves the partition to it",
            details=locked.details,
        )
        log.critical("%s [writer_superseded]", self.superseded.message)
        if self.on_superseded is not None:
            self.on_superseded()
        return self.superseded

    def _write_index(self, ops: list[IndexOp]) -> None:
        """In the batch's own transaction: on the connection the batch began on, never a new
        one (a connection lost mid-batch fails the batch, which is held and applied again)."""
        if self._pg is None:
            raise psycopg.OperationalError("the connection is lost")
        apply_index_ops(self._pg, ops)

    def close(self) -> None:
        """Close the connection."""
        self._drop()


def _brief(exc: Exception) -> str:
    """The first line of an error (psycopg's carry the server's multi-line detail)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


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
        """As the SQLite engine's, with the search by PostgreSQL's full-text search; a query
        that met a lost connection is asked once more on a new one (a read changes nothing)."""
        try:
            return self._answer(query)
        except psycopg.OperationalError as exc:
            if not connection_lost(exc, self._pg):
                raise
            log.warning("PostgreSQL connection lost (%s); the reader reconnects", _brief(exc))
            self.close()
            return self._answer(query)

    def _answer(self, query: StorageQuery) -> QueryReply:
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
