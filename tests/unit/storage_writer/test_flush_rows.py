"""How many pending rows start a flush at once: 64 on the writer's thread (a flush there holds
up the batches behind it), ``PROCESS_FLUSH_ROWS`` when the index's process runs it (larger
FTS5 transactions cost less a row, and nothing waits behind them)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from services.storage_writer.index_flush import FLUSH_ROWS, PROCESS_FLUSH_ROWS, IndexFlusher
from services.storage_writer.outbox import FlushPlan


class _Outbox:
    """The flusher's view of a writer (pure bookkeeping): what it was asked to flush."""

    def __init__(self) -> None:
        self.index_pending = 0
        self.asked: list[int | None] = []

    def flush_index(self, max_rows: int | None = None) -> int:
        self.asked.append(max_rows)
        moved, self.index_pending = self.index_pending, 0
        return moved

    def plan_flush(self, max_rows: int | None = None) -> FlushPlan | None:
        self.asked.append(max_rows)
        plan = FlushPlan()
        plan.after[0] = 0
        return plan

    def record_flush(self, plan: FlushPlan, last: dict[int, int], moved: int) -> None:
        self.index_pending = 0


class _Process:
    """Stands in for ``IndexProcess``: answers a flush at once."""

    async def flush(self, after: dict[int, int]) -> tuple[dict[int, int], int]:
        return dict(after), 1

    async def close(self) -> None:
        return None


async def _flushes_at_once(pending: int, indexer: Any) -> list[int | None]:
    outbox = _Outbox()
    thread = ThreadPoolExecutor(1)
    flusher = IndexFlusher(outbox, thread, delay_s=3600.0, indexer=indexer)
    try:
        outbox.index_pending = pending
        flusher.after_batch()
        for _ in range(50):
            await asyncio.sleep(0.01)
        return outbox.asked
    finally:
        await flusher.close()
        thread.shutdown()


async def test_on_the_writers_thread_64_rows_start_a_flush() -> None:
    assert FLUSH_ROWS == 64
    assert await _flushes_at_once(FLUSH_ROWS - 1, None) == []
    assert await _flushes_at_once(FLUSH_ROWS, None) == [FLUSH_ROWS]


async def test_in_the_index_process_a_flush_waits_for_more_rows() -> None:
    assert PROCESS_FLUSH_ROWS > FLUSH_ROWS
    assert await _flushes_at_once(FLUSH_ROWS, _Process()) == []
    assert await _flushes_at_once(PROCESS_FLUSH_ROWS, _Process()) == [PROCESS_FLUSH_ROWS]
