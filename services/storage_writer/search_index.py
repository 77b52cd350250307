"""The account-level search index and audit log, in the catalog file (``<db_path>``).

Why the catalog: a session's rows live in the shard its id hashes to, so an index kept in the
shards would make an account-wide search open all 64 files. The catalog is one file the writer
already owns; it holds

* ``search`` — an FTS5 table, one row per indexed text: a session's title (``node_id`` ``''``)
  or the text blocks of one user or assistant message node. ``scope`` is a single token derived
  from the account id (:func:`scope_token`), so the account filter is part of the match and the
  search of one account never reads another's rows. ``search_rows`` maps ``(session_id,
  node_id)`` to the FTS rowid, so that a row can be replaced (a new title) or a session's rows
  removed without a scan.
* ``account_audit`` — account-level events that outlive their session (``session_deleted``): the
  session's own timeline is deleted with it.

How it stays true to the shards: appliers only *collect* :class:`IndexOp` s while a shard's
transaction is open (:class:`IndexBuffer`); the writer applies them to the catalog in one
transaction **before** it commits the shard (:func:`apply_ops`). Every op is idempotent (an
upsert keyed by ``(session_id, node_id)``, a delete, an audit row keyed by its event id), so a
crash between the two commits leaves the index ahead of a shard whose batch is redelivered and
applied again — never behind it. (A shard whose COMMIT fails for a full disk refuses its
commands as ``storage_full``: a sender that never retries leaves index rows of texts that were
not stored; a search then still finds only sessions that exist, its snippet may quote such a
text.) The tables are the catalog's migration 2 (``schema.CATALOG_MIGRATIONS``); queries read
them on the engine's read-only catalog connection.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from services.storage_writer.schema import nodes_table

__all__ = [
    "AUDIT_COLUMNS",
    "AuditRow",
    "IndexBuffer",
    "IndexOp",
    "apply_ops",
    "backfill_shard",
    "match_expression",
    "node_text",
    "scope_token",
    "snippet",
    "title_of",
]

AUDIT_COLUMNS: Final = "seq, event_id, account_id, event_type, session_id, payload_json, created_at"

# What a message contributes at most: enough to find it, bounded so that a pasted log does not
# make one write index megabytes.
_MAX_BODY_CHARS: Final = 8_000
# The words of a query that are matched (more add nothing but cost).
_MAX_TERMS: Final = 12
_INDEXED_ROLES: Final = frozenset({"user", "assistant"})
_WORD = re.compile(r"\w+", re.UNICODE)


def scope_token(account_id: str) -> str:
    """The one token standing for an account in the ``scope`` column (letters and digits only,
    so the tokenizer keeps it whole)."""
    return "a" + hashlib.blake2b(account_id.encode(), digest_size=10).hexdigest()


def match_expression(account_id: str, query: str) -> str | None:
    """The FTS5 expression for a user's query within one account, or ``None`` if it has no word.

    Each word is matched as a quoted string (so no user text is ever FTS5 syntax), all words
    must occur in the same row, and the last word also matches as a prefix once it has three
    characters (typing "deplo" finds "deploy")."""
    words = _WORD.findall(query)[:_MAX_TERMS]
    if not words:
        return None
    terms = [f'"{w}"' for w in words]
    if len(words[-1]) >= 3:
        terms[-1] += "*"
    return f"scope : {scope_token(account_id)} AND body : ({' AND '.join(terms)})"


_SNIPPET_CHARS: Final = 160


def snippet(body: str, query: str) -> str:
    """Up to ``_SNIPPET_CHARS`` of ``body`` around its first word that a word of ``query``
    starts, with every such word in ``[``…``]`` (made here, not by FTS5's ``snippet()``, which
    would evaluate the whole match again for each result)."""
    wanted = sorted({re.escape(w) for w in _WORD.findall(query)[:_MAX_TERMS]}, key=len)
    if not wanted:
        return body[:_SNIPPET_CHARS]
    pattern = re.compile(r"\b(?:" + "|".join(reversed(wanted)) + r")\w*", re.IGNORECASE)
    first = pattern.search(body)
    start = max(0, first.start() - _SNIPPET_CHARS // 3) if first else 0
    end = min(len(body), start + _SNIPPET_CHARS)
    marked = pattern.sub(lambda m: f"[{m[0]}]", body[start:end])
    return ("…" if start else "") + marked + ("…" if end < len(body) else "")


def node_text(role: str, node_type: str, blocks: list[dict[str, Any]]) -> str | None:
    """The searchable text of a node: the text blocks of a user or assistant message."""
    if role not in _INDEXED_ROLES or node_type != "message":
        return None
    text = " ".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text").strip()
    return text[:_MAX_BODY_CHARS] or None


def title_of(metadata: dict[str, Any] | None) -> str | None:
    """A session's title from its metadata (the console and SDK put it in ``title``)."""
    title = (metadata or {}).get("title")
    return title.strip()[:_MAX_BODY_CHARS] or None if isinstance(title, str) else None


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
    ``node_id`` set), drop a whole session (``node_id`` None), and/or write an audit row."""

    session_id: str
    account_id: str
    node_id: str | None
    text: str | None = None
    audit: AuditRow | None = None


@dataclass
class IndexBuffer:
    """The ops collected for the shard being written; a refused command's are dropped."""

    ops: list[IndexOp] = field(default_factory=list)

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


def apply_ops(conn: sqlite3.Connection, ops: list[IndexOp]) -> None:
    """Apply ``ops`` in one transaction of the catalog connection ``conn`` (autocommit mode)."""
    if not ops:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        for op in ops:
            _apply(conn, op)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _apply(conn: sqlite3.Connection, op: IndexOp) -> None:
    if op.node_id is None:
        rows = conn.execute(
            "SELECT row_id FROM search_rows WHERE session_id = ?", (op.session_id,)
        ).fetchall()
        conn.executemany("DELETE FROM search WHERE rowid = ?", rows)
        conn.execute("DELETE FROM search_rows WHERE session_id = ?", (op.session_id,))
    else:
        old = conn.execute(
            "SELECT row_id FROM search_rows WHERE session_id = ? AND node_id = ?",
            (op.session_id, op.node_id),
        ).fetchone()
        if old is not None:
            conn.execute("DELETE FROM search WHERE rowid = ?", old)
            conn.execute("DELETE FROM search_rows WHERE row_id = ?", old)
        if op.text is not None:
            # A new rowid each time: results come newest first by rowid, so a renamed session
            # ranks as recently touched.
            cur = conn.execute(
                "INSERT INTO search_rows (session_id, node_id) VALUES (?, ?)",
                (op.session_id, op.node_id),
            )
            conn.execute(
                "INSERT INTO search (rowid, body, scope, session_id, node_id) "
                "VALUES (?, ?, ?, ?, ?)",
                (cur.lastrowid, op.text, scope_token(op.account_id), op.session_id, op.node_id),
            )
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


def backfill_shard(shard: sqlite3.Connection) -> Iterator[IndexOp]:
    """The ops that index every session of one shard (a catalog made before the index existed)."""
    sessions = shard.execute("SELECT session_id, account_id, metadata_json FROM sessions")
    for session_id, account_id, metadata_json in sessions.fetchall():
        title = title_of(json.loads(metadata_json) if metadata_json else None)
        if title is not None:
            yield IndexOp(session_id, account_id, "", title)
        rows = shard.execute(
            f"SELECT node_id, role, node_type, content_json FROM {nodes_table(session_id)} "
            "WHERE role IN ('user', 'assistant') ORDER BY node_seq"
        )
        for node_id, role, node_type, content_json in rows:
            text = node_text(role, node_type, json.loads(content_json))
            if text is not None:
                yield IndexOp(session_id, account_id, node_id, text)
