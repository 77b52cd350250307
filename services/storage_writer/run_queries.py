"""Runs as queue entries: what the bus must hold for a run that has not ended.

A run is recorded (``CreateRun``, status ``queued``, the user's message kept in its metadata until
the claim places it as a node) before the gateway queues it on the bus. So the database alone can
rebuild every queue entry of a run that never started: :func:`queue_entry` does, for the
reconciler's query (:func:`stranded_runs`) and for a restore (``backup.runs_in_flight``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from agent_core.bus.contracts.storage import ListStrandedRuns
from agent_core.types.runtime import SESSION_CONFIG_KEY, overrides_from

__all__ = ["ENTRY_COLUMNS", "ENTRY_FROM", "queue_entry", "stranded_runs"]

ENTRY_COLUMNS = (
    "r.run_id, r.session_id, r.agent_id, r.start_node_id, r.metadata_json, "
    "s.account_id, s.cwd, s.metadata_json, a.agent_type"
)
"""The columns :func:`queue_entry` reads, in its order (more may follow)."""

ENTRY_FROM = (
    "FROM runs r JOIN sessions s ON s.session_id = r.session_id "
    "JOIN agents a ON a.agent_id = r.agent_id"
)


def _json_object(raw: str | None) -> dict[str, Any]:
    value = json.loads(raw) if raw else None
    return value if isinstance(value, dict) else {}


def queue_entry(row: Sequence[Any]) -> dict[str, Any]:
    """The fields of a run's queue entry from a row that starts with :data:`ENTRY_COLUMNS`."""
    meta = _json_object(row[4])
    return {
        "run_id": row[0],
        "session_id": row[1],
        "agent_id": row[2],
        "start_node_id": row[3],
        "content": meta.get("message") or [],
        "parent_node_id": meta.get("parent_node_id"),
        "kind": meta.get("kind", "main"),
        "strategy": meta.get("strategy", "enqueue"),
        "account_id": row[5],
        "cwd": row[6],
        "config_overrides": overrides_from(_json_object(row[7]).get(SESSION_CONFIG_KEY)),
        "agent_type": "orchestrator" if row[8] == "orchestrator" else "main",
    }


def stranded_runs(conns: Iterable[sqlite3.Connection], q: ListStrandedRuns) -> list[dict[str, Any]]:
    """Runs ``queued`` with no attempt claimed and untouched for ``q.idle_s`` seconds, oldest
    first, across the shards ``conns`` read, as queue entries (up to ``q.limit``).

    Only never-claimed runs: a claimed run's message is a node already and its recovery is the
    processing list's (a lease that runs out), not a new queue entry. Child runs are left out:
    they go on inside their parent's run.
    """
    cutoff = (datetime.now(UTC) - timedelta(seconds=q.idle_s)).isoformat(timespec="microseconds")
    sql = (
        f"SELECT {ENTRY_COLUMNS}, r.updated_at {ENTRY_FROM} "
        "WHERE r.status = 'queued' AND r.attempt = 0 AND r.updated_at < ? "
        "ORDER BY r.updated_at, r.run_id LIMIT ?"
    )
    found: list[tuple[str, dict[str, Any]]] = []
    for conn in conns:
        for row in conn.execute(sql, (cutoff, q.limit)):
            entry = queue_entry(row)
            if entry["kind"] in ("main", "branch"):
                found.append((str(row[9]), entry))
    found.sort(key=lambda item: (item[0], item[1]["run_id"]))
    return [entry for _, entry in found[: q.limit]]
