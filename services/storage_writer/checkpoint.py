"""WAL checkpoints off the commit path.

SQLite's automatic checkpoint runs inside the COMMIT that crosses ``wal_autocheckpoint`` pages:
that commit copies the log into the database and, with ``synchronous=NORMAL``, fsyncs both — a
stall of tens of milliseconds that every command of its batch waits for (it was the receipt
p99 at 16 producers: 29–38 ms with it, 7–11 ms without, ``bench/storage_writer.py``). The writer's
connections therefore turn it off, and this checkpointer runs ``wal_checkpoint(PASSIVE)`` on its
own connections, in its own thread, for the shards written since its last round. PASSIVE never
waits for the writer and never blocks it; a round that could not copy everything (a reader held
an old snapshot) is finished by the next one, so the WAL stays small.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from services.storage_writer.schema import BUSY_TIMEOUT_MS

__all__ = ["INTERVAL_S", "Checkpointer"]

log = logging.getLogger("soong.storage_writer")

INTERVAL_S = 0.5  # how stale a shard's database file may get behind its WAL


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
