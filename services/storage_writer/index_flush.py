"""When the writer moves its search outbox into the index: off the receipt path, before a search.

The SQLite writer leaves the texts it indexes in each shard's outbox (``search_index``) so that a
batch's receipts never wait for FTS5. :class:`IndexFlusher` has them moved, one flush at a time:
planned and recorded on the writer's thread, run in the index's own process
(``index_process``; on the writer's thread when there is none). It does so ``FLUSH_DELAY_S``
after a batch left rows pending (the rows of every batch
in between go in the same catalog transaction), at once when ``FLUSH_ROWS`` are pending
(``PROCESS_FLUSH_ROWS`` when the index's process runs it), at
start-up (rows a crashed writer left) and before every search, which is answered only once
every row pending when it arrived is searchable: a message acknowledged before a search is
found by it. A writer with nothing pending (PostgreSQL's, which indexes in the batch's own
transaction) is never asked.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Final, Protocol

if TYPE_CHECKING:
    from services.storage_writer.index_process import IndexProcess
    from services.storage_writer.outbox import FlushPlan

__all__ = ["FLUSH_DELAY_S", "FLUSH_ROWS", "PROCESS_FLUSH_ROWS", "IndexFlusher", "OutboxWriter"]

log = logging.getLogger("soong.storage_writer")

# Long enough that a busy writer's flush carries hundreds of rows (FTS5 costs ~100 µs a
# transaction, ~20 µs a row in large ones); short enough that the outbox stays small.
FLUSH_DELAY_S: Final = 0.25
# Pending rows that start a flush without waiting; also what one timed flush moves at most.
# On the writer's thread (no index process: tests, a writer closing) a flush holds up every
# batch queued behind it (~50 µs a row: the node read back, then FTS5), so there it moves 64
# (256 made the receipts' p99 at 16 producers 33-44 ms against 26-27). In the index's process
# it holds up nothing but a session deletion's catalog write, and FTS5 costs less a row in
# larger transactions (~65 µs a row in 64-row ones, ~31 in 512): 1024 against 64,
# ``bench/storage_writer.py`` alternated in one sitting, saturated pairs/s 1.167x, the writer's
# CPU a command (with its index process) 0.933x saturated and 0.859x closed-loop.
FLUSH_ROWS: Final = 64
PROCESS_FLUSH_ROWS: Final = 1024


class OutboxWriter(Protocol):
    """What the flusher needs of the writer (``writer.Writer``)."""

    @property
    def index_pending(self) -> int:
        """Rows not yet searchable."""
        ...

    def flush_index(self, max_rows: int | None = None) -> int:
        """Move pending rows into the index (on the writer's thread); return how many."""
        ...

    def plan_flush(self, max_rows: int | None = None) -> FlushPlan | None:
        """The shards a flush reads and from where (on the writer's thread)."""
        ...

    def record_flush(self, plan: FlushPlan, last: dict[int, int], moved: int) -> None:
        """What a flush of ``plan`` did (on the writer's thread)."""
        ...


class IndexFlusher:
    """Schedules the writer's index flushes; one per service, used on the event loop."""

    def __init__(
        self,
        writer: OutboxWriter,
        write_thread: Executor,
        *,
        delay_s: float | None = None,
        rows: int | None = None,
        indexer: IndexProcess | None = None,
    ) -> None:
        self._writer = writer
        self._write_thread = write_thread
        # Where a flush runs: the index's own process, or (None) the writer's thread.
        self._indexer = indexer
        self._one = asyncio.Lock()  # one flush at a time: each plan starts where the last ended
        # Read at construction, not bound as defaults: a test of the service sets the module's.
        self._delay_s = FLUSH_DELAY_S if delay_s is None else delay_s
        default_rows = FLUSH_ROWS if indexer is None else PROCESS_FLUSH_ROWS
        self._rows = default_rows if rows is None else rows
        self._timer: asyncio.Task[None] | None = None

    def after_batch(self) -> None:
        """A batch was committed: schedule a flush if it left rows pending (none is running)."""
        pending = self._writer.index_pending
        if pending and self._timer is None:
            delay = 0.0 if pending >= self._rows else self._delay_s
            self._timer = asyncio.get_running_loop().create_task(self._later(delay))

    async def before_search(self) -> None:
        """Return once every row pending now is searchable. A flush that fails is logged and
        the search answered anyway (it may then miss the newest texts; the rows stay pending)."""
        if self._writer.index_pending:
            await self._flush(None)

    async def close(self) -> None:
        """Cancel a scheduled flush and stop the index's process (the writer flushes what is
        left when it closes)."""
        if self._timer is not None:
            self._timer.cancel()
            await asyncio.gather(self._timer, return_exceptions=True)
            self._timer = None
        if self._indexer is not None:
            await self._indexer.close()

    async def _later(self, delay: float) -> None:
        try:
            await asyncio.sleep(delay)
            flushed = await self._flush(self._rows)
        finally:
            self._timer = None
        if flushed:  # what is left: more than one flush's rows, or rows written meanwhile
            self.after_batch()  # (after a failure, the next batch or search tries again)

    async def _flush(self, max_rows: int | None) -> bool:
        loop = asyncio.get_running_loop()
        writer, thread = self._writer, self._write_thread
        try:
            async with self._one:
                if self._indexer is None:
                    await loop.run_in_executor(thread, writer.flush_index, max_rows)
                    return True
                plan = await loop.run_in_executor(thread, writer.plan_flush, max_rows)
                if plan is not None:
                    last, moved = await self._indexer.flush(plan.after)
                    await loop.run_in_executor(thread, writer.record_flush, plan, last, moved)
        except Exception:
            log.exception("flushing the search index failed; its rows stay pending")
            return False
        return True
