"""The single writer: group commit of a batch of commands, one transaction per shard touched.

A batch (whatever one XREADGROUP returned, up to ``storage.batch_max``) is applied in one call on
the writer's own thread — one thread hop per batch instead of one awaited call per statement,
which is what aiosqlite would cost (~0.1–0.2 ms each). Per shard: ``BEGIN IMMEDIATE``, a
``SAVEPOINT`` per command so that a refused command fails alone with a typed error, one
``executemany`` for the receipts of the applied commands, ``COMMIT``. The caller sends receipts
only after this returns, i.e. after every COMMIT of the batch.

Idempotency: a command seen again (redelivery, retry after a timeout, replay after a crash) gets
its first result back with ``duplicate=True`` and changes nothing. The record of an applied
command is written in the same transaction as its effects: for the commands of a turn's path
(``create_run``, ``claim_run``, ``append_node``) it is their own rows, from which the first result
is read back; every other command stores its result in ``command_receipts``
(``commands.needs_receipt``). Refused commands leave no record: retrying one re-evaluates it (a
refusal changed nothing).

A full disk (``SQLITE_FULL``) refuses the commands of the shard that hit it with
``storage_full`` (retryable: the shard rolled back, nothing of them was written; the gateway
answers 507, a run-worker sends them again until space returns), and the batch goes on. Any
other error that is not a command's fault (an I/O error) aborts the batch: shards already
committed keep their commits (their receipts are stored, so the redelivered batch answers them as
duplicates), the failing shard rolls back, and the exception leaves the batch pending.

Search index (SQLite): the texts a batch indexes are written to the shard's ``search_outbox`` in
the shard's transaction (``search_outbox.defer_ops``), not to FTS5: :meth:`Writer.flush_index`
moves them, many shards' rows in one catalog transaction, when the service asks (a timer, many
rows pending, a search, start-up, close). A shard's flushed rows are deleted by its next
transaction (no extra commit per shard); until then a restart applies them again, harmlessly.
The bookkeeping between the two is ``outbox.OutboxLedger``'s.
"""

from __future__ import annotations

import errno
import json
import logging
import shutil
import sqlite3
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from agent_core.bus.contracts._replies import wire
from agent_core.bus.contracts.assistants import AccountCommand
from agent_core.bus.contracts.refusals import Refusal, RefusalCode
from agent_core.bus.contracts.storage import CommandReceipt, CommandResult, StorageCommand
from agent_core.errors import AgentCoreError, SchemaError, StorageError
from agent_core.files import FileStore
from agent_core.files.local import LocalFileStore
from agent_core.ids import validate_session_id
from services.storage_writer.commands import (
    AlreadyApplied,
    ApplyContext,
    FaultHook,
    apply_command,
    needs_receipt,
)
from services.storage_writer.outbox import FlushPlan, OutboxLedger
from services.storage_writer.schema import configure
from services.storage_writer.search_index import IndexOp, apply_ops
from services.storage_writer.search_outbox import defer_ops, flush_outbox
from services.storage_writer.shards import CATALOG, ShardLayout

log = logging.getLogger("soong.storage_writer")

__all__ = ["CATALOG", "Writer"]

# Bound parameters per statement stay far below SQLite's limit (32,766 since 3.32).
_IN_CHUNK = 500
# Statements are cached per connection; per-session table names make many distinct texts.
_STATEMENT_CACHE = 1024


class Writer:
    """Owns the write connections of every shard. Not thread-safe: one thread calls it."""

    def __init__(
        self,
        layout: ShardLayout,
        data_dir: Path,
        json_threshold_bytes: int,
        *,
        fault: FaultHook | None = None,
        files: FileStore | None = None,
        outbox_left: Mapping[int, int] | None = None,
        connections: Mapping[int, sqlite3.Connection] | None = None,
    ) -> None:
        """``outbox_left``: the outbox rows a previous run left, by shard, as counted when the
        files were opened (``shards.open_shards``); ``None`` has the first flush count them.
        ``connections``: shard connections opened by :meth:`connect`, now the writer's."""
        self.layout = layout
        self.data_dir = data_dir
        # Where offloaded JSON goes, by key ``artifacts/<session>/<id>.json``: the configured
        # store; without one (tests of the writer alone) the local layout beside ``data_dir``.
        self.files: FileStore = files or LocalFileStore(data_dir.parent)
        self.json_threshold_bytes = json_threshold_bytes
        # Fault injection for tests (e.g. "between_node_and_event"); None in production.
        self.fault = fault
        self._conns: dict[int, sqlite3.Connection] = dict(connections or {})
        self._dirty: dict[int, int] = {}  # shard -> commands applied since take_dirty()
        # The search outbox (module docstring). A subclass that writes its index elsewhere
        # (PostgreSQL's, in the batch's own transaction) has none.
        self._outbox: OutboxLedger | None = None
        if type(self)._write_index is Writer._write_index:
            self._outbox = OutboxLedger(layout.shard_count, outbox_left)

    def _conn(self, shard: int) -> sqlite3.Connection:
        conn = self._conns.get(shard)
        if conn is None:
            conn = self._conns[shard] = self.connect(self.file_of(shard))
        return conn

    @staticmethod
    def connect(path: Path) -> sqlite3.Connection:
        """A connection as the writer keeps one (``shards.open_shards`` opens them with this so
        that the writer starts with every shard's schema parsed): usable from the writer's
        thread, many statements cached, configured, and never checkpointing by itself —
        checkpoints run beside the writer (services.storage_writer.checkpoint), never inside a
        COMMIT that receipts wait for."""
        conn = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, cached_statements=_STATEMENT_CACHE
        )
        configure(conn)
        conn.execute("PRAGMA wal_autocheckpoint=0")
        return conn

    def file_of(self, shard: int) -> Path:
        """The file of a key of ``take_dirty``: a shard's, or the catalog's for :data:`CATALOG`."""
        return self.layout.db_path if shard == CATALOG else self.layout.path(shard)

    def close(self) -> None:
        """Flush the search outbox and delete its flushed rows, then close every connection
        (a checkpoint happens on the last close of each file). A failure to flush leaves the
        rows for the next start; so does a writer that wrote none (no scan of every shard)."""
        try:
            outbox = self._outbox
            if outbox is not None:
                if outbox.pending:
                    self.flush_index()
                for shard, seq in outbox.take_flushed():
                    self._conn(shard).execute("DELETE FROM search_outbox WHERE seq <= ?", (seq,))
        except sqlite3.Error:
            log.exception("the search index could not be flushed; the next start will")
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    @property
    def has_outbox(self) -> bool:
        """Whether texts to index wait in the shards' outboxes (SQLite's writer; PostgreSQL's
        indexes them in the batch's own transaction)."""
        return self._outbox is not None

    @property
    def index_pending(self) -> int:
        """Texts in the outbox not yet searchable (1 until a first flush has looked for rows a
        previous run left); always 0 without an outbox. Read from any thread (an int)."""
        return 0 if self._outbox is None else self._outbox.waiting

    def flush_index(self, max_rows: int | None = None) -> int:
        """Move pending outbox rows into the catalog's FTS5 table in one transaction, on this
        thread, and return how many moved. With ``max_rows``, stop after the shard that reaches
        it (the rest stay pending); without, every pending row moves, so a search that follows
        finds them. (The service runs the same flush in the index's own process:
        :meth:`plan_flush`, ``index_process``, :meth:`record_flush`.)"""
        plan = self.plan_flush(max_rows)
        if plan is None:
            return 0
        last, moved = flush_outbox(
            self._conn(CATALOG), {s: (self._conn(s), after) for s, after in plan.after.items()}
        )
        self.record_flush(plan, last, moved)
        return moved

    def plan_flush(self, max_rows: int | None = None) -> FlushPlan | None:
        """Which shards' outboxes a flush reads, and from which seq (``None``: nothing pending;
        ``OutboxLedger.plan``). Call on the writer's thread; one flush at a time, each ended by
        :meth:`record_flush`."""
        return None if self._outbox is None else self._outbox.plan(self._conn, max_rows)

    def record_flush(self, plan: FlushPlan, last: dict[int, int], moved: int) -> None:
        """What a flush of ``plan`` did: shard -> the last seq it indexed (deleted by the
        shard's next transaction) and the rows moved (``OutboxLedger.record``)."""
        if self._outbox is not None:
            self._outbox.record(plan, last)
        if moved:
            self._dirty[CATALOG] = self._dirty.get(CATALOG, 0) + moved

    def take_dirty(self) -> dict[int, int]:
        """Shard -> commands applied to it since the last call (call on the writer's thread)."""
        dirty, self._dirty = self._dirty, {}
        return dirty

    def apply_batch(self, commands: Sequence[StorageCommand]) -> list[CommandReceipt]:
        """Apply ``commands`` and return one receipt per command, in order, after COMMIT."""
        receipts: list[CommandReceipt | None] = [None] * len(commands)
        by_shard: dict[int, list[int]] = {}
        for i, command in enumerate(commands):
            try:
                shard = self._shard(command)
            except SchemaError as exc:  # hostile or malformed ids never reach SQL
                receipts[i] = _refused(command, exc)
                continue
            by_shard.setdefault(shard, []).append(i)
        now = datetime.now(UTC).isoformat(timespec="microseconds")
        ctx = ApplyContext(
            now, self.data_dir, self.json_threshold_bytes, self.fault, files=self.files
        )
        ctx.index.deferred = self._outbox is not None
        for shard, indices in by_shard.items():
            # Counted before applying: a failed batch may have committed part of a shard.
            self._dirty[shard] = self._dirty.get(shard, 0) + len(indices)
            batch = [commands[i] for i in indices]
            try:
                done = self._apply_shard(shard, batch, ctx)
            except (sqlite3.OperationalError, OSError) as exc:
                if not _disk_full(exc, self.data_dir.parent):
                    raise
                log.error("the database's disk is full: %d commands refused", len(batch))
                done = [_refused(c, _STORAGE_FULL) for c in batch]
            for i, receipt in zip(indices, done, strict=True):
                receipts[i] = receipt
        return [r for r in receipts if r is not None]

    def _shard(self, command: StorageCommand) -> int:
        """The shard a command writes: its session's, or for an account's own records
        (assistants) the account's (``ShardLayout.shard_of_account``)."""
        if isinstance(command, AccountCommand):
            return self.layout.shard_of_account(command.account_id)
        return self.layout.shard_of(validate_session_id(command.session_id))

    def _write_index(self, ops: list[IndexOp]) -> None:
        """Write the search index's ops of a shard's batch: to the catalog, in a transaction of
        its own committed before the shard's (PostgreSQL's writer overrides this)."""
        apply_ops(self._conn(CATALOG), ops)
        self._dirty[CATALOG] = self._dirty.get(CATALOG, 0) + len(ops)

    def _apply_shard(
        self, shard: int, commands: list[StorageCommand], ctx: ApplyContext
    ) -> list[CommandReceipt]:
        conn = self._conn(shard)
        conn.execute("BEGIN IMMEDIATE")
        deferred = 0
        outbox = self._outbox
        flushed = None if outbox is None else outbox.flushed.get(shard)
        try:
            if flushed is not None:  # in the catalog already: no commit of their own to drop
                conn.execute("DELETE FROM search_outbox WHERE seq <= ?", (flushed,))
            seen = _stored_receipts(conn, [c.command_id for c in commands])
            out: list[CommandReceipt] = []
            rows: list[tuple[str, str, str, int]] = []
            stamp = int(time.time())
            for command in commands:
                first = seen.get(command.command_id)
                if first is not None:
                    out.append(first.model_copy(update={"duplicate": True}))
                    continue
                receipt, applied = _apply_one(conn, command, ctx)
                if receipt.ok:
                    seen[command.command_id] = receipt
                    if applied is not None and needs_receipt(command, applied):
                        result = json.dumps(receipt.result, separators=(",", ":"))
                        rows.append((command.command_id, _owner(command), result, stamp))
                out.append(receipt)
            conn.executemany(
                "INSERT INTO command_receipts (command_id, session_id, result_json, created_at) "
                "VALUES (?, ?, ?, ?)",
                rows,
            )
            # Texts wait in the outbox, committed with what they index. What goes to the
            # catalog now goes first: its ops are idempotent, so if the shard's COMMIT is lost
            # the redelivered batch writes them again; the reverse order could lose them.
            ops = ctx.index.take()
            if ops and outbox is not None:
                deferred, ops = defer_ops(conn, ops)
            if ops:
                self._write_index(ops)
            ctx.fault_point("before_commit")
            conn.execute("COMMIT")
        except BaseException:
            ctx.index.take()
            ctx.after_commit.clear()
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        if outbox is not None:
            if flushed is not None:
                outbox.deleted(shard)
            if deferred:
                outbox.deferred(shard, deferred)
        ctx.fault_point("after_commit")
        actions, ctx.after_commit = ctx.after_commit, []
        for action in actions:
            action()
        return out


def _apply_one(
    conn: sqlite3.Connection, command: StorageCommand, ctx: ApplyContext
) -> tuple[CommandReceipt, CommandResult | None]:
    """The command's receipt and, when it was applied just now, its typed result."""
    conn.execute("SAVEPOINT cmd")
    mark, actions = ctx.index.mark(), len(ctx.after_commit)
    try:
        result = apply_command(conn, command, ctx)
    except AlreadyApplied as done:
        conn.execute("RELEASE cmd")  # nothing was written
        ctx.index.rollback(mark)
        first = wire(done.result)
        return CommandReceipt(
            command_id=command.command_id, ok=True, result=first, duplicate=True
        ), None
    except AgentCoreError as exc:
        conn.execute("ROLLBACK TO cmd")
        conn.execute("RELEASE cmd")
        ctx.index.rollback(mark)
        del ctx.after_commit[actions:]
        return _refused(command, exc), None
    except BaseException:
        if conn.in_transaction:  # SQLITE_FULL (among others) may have rolled it all back
            conn.execute("ROLLBACK TO cmd")
            conn.execute("RELEASE cmd")
        raise
    conn.execute("RELEASE cmd")
    return CommandReceipt(command_id=command.command_id, ok=True, result=wire(result)), result


_STORAGE_FULL = StorageError(
    RefusalCode.STORAGE_FULL,
    "the database's disk is full; nothing was written: try again when space is freed",
    retryable=True,
)


# Free bytes under which an I/O error of the database is taken for a full disk.
_FULL_BELOW_BYTES = 1 << 20


def _disk_full(exc: sqlite3.OperationalError | OSError, db_dir: Path) -> bool:
    """``SQLITE_FULL`` or ``ENOSPC`` (an artifact file); or an I/O error (growing the WAL or its
    index on a full disk is reported as ``disk I/O error``) while the database's filesystem has
    next to no space left."""
    if isinstance(exc, OSError):
        return exc.errno == errno.ENOSPC
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    if code == sqlite3.SQLITE_FULL or "disk is full" in str(exc):
        return True
    if code != sqlite3.SQLITE_IOERR:
        return False
    try:
        return shutil.disk_usage(db_dir).free < _FULL_BELOW_BYTES
    except OSError:
        return False


def _owner(command: StorageCommand) -> str:
    """What a receipt row names as its owner (column ``session_id``): the session, or
    ``account:<id>`` for an account's command."""
    if isinstance(command, AccountCommand):
        return f"account:{command.account_id}"
    return command.session_id


def _refused(command: StorageCommand, exc: AgentCoreError) -> CommandReceipt:
    """The receipt of a refused command; ``exc.code`` must be a :class:`RefusalCode` (the
    appliers raise only those; ``tests/unit/bus/test_refusals.py`` checks every one)."""
    error = exc if isinstance(exc, StorageError) else StorageError(exc.code, exc.message)
    refusal = Refusal.model_validate(error.to_payload().model_dump())
    return CommandReceipt(command_id=command.command_id, ok=False, error=refusal)


def _stored_receipts(conn: sqlite3.Connection, command_ids: list[str]) -> dict[str, CommandReceipt]:
    found: dict[str, CommandReceipt] = {}
    unique = list(dict.fromkeys(command_ids))
    for start in range(0, len(unique), _IN_CHUNK):
        chunk = unique[start : start + _IN_CHUNK]
        marks = ",".join("?" * len(chunk))
        for command_id, text in conn.execute(
            f"SELECT command_id, result_json FROM command_receipts WHERE command_id IN ({marks})",
            chunk,
        ):
            # Only applied commands have receipts: ok, with the result they got.
            found[command_id] = CommandReceipt(
                command_id=command_id, ok=True, result=json.loads(text)
            )
    return found
