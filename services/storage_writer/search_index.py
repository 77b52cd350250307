"""The account-level search index and audit log, in the catalog file (``<db_path>``).

Why the catalog: a session's rows live in the shard its id hashes to, so an index kept in the
shards would make an account-wide search open all 64 files. The catalog is one file the writer
already owns; it holds

* ``search`` — a contentless FTS5 table (the tokens only), one row per indexed text: a session's
  title (``node_id`` ``''``) or the text blocks of one user or assistant message node. ``scope``
  is a single token derived from the account id (:func:`scope_token`), so the account filter is
  part of the match and the search of one account never reads another's rows.
* ``search_rows`` — maps the FTS rowid to ``(session_id, node_id)`` and back, so that a row can
  be replaced (a new title) or a session's rows removed without a scan, and keeps a title's text
  (``title``). A message's text is not kept: it is its node's, which never changes, read from
  the shard when a result is shown (``search_texts.indexed_text``). SQLite before 3.43 takes a
  row out of a contentless table only given the exact text it indexed, so a session's deletion
  reads its messages' texts before its tables go (``search_texts.message_texts``). A search
  returns only rows that ``search_rows`` maps.
* ``account_audit`` — account-level events that outlive their session (``session_deleted``): the
  session's own timeline is deleted with it.

How it stays true to the shards: appliers only *collect* :class:`IndexOp` s while a shard's
transaction is open (:class:`IndexBuffer`). With SQLite the texts (a message, a title) are not
written to FTS5 on the command path: FTS5 flushes a segment per transaction (~100 µs even for one
row, ~20 µs a row in transactions of hundreds), so ``search_outbox.defer_ops`` queues them (session, node,
and a message's text up to ``OUTBOX_BODY_MAX``) in the shard's ``search_outbox``, in the shard's
own transaction — it commits atomically with the node or title it names, and survives a crash
with it. ``search_outbox.flush_outbox``
later indexes the current text of every queued row of many shards in one catalog transaction (the writer does so on a short timer, once many
rows are pending, before any search, at start-up and at close). A session's deletion and its
audit row are not deferred: they go to the catalog in one transaction before the shard commits
(:func:`apply_ops`), and the session's pending rows are deleted in the shard's transaction. Every
op is idempotent (an upsert keyed by ``(session_id, node_id)``, a delete, an audit row keyed by
its event id) and a shard's outbox rows are applied in their order, so applying rows again after
a crash (the catalog committed, the shard had not yet dropped them) changes nothing; a crash
between the catalog's and the shard's commit of a deletion leaves the index ahead of a shard
whose batch is redelivered and applied again — never behind it. (A shard whose COMMIT fails for a
full disk refuses its commands as ``storage_full``: a sender that never retries leaves index rows
of texts that were not stored; a search then still finds only sessions that exist, its snippet
may quote such a text.) The catalog's tables are its migration 2 (``schema.CATALOG_MIGRATIONS``),
the outbox is the shards' migration 6 (``schema.MIGRATIONS``); queries read the index on the
engine's read-only catalog connection.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from services.storage_writer.search_texts import message_texts, title_of

__all__ = [
    "AUDIT_COLUMNS",
    "AuditRow",
    "IndexBuffer",
    "IndexOp",
    "apply_ops",
    "backfill_shard",
    "scope_token",
]

log = logging.getLogger("soong.storage_writer")

AUDIT_COLUMNS: Final = "seq, event_id, account_id, event_type, session_id, payload_json, created_at"


@functools.lru_cache(maxsize=4096)  # a flush names the same few accounts hundreds of times
def scope_token(account_id: str) -> str:
    """The one token standing for an account in the ``scope`` column (letters and digits only,
    so the tokenizer keeps it whole)."""
    return "a" + hashlib.blake2b(account_id.encode(), digest_size=10).hexdigest()


@dataclass(frozen=True)
class AuditRow:
    """An account-level event; ``event_id`` makes writing it again a no-op."""

    event_id: str
    account_id: str
    event_type: str
    session_id: str | None
    payload: dict[str, Any]
    created_at: str


@dataclass(frozen=True)
class IndexOp:
    """One change to the catalog: put a text (``text`` set), drop one text (``text`` None and
    ``node_id`` set), drop a whole session (``node_id`` None; ``texts`` are its messages' texts
    by node, ``search_texts.message_texts``), and/or write an audit row."""

    session_id: str
    account_id: str
    node_id: str | None
    text: str | None = None
    audit: AuditRow | None = None
    texts: Mapping[str, str] | None = None


@dataclass
class IndexBuffer:
    """The ops collected for the shard being written; a refused command's are dropped."""

    ops: list[IndexOp] = field(default_factory=list)
    # Queued in the shard's outbox (SQLite): an op then needs only its session and node, the
    # flush reads the rest (account, text) as they are then.
    deferred: bool = False

    def mark(self) -> int:
        """Where the current command's ops start."""
        return len(self.ops)

    def rollback(self, mark: int) -> None:
        """Drop the ops added since ``mark`` (the command was refused)."""
        del self.ops[mark:]

    def take(self) -> list[IndexOp]:
        """Every op collected so far; the buffer is empty afterwards."""
        ops, self.ops = self.ops, []
        return ops


def apply_ops(conn: sqlite3.Connection, ops: list[IndexOp], *, flush: bool = False) -> None:
    """Apply ``ops`` in one transaction of the catalog connection ``conn`` (autocommit mode).

    ``flush``: the ops index what a flush read from the shards, maybe beside the writer (the
    index's own process): a session whose deletion the catalog has recorded by the time this
    transaction holds the catalog's lock gets none of its texts indexed, since the deletion
    has taken out what the index held of it already and nothing would take these out again."""
    if not ops:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        if flush:
            gone = _deleted_sessions(conn, sorted({op.session_id for op in ops}))
            ops = [op for op in ops if op.session_id not in gone] if gone else ops
        messages: list[IndexOp] = []
        for op in ops:
            if op.node_id and op.text is not None and op.audit is None:
                messages.append(op)  # most ops: indexed together, before the next other op
                continue
            _put_messages(conn, messages)
            messages = []
            _apply(conn, op)
        _put_messages(conn, messages)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _deleted_sessions(conn: sqlite3.Connection, session_ids: list[str]) -> set[str]:
    gone: set[str] = set()
    for i in range(0, len(session_ids), 500):
        chunk = session_ids[i : i + 500]
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            "SELECT session_id FROM account_audit WHERE event_type = 'session_deleted' "
            f"AND session_id IN ({marks})",
            chunk,
        )
        gone.update(r[0] for r in rows)
    return gone


def _apply(conn: sqlite3.Connection, op: IndexOp) -> None:
    if op.node_id is None:
        texts = op.texts or {}
        rows = conn.execute(
            "SELECT row_id, node_id, title FROM search_rows WHERE session_id = ?", (op.session_id,)
        ).fetchall()
        for row_id, node_id, title in rows:
            _unindex(conn, row_id, op.account_id, title if node_id == "" else texts.get(node_id))
        conn.execute("DELETE FROM search_rows WHERE session_id = ?", (op.session_id,))
    else:
        _put(conn, op, op.node_id)
    if op.audit is not None:
        a = op.audit
        conn.execute(
            "INSERT OR IGNORE INTO account_audit (event_id, account_id, event_type, session_id, "
            "payload_json, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (
                a.event_id,
                a.account_id,
                a.event_type,
                a.session_id,
                json.dumps(a.payload, separators=(",", ":"), ensure_ascii=False),
                a.created_at,
            ),
        )


def _put_messages(conn: sqlite3.Connection, ops: list[IndexOp]) -> None:
    """Index the texts of messages (``ops``: each with its node and text) in three statements
    however many they are: their ``search_rows`` rows, the rows just added, their words.

    A message's text never changes, so a row already there is indexed already (a batch applied
    again) and is skipped. Rows just added are those above the highest ``row_id`` before:
    AUTOINCREMENT never gives a row an id at or below one it gave before."""
    if not ops:
        return
    (before,) = conn.execute("SELECT coalesce(max(row_id), 0) FROM search_rows").fetchone()
    conn.executemany(
        "INSERT INTO search_rows (session_id, node_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
        [(op.session_id, op.node_id) for op in ops],
    )
    added = conn.execute(
        "SELECT row_id, session_id, node_id FROM search_rows WHERE row_id > ? ORDER BY row_id",
        (before,),
    ).fetchall()
    if not added:
        return
    by_key = {(op.session_id, op.node_id): op for op in reversed(ops)}  # the first op of a key
    rows = []
    for row_id, session_id, node_id in added:
        op = by_key[session_id, node_id]
        rows.append((row_id, op.text, scope_token(op.account_id)))
    conn.executemany("INSERT INTO search (rowid, body, scope) VALUES (?, ?, ?)", rows)


def _put(conn: sqlite3.Connection, op: IndexOp, node_id: str) -> None:
    """Make the index hold ``op.text`` for the row ``(op.session_id, node_id)``, or none."""
    title = node_id == ""
    if not title and op.text is not None:
        _put_messages(conn, [op])
        return
    old = conn.execute(
        "SELECT row_id, title FROM search_rows WHERE session_id = ? AND node_id = ?",
        (op.session_id, node_id),
    ).fetchone()
    if old is not None:
        _unindex(conn, old[0], op.account_id, old[1] if title else None)
        conn.execute("DELETE FROM search_rows WHERE row_id = ?", (old[0],))
    if op.text is None:
        return
    # A new rowid each time: results come newest first by rowid, so a renamed session ranks as
    # recently touched.
    cur = conn.execute(
        "INSERT INTO search_rows (session_id, node_id, title) VALUES (?, ?, ?)",
        (op.session_id, node_id, op.text if title else None),
    )
    _index(conn, cur.lastrowid, op.text, op.account_id)


def _index(conn: sqlite3.Connection, row_id: int | None, text: str, account_id: str) -> None:
    conn.execute(
        "INSERT INTO search (rowid, body, scope) VALUES (?, ?, ?)",
        (row_id, text, scope_token(account_id)),
    )


def _unindex(conn: sqlite3.Connection, row_id: int, account_id: str, text: str | None) -> None:
    """Take row ``row_id``'s words out of the contentless table: FTS5's ``delete`` command, given
    exactly the values the row was indexed with. The caller drops its ``search_rows`` row.

    Without them (a message whose node is gone, a session whose account is not known: neither
    happens on the writer's own paths) the words stay, and no search returns them: a search
    returns only rows ``search_rows`` maps. A wrong text given here would leave the index
    inconsistent, so none is guessed."""
    if text is None or not account_id:
        log.warning("search row %d left unreachable in the index (its text is gone)", row_id)
        return
    conn.execute(
        "INSERT INTO search (search, rowid, body, scope) VALUES ('delete', ?, ?, ?)",
        (row_id, text, scope_token(account_id)),
    )


def backfill_shard(shard: sqlite3.Connection) -> Iterator[IndexOp]:
    """The ops that index every session of one shard (a catalog made before the index existed)."""
    sessions = shard.execute("SELECT session_id, account_id, metadata_json FROM sessions")
    for session_id, account_id, metadata_json in sessions.fetchall():
        title = title_of(json.loads(metadata_json) if metadata_json else None)
        if title is not None:
            yield IndexOp(session_id, account_id, "", title)
        for node_id, text in message_texts(shard, session_id):
            yield IndexOp(session_id, account_id, node_id, text)
