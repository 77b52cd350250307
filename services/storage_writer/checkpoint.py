"""WAL checkpoints off the commit path.

SQLite's automatic checkpoint runs inside the COMMIT that crosses ``wal_autocheckpoint`` pages:
that commit copies the log into the database and, with ``synchronous=NORMAL``, fsyncs both — a
stall of tens of milliseconds that every command of its batch waits for (it was the receipt
p99 at 16 producers: 29–38 ms with it, 7–11 ms without, ``bench/storage_writer.py``). The writer's
connections therefore turn it off, and this checkpointer runs ``wal_checkpoint(PASSIVE)`` on its
own connections, in its own thread. PASSIVE never waits for the writer and never blocks it; a
round that could not copy everything (a reader held an old snapshot) is retried by the next one.

Which shards, and when (:class:`CheckpointPolicy`): a checkpoint costs two fsyncs whatever it
copies, so a shard is checkpointed once ``COMMANDS_DUE`` commands were applied to it since its
last one (about what SQLite's 1,000-page default amounts to), or ``MAX_AGE_S`` after its first
unsynced write — which bounds what a power loss can roll back (see ``schema.SYNCHRONOUS``).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from services.storage_writer.schema import BUSY_TIMEOUT_MS

__all__ = ["COMMANDS_DUE", "INTERVAL_S", "MAX_AGE_S", "CheckpointPolicy", "Checkpointer"]

log = logging.getLogger("soong.storage_writer")

INTERVAL_S = 0.5  # how often the policy is consulted
COMMANDS_DUE = 500
MAX_AGE_S = 10.0


class CheckpointPolicy:
    """Decides which shards to checkpoint now, from the commands applied to each (pure logic)."""

    def __init__(self, commands_due: int = COMMANDS_DUE, max_age_s: float = MAX_AGE_S) -> None:
        self._commands_due = commands_due
        self._max_age_s = max_age_s
        self._pending: dict[int, int] = {}  # shard -> commands since its last checkpoint
        self._since: dict[int, float] = {}  # shard -> when its first unsynced write was seen

    def due(self, written: dict[int, int], now: float) -> list[int]:
        """Add ``written`` (shard -> commands applied since the last call); return due shards."""
        for shard, count in written.items():
            self._pending[shard] = self._pending.get(shard, 0) + count
            self._since.setdefault(shard, now)
        return sorted(
            shard
            for shard, count in self._pending.items()
            if count >= self._commands_due or now - self._since[shard] >= self._max_age_s
        )

    def done(self, shards: list[int]) -> None:
        """``shards`` were fully checkpointed."""
        for shard in shards:
            self._pending.pop(shard, None)
            self._since.pop(shard, None)


class Checkpointer:
    """Checkpoints shard files on connections of its own. One thread calls it."""

    def __init__(self) -> None:
        self._conns: dict[Path, sqlite3.Connection] = {}

    def run(self, paths: Iterable[Path]) -> list[Path]:
        """PASSIVE-checkpoint each file; return those not fully checkpointed (retry them)."""
        behind = []
        for path in paths:
            try:
                busy, log_frames, done = (
                    self._conn(path).execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                )
            except sqlite3.Error as exc:  # the next round tries again; commits do not depend on it
                log.warning("checkpoint of %s failed: %s", path.name, exc)
                behind.append(path)
                continue
            if busy or done < log_frames:
                behind.append(path)
        return behind

    def _conn(self, path: Path) -> sqlite3.Connection:
        conn = self._conns.get(path)
        if conn is None:
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            self._conns[path] = conn
        return conn

    def close(self) -> None:
        """Close the connections (the writer's own close checkpoints what is left)."""
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
