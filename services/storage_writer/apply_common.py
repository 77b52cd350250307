"""What every storage command applier shares: the batch's context, refusals, fencing, events.

Appliers (:mod:`commands` dispatches to them; runs in :mod:`apply_runs`, nodes and events in
:mod:`apply_nodes`) either return the command's result (what goes into its receipt) or raise
:class:`StorageError` with a stable code, in which case the writer rolls the command's savepoint
back, so a refused command changes no row. Values always travel as bound parameters; the only
identifiers built from input are the per-session table names, which :mod:`schema` refuses
unless the session id is one the core could have generated.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_core.bus.contracts.refusals import RefusalCode
from agent_core.bus.contracts.storage import CommandResult, EventPlaced, RunFence
from agent_core.errors import StorageError
from agent_core.files import FileStore
from agent_core.types.enums import TERMINAL_RUN_STATUSES, RunStatus
from agent_core.types.runtime import TimelineEvent
from services.storage_writer.schema import events_table
from services.storage_writer.search_index import IndexBuffer

__all__ = [
    "AlreadyApplied",
    "ApplyContext",
    "FaultHook",
    "check_fence",
    "derived_event_id",
    "dump_json",
    "insert_event",
    "refuse_if_ended",
    "refusal",
    "require_session",
    "run_status",
]

FaultHook = Callable[[str], None]


class AlreadyApplied(Exception):
    """The command was applied before and its own rows prove it; ``result`` is what it got."""

    def __init__(self, result: CommandResult) -> None:
        super().__init__("already applied")
        self.result = result


@dataclass
class ApplyContext:
    """What appliers need besides the connection: the batch's clock, files and the fault hook;
    ``index`` collects the search index's changes (queued in the shard's outbox or written to
    the catalog before the shard commits, see ``search_index``) and ``after_commit`` what must wait for the shard's COMMIT
    (removing a deleted session's files)."""

    now: str
    data_dir: Path
    json_threshold_bytes: int
    fault: FaultHook | None = None
    # The file store offloaded JSON is written to (keys ``artifacts/<session>/…``).
    files: FileStore | None = None
    index: IndexBuffer = field(default_factory=IndexBuffer)
    after_commit: list[Callable[[], None]] = field(default_factory=list)

    def fault_point(self, name: str) -> None:
        """Call the injected fault hook (tests only; ``None`` in production)."""
        if self.fault is not None:
            self.fault(name)


def derived_event_id(name: str) -> str:
    """The id of an event the writer adds to a command (``run_started`` to a claim, ``run_error``
    to an end): derived from the command's own id, so a repeat would name the same event."""
    return "evt_" + hashlib.blake2b(name.encode(), digest_size=8).hexdigest()


def dump_json(value: Any) -> str | None:
    if value is None or value == {}:
        return None
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def refusal(code: RefusalCode, message: str, **details: Any) -> StorageError:
    """A refusal of the command being applied (its savepoint is rolled back)."""
    return StorageError(code, message, details=details)


def require_session(conn: sqlite3.Connection, session_id: str) -> None:
    row = conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    if row is None:
        raise refusal(RefusalCode.SESSION_NOT_FOUND, "no such session", session_id=session_id)


def run_status(conn: sqlite3.Connection, session_id: str, run_id: str) -> tuple[RunStatus, int]:
    row = conn.execute(
        "SELECT status, attempt FROM runs WHERE run_id = ? AND session_id = ?",
        (run_id, session_id),
    ).fetchone()
    if row is None:
        raise refusal(RefusalCode.RUN_NOT_FOUND, "no such run in this session", run_id=run_id)
    return RunStatus(row[0]), int(row[1])


def refuse_if_ended(conn: sqlite3.Connection, session_id: str, run_id: str) -> None:
    """Refuse a write for a run that has ended (``run_ended``): its end was its last write."""
    status, _ = run_status(conn, session_id, run_id)
    _refuse_ended(run_id, status)


def _refuse_ended(run_id: str, status: RunStatus) -> None:
    if status in TERMINAL_RUN_STATUSES:
        raise refusal(
            RefusalCode.RUN_ENDED,
            f"the run has ended ({status.value}); nothing more is written for it",
            run_id=run_id,
            status=status.value,
        )


def check_fence(conn: sqlite3.Connection, session_id: str, fence: RunFence | None) -> None:
    """Refuse a write from an attempt other than the run's current one (``docs/architecture.md``,
    "Storage"), and any write for a run that has ended."""
    if fence is None:
        return
    status, attempt = run_status(conn, session_id, fence.run_id)
    if fence.attempt < attempt:
        raise refusal(
            RefusalCode.STALE_ATTEMPT,
            f"attempt {fence.attempt} of the run was superseded by attempt {attempt}",
            run_id=fence.run_id,
            attempt=fence.attempt,
            current_attempt=attempt,
        )
    if fence.attempt > attempt:
        raise refusal(
            RefusalCode.UNCLAIMED_ATTEMPT,
            f"attempt {fence.attempt} never claimed the run (current attempt {attempt})",
            run_id=fence.run_id,
            attempt=fence.attempt,
            current_attempt=attempt,
        )
    _refuse_ended(fence.run_id, status)


def insert_event(
    conn: sqlite3.Connection, session_id: str, event: TimelineEvent, now: str, node_id: str | None
) -> EventPlaced:
    run_seq: int | None = None
    if event.run_id is not None:
        (last,) = conn.execute(
            f"SELECT max(run_seq) FROM {events_table(session_id)} WHERE run_id = ?",
            (event.run_id,),
        ).fetchone()
        run_seq = (last or 0) + 1
    # seq is the rowid: NULL makes SQLite allocate max(seq)+1 — gap-free because rows are never
    # deleted and only this writer inserts.
    cur = conn.execute(
        f"INSERT INTO {events_table(session_id)} (seq, event_id, run_seq, agent_id, run_id, level, "
        "event_type, node_id, tool_call_id, payload_json, created_at) "
        "VALUES (NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            event.event_id,
            run_seq,
            event.agent_id,
            event.run_id,
            event.level.value,
            event.event_type.value,
            node_id if event.node_id is None else event.node_id,
            event.tool_call_id,
            dump_json(event.payload),
            now,
        ),
    )
    assert cur.lastrowid is not None
    return EventPlaced(event_id=event.event_id, seq=cur.lastrowid, run_seq=run_seq)
