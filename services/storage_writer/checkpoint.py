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

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Iterable
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path

from services.storage_writer.schema import BUSY_TIMEOUT_MS
from services.storage_writer.writer import Writer

__all__ = [
    "COMMANDS_DUE",
    "INTERVAL_S",
    "MAX_AGE_S",
    "CheckpointLoop",
    "CheckpointPolicy",
    "Checkpointer",
]

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


class CheckpointLoop:
    """The writer service's background task: every ``INTERVAL_S`` asks the writer what it wrote
    (on the writer's own thread) and checkpoints the due shards on a thread of its own.

    ``close()`` lets a round in progress finish and starts none after it, so no round ever
    submits work to a thread that is shutting down.
    """

    def __init__(self, writer: Writer, write_thread: Executor) -> None:
        self._writer = writer
        self._write_thread = write_thread
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="sqlite-checkpoint")
        self._checkpointer = Checkpointer()
        self._rounds = asyncio.Lock()
        self._closed = False

    async def run(self, stop: asyncio.Event) -> None:
        """Rounds until ``stop`` is set or :meth:`close` was called."""
        loop = asyncio.get_running_loop()
        policy = CheckpointPolicy()
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(INTERVAL_S):
                    await stop.wait()
            async with self._rounds:
                if self._closed:
                    return
                written = await loop.run_in_executor(self._write_thread, self._writer.take_dirty)
                due = policy.due(written, loop.time())
                if due:
                    paths = {self._writer.file_of(shard): shard for shard in due}
                    run = self._checkpointer.run
                    behind = await loop.run_in_executor(self._thread, run, list(paths))
                    policy.done([paths[p] for p in paths if p not in behind])

    async def close(self) -> None:
        """Wait for a round in progress, then close the connections and the thread."""
        async with self._rounds:
            self._closed = True
        await asyncio.get_running_loop().run_in_executor(self._thread, self._checkpointer.close)
        self._thread.shutdown()
