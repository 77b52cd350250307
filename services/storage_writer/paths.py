"""The walk from a node up to the root (or to a node the reader holds), shared by the
``get_active_path`` query and the claim that returns the path to the message it placed."""

from __future__ import annotations

import sqlite3
from typing import Any

from services.storage_writer.schema import nodes_table

__all__ = ["path_rows"]


def path_rows(
    conn: sqlite3.Connection, session_id: str, node_id: str, after_node_id: str | None
) -> list[dict[str, Any]] | None:
    """Rows of the nodes from the root to ``node_id`` — or, when ``after_node_id`` is on that
    path, of the nodes after it only (none when it *is* ``node_id``); ``None`` when ``node_id``
    is not a node of the session. Works on plain and :class:`sqlite3.Row` connections."""
    nodes = nodes_table(session_id)
    if node_id == after_node_id:
        exists = conn.execute(f"SELECT 1 FROM {nodes} WHERE node_id = ?", (node_id,)).fetchone()
        return None if exists is None else []
    # Walk up from the tip; the walk ends at the root or just below ``after_node_id``.
    cur = conn.execute(
        f"WITH RECURSIVE path(node_id, depth) AS ("
        f"  SELECT node_id, 0 FROM {nodes} WHERE node_id = ?"
        f"  UNION ALL SELECT n.parent_id, p.depth + 1 FROM {nodes} n JOIN path p"
        f"  ON n.node_id = p.node_id WHERE n.parent_id IS NOT NULL AND n.parent_id IS NOT ?)"
        f" SELECT n.* FROM path p JOIN {nodes} n ON n.node_id = p.node_id ORDER BY p.depth DESC",
        (node_id, after_node_id),
    )
    columns = [d[0] for d in cur.description]
    rows = [dict(zip(columns, row, strict=True)) for row in cur.fetchall()]
    return rows or None
