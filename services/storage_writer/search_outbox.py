"""The search index's outbox in each shard: what a batch queues there, and the flush that moves
the queued rows into the catalog's index (``search_index``, which says why texts wait in the
shards; ``outbox`` keeps the writer's ledger of them).

:func:`defer_ops` queues, in the shard's transaction that stores them, the session and node of
each text to index, and a message's text itself when it is short; :func:`flush_outbox` reads
many shards' rows and indexes what each names as the shard holds it then, in one catalog
transaction (run by the writer, or by the index's own process: ``index_child``).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Final

from services.storage_writer.search_index import IndexOp, apply_ops
from services.storage_writer.search_texts import node_texts, title_of

__all__ = ["OUTBOX_BODY_MAX", "defer_ops", "flush_outbox"]

# The longest text an outbox row carries. A carried text saves the flush reading the node back
# and parsing its content (~7 µs of a short message's ~20 a row); it is written to the shard's WAL
# once more than its node, and takes room in the outbox's pages until the flush's rows are
# deleted (a quarter of a second, more under load), pages the file keeps once freed. Up to an
# eighth of a 2 KB page, the outbox stays a page or two a shard: carrying 1,000 characters, 50
# sessions' 500 turns of ~1 KB answers left ~330 KB of freed pages over the 64 shards (9,385
# bytes a turn of database against 8,322). A longer text is read back from its node, as every
# row's was before the rows carried texts.
OUTBOX_BODY_MAX: Final = 256


def defer_ops(shard: sqlite3.Connection, ops: list[IndexOp]) -> tuple[int, list[IndexOp]]:
    """Queue the texts of ``ops`` in the shard's outbox, in the caller's open transaction of
    ``shard``; return how many rows were queued and the ops that must reach the catalog before
    the shard commits (a session's deletion: its queued rows are deleted here too).

    A message's row carries its text (it never changes once stored) if it is not longer than
    ``OUTBOX_BODY_MAX``; a title's does not (it changes: the flush reads the current one)."""
    now: list[IndexOp] = []
    rows: list[tuple[str, str, str | None]] = []
    written = 0
    for op in ops:
        if op.node_id is not None and op.audit is None:
            rows.append((op.session_id, op.node_id, _carried(op)))
            written += 1
            continue
        # In order: the texts of this session queued earlier in the batch go with it.
        _queue(shard, rows)
        rows = []
        shard.execute("DELETE FROM search_outbox WHERE session_id = ?", (op.session_id,))
        now.append(op)
    _queue(shard, rows)
    return written, now


def _carried(op: IndexOp) -> str | None:
    """The text a message's outbox row carries: up to ``OUTBOX_BODY_MAX`` characters."""
    text = op.text
    return text if op.node_id and text is not None and len(text) <= OUTBOX_BODY_MAX else None


def _queue(shard: sqlite3.Connection, rows: list[tuple[str, str, str | None]]) -> None:
    if rows:
        shard.executemany(
            "INSERT INTO search_outbox (session_id, node_id, body) VALUES (?, ?, ?)", rows
        )


def flush_outbox(
    catalog: sqlite3.Connection, shards: dict[int, tuple[sqlite3.Connection, int]]
) -> tuple[dict[int, int], int]:
    """Index the outbox rows of ``shards`` (shard -> its connection and the last seq already
    applied) in one transaction of the catalog, in each shard's order; return shard -> the last
    seq applied now (for the shards that had rows) and the number of rows applied.

    Each row is indexed with what its shard holds *now*: a message's text (the one its row
    carries, or, a row queued before rows carried it, read from its node), the session's current
    title (none: the row is dropped); a session no longer there has its row dropped. The rows
    stay in the shards: the caller deletes them in a later transaction of each shard (indexing
    them again is harmless)."""
    ops: list[IndexOp] = []
    last: dict[int, int] = {}
    for shard, (conn, after) in shards.items():
        # One read transaction a shard: its rows, sessions and nodes as of one moment (read
        # beside the writer, a session's tables may be dropped between two statements).
        conn.execute("BEGIN")
        try:
            rows = conn.execute(
                "SELECT seq, session_id, node_id, body FROM search_outbox WHERE seq > ? "
                "ORDER BY seq",
                (after,),
            ).fetchall()
            if rows:
                last[shard] = rows[-1][0]
                ops.extend(_current(conn, rows))
        finally:
            conn.execute("COMMIT")
    apply_ops(catalog, ops, flush=True)
    return last, len(ops)


OutboxRow = tuple[int, str, str, str | None]  # seq, session, node ('': the title), text or NULL


def _current(shard: sqlite3.Connection, rows: list[OutboxRow]) -> list[IndexOp]:
    """The ops that make the index hold the current text of each outbox row, in their order:
    the sessions are read by one statement, the nodes of rows without a text once a session."""
    sessions = _sessions(shard, list(dict.fromkeys(r[1] for r in rows)))
    unread: dict[str, list[str]] = {}
    for _, session_id, node_id, body in rows:
        if node_id and body is None and session_id in sessions:
            unread.setdefault(session_id, []).append(node_id)
    read = {sid: node_texts(shard, sid, node_ids) for sid, node_ids in unread.items()}
    ops: list[IndexOp] = []
    for _, session_id, node_id, body in rows:
        session = sessions.get(session_id)
        if session is None:  # deleted (its rows go with it; kept here for safety): drop the text
            ops.append(IndexOp(session_id, "", node_id, None))
            continue
        account_id, metadata_json = session
        if not node_id:
            text = title_of(json.loads(metadata_json)) if metadata_json else None
        elif body is not None:
            text = body
        else:
            text = read[session_id].get(node_id)
        ops.append(IndexOp(session_id, account_id, node_id, text))
    return ops


def _sessions(
    shard: sqlite3.Connection, session_ids: list[str]
) -> dict[str, tuple[str, str | None]]:
    """Each of ``session_ids`` that ``shard`` holds -> its account and metadata (JSON)."""
    rows = shard.execute(
        "SELECT session_id, account_id, metadata_json FROM sessions "
        "WHERE session_id IN (SELECT value FROM json_each(?))",
        (json.dumps(session_ids),),
    )
    return {session_id: (account_id, metadata) for session_id, account_id, metadata in rows}
