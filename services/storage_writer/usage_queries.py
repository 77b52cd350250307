"""Usage queries: the kept counters of ``usage_totals`` (schema v5), read by index.

An account's rows are in every shard that holds one of its sessions, so its report is one range
read of the table's key (``account_id``, ``day``) per shard, merged here; a session's totals are
one read of its own shard by the session index. Neither reads a run.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from agent_core.bus.contracts.storage import GetUsage

__all__ = ["account_usage", "session_usage"]

_SUMS = (
    "sum(runs) AS runs, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens, "
    "sum(cache_read_tokens) AS cache_read_tokens, sum(cache_write_tokens) AS cache_write_tokens"
)
_FIELDS = ("runs", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def _with_total(row: dict[str, Any]) -> dict[str, Any]:
    row = {k: (v if v is not None else 0) for k, v in row.items()}
    row["total_tokens"] = row["input_tokens"] + row["output_tokens"]
    return row


def account_usage(conns: Sequence[sqlite3.Connection], q: GetUsage) -> list[dict[str, Any]]:
    """``q.account_id``'s usage by day and model between ``q.since`` and ``q.until``."""
    where, args = ["account_id = ?"], [q.account_id]
    if q.since is not None:
        where.append("day >= ?")
        args.append(q.since.isoformat())
    if q.until is not None:
        where.append("day <= ?")
        args.append(q.until.isoformat())
    sql = (
        f"SELECT day, model, {_SUMS} FROM usage_totals WHERE {' AND '.join(where)} "
        "GROUP BY day, model"
    )
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for conn in conns:
        for row in conn.execute(sql, args):
            key = (row["day"], row["model"])
            into = merged.setdefault(
                key, {"day": key[0], "model": key[1], **dict.fromkeys(_FIELDS, 0)}
            )
            for name in _FIELDS:
                into[name] += row[name] or 0
    return [_with_total(merged[k]) for k in sorted(merged)]


def session_usage(conn: sqlite3.Connection, session_id: str) -> dict[str, Any]:
    """``session_id``'s totals (zeros before its first run ends)."""
    row = conn.execute(
        f"SELECT {_SUMS} FROM usage_totals WHERE session_id = ?", (session_id,)
    ).fetchone()
    return _with_total(dict(row))
