"""The named agents' (assistants') queries, answered from the account's shard.

Registered in :mod:`queries`' handler table. Every lookup is scoped by the query's
``account_id``: another account's assistant answers like a missing one (``None``, which
the engine replies as ``data=None``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

from agent_core.bus.contracts.assistants import (
    GetAssistant,
    ListAssistants,
    ListAssistantVersions,
)
from agent_core.ids import is_valid_id

__all__ = ["get_assistant", "list_assistant_versions", "list_assistants"]

# The engine hands each handler the read connection of the account's shard.
ShardConn = Callable[[str], sqlite3.Connection]

_SELECT = (
    "SELECT a.assistant_id, a.name, a.version AS latest_version, a.status, a.created_at, "
    "a.updated_at, v.version, v.definition_json FROM assistants a "
    "JOIN assistant_versions v ON v.assistant_id = a.assistant_id "
)


def _view(row: sqlite3.Row) -> dict[str, Any]:
    """An ``Assistant``'s fields: the version's definition with the assistant's own fields."""
    out = dict(row)
    definition = json.loads(out.pop("definition_json"))
    return {**definition, **out}


def get_assistant(conn_of: ShardConn, q: GetAssistant) -> dict[str, Any] | None:
    """One assistant at its latest version or ``q.version``; by id (archived too) or by the
    name of an active one."""
    if q.assistant_id is not None and not is_valid_id(q.assistant_id, "asst"):
        return None
    conn = conn_of(q.account_id)
    where = ["a.account_id = ?"]
    args: list[Any] = [q.account_id]
    if q.assistant_id is not None:
        where.append("a.assistant_id = ?")
        args.append(q.assistant_id)
    else:
        where.append("a.name = ? AND a.status = 'active'")
        args.append(q.name)
    if q.version is None:
        where.append("v.version = a.version")
    else:
        where.append("v.version = ?")
        args.append(q.version)
    row = conn.execute(_SELECT + "WHERE " + " AND ".join(where), args).fetchone()
    return None if row is None else _view(row)


def list_assistants(conn_of: ShardConn, q: ListAssistants) -> list[dict[str, Any]]:
    """The account's assistants by name (then age), each at its latest version."""
    conn = conn_of(q.account_id)
    status = "" if q.include_archived else "AND a.status = 'active' "
    rows = conn.execute(
        _SELECT + "WHERE a.account_id = ? AND v.version = a.version "
        f"{status}ORDER BY a.name, a.created_at",
        (q.account_id,),
    )
    return [_view(r) for r in rows]


def list_assistant_versions(conn_of: ShardConn, q: ListAssistantVersions) -> dict[str, Any] | None:
    """The versions of one of the account's assistants, oldest first."""
    if not is_valid_id(q.assistant_id, "asst"):
        return None
    conn = conn_of(q.account_id)
    owned = conn.execute(
        "SELECT 1 FROM assistants WHERE assistant_id = ? AND account_id = ?",
        (q.assistant_id, q.account_id),
    ).fetchone()
    if owned is None:
        return None
    rows = conn.execute(
        "SELECT version, created_at FROM assistant_versions WHERE assistant_id = ? "
        "ORDER BY version",
        (q.assistant_id,),
    )
    return {"assistant_id": q.assistant_id, "items": [dict(r) for r in rows]}
