"""Storage queries, answered from read-only connections of their own (never the writer's).

WAL lets these connections read the last committed state while a batch is being written, so a
query never waits behind a write batch; the service runs them on a thread of their own too. One
read connection per shard, opened on first use: after a session's tables are created, only that
shard's (small) schema is re-parsed by the reader (see :mod:`shards`).

Account scoping: when a query carries ``account_id``, a session of another account answers
exactly like a missing one (``data=None``). Hostile session ids answer the same way and never
reach SQL.
"""

from __future__ import annotations

import heapq
import json
import sqlite3
from collections.abc import Callable
from typing import Any

from agent_core.bus.contracts.storage import (
    GetActivePath,
    GetArtifact,
    GetNode,
    GetRun,
    GetSession,
    GetSessionWithUsage,
    GetTree,
    ListAuditEvents,
    ListEvents,
    ListNodes,
    ListSessions,
    QueryReply,
    SearchSessions,
    StorageQuery,
)
from agent_core.errors import AgentCoreError, SchemaError
from agent_core.ids import validate_session_id
from services.storage_writer import assistant_queries, run_queries, usage_queries
from services.storage_writer.paths import path_rows
from services.storage_writer.schema import configure, events_table, nodes_table
from services.storage_writer.search_index import AUDIT_COLUMNS
from services.storage_writer.search_query import match_expression, snippet
from services.storage_writer.search_texts import indexed_text
from services.storage_writer.shards import CATALOG, ShardLayout

__all__ = ["QueryEngine"]

_PREVIEW_CHARS = 80
_STATEMENT_CACHE = 1024


class _Missing(Exception):
    """Nothing visible matched: answered as ``data=None``."""


Row = dict[str, Any]


class QueryEngine:
    """Answers :data:`StorageQuery` messages. Not thread-safe: one thread calls it."""

    def __init__(self, layout: ShardLayout) -> None:
        self.layout = layout
        self._conns: dict[int, sqlite3.Connection] = {}

    def _conn(self, shard: int) -> sqlite3.Connection:
        """A shard's read connection; :data:`CATALOG`'s is the catalog's (the search index,
        the audit log)."""
        conn = self._conns.get(shard)
        if conn is None:
            path = self.layout.db_path if shard == CATALOG else self.layout.path(shard)
            uri = path.resolve().as_uri() + "?mode=ro"
            conn = sqlite3.connect(
                uri,
                uri=True,
                isolation_level=None,
                check_same_thread=False,
                cached_statements=_STATEMENT_CACHE,
            )
            configure(conn, readonly=True)
            conn.row_factory = sqlite3.Row
            self._conns[shard] = conn
        return conn

    def close(self) -> None:
        """Close every read connection."""
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def answer(self, query: StorageQuery) -> QueryReply:
        """One reply per query: ``ok=False`` with a typed error only when reading failed."""
        try:
            data, cursor = _HANDLERS[query.type](self, query)
        except _Missing:
            return QueryReply(ok=True, data=None)
        except AgentCoreError as exc:
            return QueryReply(ok=False, error=exc.to_payload())
        return QueryReply(ok=True, data=data, next_cursor=cursor)

    # -- helpers -------------------------------------------------------------------------------

    def _session_conn(self, session_id: str, account_id: str | None) -> sqlite3.Connection:
        """The connection of a visible session's shard, or :class:`_Missing`."""
        return self._visible_session(session_id, account_id, "1")[0]

    def _visible_session(
        self, session_id: str, account_id: str | None, columns: str
    ) -> tuple[sqlite3.Connection, Any]:
        """The shard's connection and ``columns`` of a session visible to ``account_id`` (any
        account when ``None``), read in one statement, or :class:`_Missing`."""
        try:
            validate_session_id(session_id)
        except SchemaError:
            raise _Missing from None
        conn = self._conn(self.layout.shard_of(session_id))
        sql = f"SELECT {columns} FROM sessions WHERE session_id = ?"
        if account_id is None:
            row = conn.execute(sql, (session_id,)).fetchone()
        else:
            row = conn.execute(f"{sql} AND account_id = ?", (session_id, account_id)).fetchone()
        if row is None:
            raise _Missing
        return conn, row

    def account_conn(self, account_id: str) -> sqlite3.Connection:
        """The read connection of the shard holding an account's named agents."""
        return self._conn(self.layout.shard_of_account(account_id))

    def _all(self) -> list[sqlite3.Connection]:
        return [self._conn(i) for i in range(self.layout.shard_count)]

    def _find(self, sql: str, args: tuple[Any, ...], session_id: str | None) -> Row:
        conns = [self._session_conn(session_id, None)] if session_id else self._all()
        for conn in conns:
            row = conn.execute(sql, args).fetchone()
            if row is not None:
                return dict(row)
        raise _Missing

    def _visible(self, session_id: str, account_id: str | None) -> None:
        if account_id is not None:
            self._session_conn(session_id, account_id)


Handler = Callable[[QueryEngine, Any], tuple[Any, str | None]]


def _session_row(e: QueryEngine, session_id: str, account_id: str | None) -> dict[str, Any]:
    """A visible session's row in one read (the visibility check is the read itself, so a
    deletion committed meanwhile cannot leave a check passed and the row gone), or
    :class:`_Missing`."""
    return dict(e._visible_session(session_id, account_id, "*")[1])


def _get_session(e: QueryEngine, q: GetSession) -> tuple[Any, str | None]:
    return _session_row(e, q.session_id, q.account_id), None


def _get_session_with_usage(e: QueryEngine, q: GetSessionWithUsage) -> tuple[Any, str | None]:
    # Two indexed reads of one shard: the row (visibility included), then its kept counters
    # (zeros if the session was deleted in between: the row read first is what is answered).
    session = _session_row(e, q.session_id, q.account_id)
    usage = usage_queries.session_usage(e._conn(e.layout.shard_of(q.session_id)), q.session_id)
    return {"session": session, "usage": usage}, None


def _list_sessions(e: QueryEngine, q: ListSessions) -> tuple[Any, str | None]:
    where, args = ["account_id = ?"], [q.account_id]
    if q.status is not None:
        where.append("status = ?")
        args.append(q.status.value)
    if q.cursor is not None:
        created, _, sid = q.cursor.partition("|")
        where.append("(created_at, session_id) < (?, ?)")
        args += [created, sid]
    sql = (
        f"SELECT * FROM sessions WHERE {' AND '.join(where)} "
        "ORDER BY created_at DESC, session_id DESC LIMIT ?"
    )
    # Each shard answers for its own sessions; merge newest first.
    per_shard = [[dict(r) for r in c.execute(sql, (*args, q.limit + 1))] for c in e._all()]
    merged = list(
        heapq.merge(*per_shard, key=lambda r: (r["created_at"], r["session_id"]), reverse=True)
    )
    page = merged[: q.limit]
    cursor = None
    if len(merged) > q.limit:
        cursor = f"{page[-1]['created_at']}|{page[-1]['session_id']}"
    return page, cursor


def _search_sessions(e: QueryEngine, q: SearchSessions) -> tuple[Any, str | None]:
    """Walk the account's matching rows newest first (FTS5 reads its doclists backwards for
    ``ORDER BY rowid DESC``) and stop at ``limit`` distinct sessions: a common word costs no
    more than reading its doclist once. The walk is one statement stepped lazily and closed
    at the last session needed (paging with ``rowid < ?`` bounds would evaluate the match
    again from the start of the doclist each page: four to five times slower for a word in
    most rows). Each found session is read from its shard by its key (visibility, status);
    the shards are never scanned."""
    expression = match_expression(q.account_id, q.q)
    if expression is None:
        return [], None
    found: list[dict[str, Any]] = []
    texts: list[tuple[str, str, str | None]] = []
    seen: set[str] = set()
    # The index keeps no texts: a row is named by ``search_rows`` (which keeps a title's text);
    # the join keeps FTS5's rowid order (its plan: the FTS5 scan outside, a key lookup inside).
    rows = e._conn(CATALOG).execute(
        "SELECT r.session_id, r.node_id, r.title FROM search s "
        "JOIN search_rows r ON r.row_id = s.rowid WHERE search MATCH ? ORDER BY s.rowid DESC",
        (expression,),
    )
    try:
        for session_id, node_id, title in rows:
            if session_id in seen:
                continue
            seen.add(session_id)
            session = _visible_session(e, session_id, q)
            if session is not None:
                found.append({"session": session, "node_id": node_id or None})
                texts.append((session_id, node_id, title))
                if len(found) == q.limit:
                    break
    finally:
        rows.close()  # ends the statement (and the read transaction it holds) at once
    for item, (session_id, node_id, title) in zip(found, texts, strict=True):
        shard = e._conn(e.layout.shard_of(session_id))
        item["snippet"] = snippet(indexed_text(shard, session_id, node_id, title) or "", q.q)
    return found, None


def _visible_session(e: QueryEngine, session_id: str, q: SearchSessions) -> Row | None:
    """The session's row if it is still there, the account's, and of the asked status."""
    try:
        validate_session_id(session_id)
    except SchemaError:
        return None
    row = (
        e._conn(e.layout.shard_of(session_id))
        .execute(
            "SELECT * FROM sessions WHERE session_id = ? AND account_id = ?",
            (session_id, q.account_id),
        )
        .fetchone()
    )
    if row is None or (q.status is not None and row["status"] != q.status.value):
        return None
    return dict(row)


def _list_audit(e: QueryEngine, q: ListAuditEvents) -> tuple[Any, str | None]:
    args: tuple[Any, ...] = (q.account_id,)
    bound = ""
    if q.before_seq is not None:
        bound, args = "AND seq < ? ", (q.account_id, q.before_seq)
    rows = [
        dict(r)
        for r in e._conn(CATALOG).execute(
            f"SELECT {AUDIT_COLUMNS} FROM account_audit WHERE account_id = ? {bound}"
            "ORDER BY seq DESC LIMIT ?",
            (*args, q.limit),
        )
    ]
    cursor = str(rows[-1]["seq"]) if len(rows) == q.limit else None
    return rows, cursor


def _active_path(e: QueryEngine, q: GetActivePath) -> tuple[Any, str | None]:
    conn = e._session_conn(q.session_id, q.account_id)
    node_id = q.node_id
    if node_id is None:
        row = conn.execute(
            "SELECT active_node_id FROM sessions WHERE session_id = ?", (q.session_id,)
        ).fetchone()
        node_id = row[0]
        if node_id is None:
            return [], None
    rows = path_rows(conn, q.session_id, node_id, q.after_node_id)
    if rows is None:
        raise _Missing
    return rows, None


def _tree(e: QueryEngine, q: GetTree) -> tuple[Any, str | None]:
    conn = e._session_conn(q.session_id, q.account_id)
    rows = conn.execute(
        f"SELECT node_id, node_seq, parent_id, agent_id, run_id, role, node_type, content_json "
        f"FROM {nodes_table(q.session_id)} ORDER BY node_seq"
    )
    tree = []
    for r in rows:
        item = dict(r)
        item["preview"] = _preview(item.pop("content_json"))
        tree.append(item)
    return tree, None


def _preview(content_json: str) -> str:
    try:
        blocks = json.loads(content_json)
    except ValueError:
        return ""
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            text = str(block.get("text", "")).replace("\n", " ")
            return text[:_PREVIEW_CHARS]
        if kind == "tool_call":
            return f"[tool_call {block.get('name', '')}]"[:_PREVIEW_CHARS]
        if kind == "tool_result":
            return f"[tool_result {block.get('tool_call_id', '')}]"[:_PREVIEW_CHARS]
        if kind in ("json", "artifact_ref", "attachment"):
            return f"[{kind}]"
    return ""


def _get_node(e: QueryEngine, q: GetNode) -> tuple[Any, str | None]:
    conn = e._session_conn(q.session_id, q.account_id)
    row = conn.execute(
        f"SELECT * FROM {nodes_table(q.session_id)} WHERE node_id = ?", (q.node_id,)
    ).fetchone()
    if row is None:
        raise _Missing
    return dict(row), None


def _list_nodes(e: QueryEngine, q: ListNodes) -> tuple[Any, str | None]:
    conn = e._session_conn(q.session_id, q.account_id)
    rows = [
        dict(r)
        for r in conn.execute(
            f"SELECT * FROM {nodes_table(q.session_id)} WHERE node_seq > ? ORDER BY node_seq "
            "LIMIT ?",
            (q.after_seq, q.limit),
        )
    ]
    cursor = str(rows[-1]["node_seq"]) if len(rows) == q.limit else None
    return rows, cursor


def _list_events(e: QueryEngine, q: ListEvents) -> tuple[Any, str | None]:
    conn = e._session_conn(q.session_id, q.account_id)
    events = events_table(q.session_id)
    args: tuple[Any, ...]
    if q.run_id is None:
        sql, args = f"SELECT * FROM {events} WHERE seq > ? ORDER BY seq LIMIT ?", (q.after_seq,)
    else:
        sql = f"SELECT * FROM {events} WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?"
        args = (q.run_id, q.after_seq)
    rows = [dict(r) for r in conn.execute(sql, (*args, q.limit))]
    cursor = str(rows[-1]["seq"]) if len(rows) == q.limit else None
    return rows, cursor


def _get_run(e: QueryEngine, q: GetRun) -> tuple[Any, str | None]:
    row = e._find("SELECT * FROM runs WHERE run_id = ?", (q.run_id,), q.session_id)
    e._visible(row["session_id"], q.account_id)
    return row, None


def _by_session(table: str) -> Handler:
    def handle(e: QueryEngine, q: Any) -> tuple[Any, str | None]:
        conn = e._session_conn(q.session_id, q.account_id)
        rows = conn.execute(
            f"SELECT * FROM {table} WHERE session_id = ? ORDER BY created_at, rowid",
            (q.session_id,),
        )
        return [dict(r) for r in rows], None

    return handle


def _get_artifact(e: QueryEngine, q: GetArtifact) -> tuple[Any, str | None]:
    row = e._find("SELECT * FROM artifacts WHERE artifact_id = ?", (q.artifact_id,), q.session_id)
    e._visible(row["session_id"], q.account_id)
    return row, None


_HANDLERS: dict[str, Handler] = {
    "get_session": _get_session,
    "get_session_with_usage": _get_session_with_usage,
    "list_sessions": _list_sessions,
    "search_sessions": _search_sessions,
    "list_audit_events": _list_audit,
    "get_active_path": _active_path,
    "get_tree": _tree,
    "get_node": _get_node,
    "list_nodes": _list_nodes,
    "list_events": _list_events,
    "get_run": _get_run,
    "list_runs": _by_session("runs"),
    "list_stranded_runs": lambda e, q: (run_queries.stranded_runs(e._all(), q), None),
    "list_agents": _by_session("agents"),
    "list_artifacts": _by_session("artifacts"),
    "get_artifact": _get_artifact,
    "get_usage": lambda e, q: (usage_queries.account_usage(e._all(), q), None),
    "get_session_usage": lambda e, q: (
        usage_queries.session_usage(e._session_conn(q.session_id, q.account_id), q.session_id),
        None,
    ),
    # An account's named agents (None answers as data=None, like _Missing).
    "get_assistant": lambda e, q: (assistant_queries.get_assistant(e.account_conn, q), None),
    "list_assistants": lambda e, q: (assistant_queries.list_assistants(e.account_conn, q), None),
    "list_assistant_versions": lambda e, q: (
        assistant_queries.list_assistant_versions(e.account_conn, q),
        None,
    ),
}
