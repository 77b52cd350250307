"""The ``sqlite`` backend: SQLite files in the home, the embedded default.

Today's storage-writer behind the port, unchanged: the single-owner lock file beside the
database (a standby writer waits for it), the catalog and its shard files
(:mod:`services.storage_writer.shards`), the group-committing :class:`Writer`, the read-only
:class:`QueryEngine` and the WAL checkpoints off the commit path (:class:`CheckpointLoop`).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor
from dataclasses import dataclass, field

from agent_core.config import Settings
from agent_core.files import open_file_store
from agent_core.service import BackgroundTask
from services.storage_writer.checkpoint import CheckpointLoop
from services.storage_writer.lock import WriterLock
from services.storage_writer.queries import QueryEngine
from services.storage_writer.shards import OpenedCatalog, open_shards
from services.storage_writer.writer import Writer

__all__ = ["SqliteBackend"]


@dataclass
class SqliteBackend:
    """The opened SQLite backend (``writer`` and ``engine`` are the concrete classes: tests
    inject faults through ``writer.fault``)."""

    writer: Writer
    engine: QueryEngine
    lock: WriterLock
    name: str = "sqlite"
    # Whether this writer waited for the lock: a standby taking over from a writer that stopped.
    took_over: bool = False
    _checkpoints: list[CheckpointLoop] = field(default_factory=list)

    @classmethod
    async def open(cls, settings: Settings) -> SqliteBackend:
        """Take the lock (or wait for it as a standby), then create or migrate the files."""
        lock = WriterLock(settings.db_path)
        took_over = False
        if settings.storage.standby:
            took_over = await lock.acquire_when_free()
        else:
            lock.acquire()  # raises StorageError("writer_locked"): the CLI prints it and exits 2
        opened: OpenedCatalog | None = None
        try:
            # The writer's own connections, opened while the files are: it starts with every
            # shard's schema parsed, rather than parsing one on the first command to each.
            opened = await asyncio.to_thread(open_shards, settings.db_path, connect=Writer.connect)
            files = await open_file_store(settings)
        except BaseException:
            if opened is not None:
                for conn in opened.connections.values():
                    conn.close()
            lock.release()
            raise
        writer = Writer(
            opened.layout,
            settings.db_path.parent / "artifacts",
            settings.storage.json_artifact_threshold_bytes,
            files=files,
            outbox_left=opened.outbox_left,
            connections=opened.connections,
        )
        return cls(writer, QueryEngine(opened.layout), lock, took_over=took_over)

    def tasks(self, write_thread: Executor) -> list[BackgroundTask]:
        """The WAL checkpoints, asking the writer on its own thread what it wrote."""
        checkpoints = CheckpointLoop(self.writer, write_thread)
        self._checkpoints.append(checkpoints)
        return [checkpoints.run]

    async def close(self, write_thread: Executor, read_thread: Executor) -> None:
        """Stop the checkpoints, close both sides, release the lock."""
        loop = asyncio.get_running_loop()
        for checkpoints in self._checkpoints:
            await checkpoints.close()
        await loop.run_in_executor(write_thread, self.writer.close)
        await loop.run_in_executor(read_thread, self.engine.close)
        self.lock.release()
