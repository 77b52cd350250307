"""The ``delete_session`` applier: a session's rows, tables, index entries and writer files go;
an account-level audit event stays."""

from __future__ import annotations

import contextlib
import json
import sqlite3

from agent_core.bus.contracts.refusals import RefusalCode
from agent_core.bus.contracts.storage import DeleteSession, DeleteSessionResult
from agent_core.files import FileStore, FileStoreError
from agent_core.files.port import artifact_prefix
from agent_core.types.enums import TERMINAL_RUN_STATUSES
from services.storage_writer.apply_common import ApplyContext, derived_event_id, refusal
from services.storage_writer.schema import events_table, nodes_table
from services.storage_writer.search_index import AuditRow, IndexOp
from services.storage_writer.search_texts import message_texts, title_of

__all__ = ["delete_session"]

_ENDED = tuple(sorted(s.value for s in TERMINAL_RUN_STATUSES))
# The tables with a session_id column (receipts are kept: a redelivered delete must find its
# first answer, and the writer stores this command's receipt after the command).
_ROWS_OF = ("agents", "runs", "artifacts", "sessions")


def delete_session(
    conn: sqlite3.Connection, c: DeleteSession, ctx: ApplyContext
) -> DeleteSessionResult:
    """Delete ``c.session_id`` (see :class:`DeleteSession` for what goes and what is refused)."""
    row = conn.execute(
        "SELECT metadata_json FROM sessions WHERE session_id = ? AND account_id = ?",
        (c.session_id, c.account_id),
    ).fetchone()
    if row is None:
        raise refusal(RefusalCode.SESSION_NOT_FOUND, "no such session", session_id=c.session_id)
    _refuse_while_running(conn, c.session_id)
    (nodes,) = conn.execute(f"SELECT count(*) FROM {nodes_table(c.session_id)}").fetchone()
    counts = {
        table: conn.execute(
            f"SELECT count(*) FROM {table} WHERE session_id = ?", (c.session_id,)
        ).fetchone()[0]
        for table in ("runs", "artifacts")
    }
    # The index takes a message's words out only given its text (``search_index._unindex``).
    texts = dict(message_texts(conn, c.session_id))
    conn.execute(f"DROP TABLE {nodes_table(c.session_id)}")
    conn.execute(f"DROP TABLE {events_table(c.session_id)}")
    for table in _ROWS_OF:
        conn.execute(f"DELETE FROM {table} WHERE session_id = ?", (c.session_id,))
    event_id = derived_event_id(f"session_deleted:{c.command_id}")
    audit = AuditRow(
        event_id=event_id,
        account_id=c.account_id,
        event_type="session_deleted",
        session_id=c.session_id,
        payload={
            "title": title_of(json.loads(row[0]) if row[0] else None),
            "nodes": nodes,
            **counts,
        },
        created_at=ctx.now,
    )
    ctx.index.ops.append(IndexOp(c.session_id, c.account_id, None, audit=audit, texts=texts))
    # The writer's own files of the session (offloaded JSON): only once the rows are gone.
    files, prefix = ctx.files, artifact_prefix(c.session_id)
    if files is not None:
        ctx.after_commit.append(lambda: _remove_files(files, prefix))
    return DeleteSessionResult(
        session_id=c.session_id,
        deleted_at=ctx.now,
        audit_event_id=event_id,
        nodes=nodes,
        runs=counts["runs"],
        artifacts=counts["artifacts"],
    )


def _refuse_while_running(conn: sqlite3.Connection, session_id: str) -> None:
    """Refuse with ``runs_active`` (naming them) while a run of the session has not ended."""
    marks = ",".join("?" * len(_ENDED))
    active = [
        r[0]
        for r in conn.execute(
            f"SELECT run_id FROM runs WHERE session_id = ? AND status NOT IN ({marks}) "
            "ORDER BY created_at",
            (session_id, *_ENDED),
        )
    ]
    if active:
        raise refusal(
            RefusalCode.RUNS_ACTIVE,
            "the session has runs that have not ended: cancel them, then delete it",
            run_ids=active,
        )


def _remove_files(files: FileStore, prefix: str) -> None:
    """Remove a deleted session's offloaded JSON. The rows are gone already; a store that is
    down now leaves orphan objects no row names (never served), not a failed delete."""
    with contextlib.suppress(FileStoreError):
        files.delete_prefix_blocking(prefix)
