"""storage_writer: the only process that opens the SQLite files; commands in batches, queries apart.

Start-up order: take the single-owner lock (a second writer exits non-zero with a clear message;
a *standby* writer — ``storage.standby`` — waits for it instead, already started and connected, so
that it takes over within a poll interval of the owner's death), apply migrations, then the service runner re-applies this consumer's own pending commands
(idempotently) before it reads new ones. Commands run on the writer thread, one transaction per
shard per batch; queries run on a reader thread with read-only connections, through a consumer of
their own, so a query never waits behind a write batch.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from agent_core.bus import GROUP_STORAGE, Delivery
from agent_core.bus.contracts.storage import (
    STORAGE_COMMAND,
    STORAGE_QUERY,
    CommandReceipt,
    QueryReply,
    StorageCommand,
    StorageQuery,
)
from agent_core.files import open_file_store
from agent_core.observability.metrics import WRITER_BATCH_COMMANDS, WRITER_COMMIT_SECONDS
from agent_core.observability.tracing import context_from, tracer
from agent_core.service import ServiceContext, ServiceParts
from services.storage_writer.checkpoint import CheckpointLoop
from services.storage_writer.lock import WriterLock
from services.storage_writer.queries import QueryEngine
from services.storage_writer.shards import open_catalog
from services.storage_writer.writer import Writer

__all__ = ["StorageWriterService", "assemble", "build"]

_QUERY_BATCH = 64


@dataclass
class StorageWriterService:
    """The assembled service: its parts for the runner, and the writer (tests inject faults)."""

    parts: ServiceParts
    writer: Writer
    engine: QueryEngine


async def build(ctx: ServiceContext) -> ServiceParts:
    """Lock and migrate the database, then declare the command and query consumers."""
    return (await assemble(ctx)).parts


async def assemble(ctx: ServiceContext) -> StorageWriterService:
    """Everything :func:`build` does, keeping hold of the writer and the query engine."""
    settings = ctx.settings
    lock = WriterLock(settings.db_path)
    if settings.storage.standby:
        await lock.acquire_when_free()
    else:
        lock.acquire()  # raises StorageError("writer_locked"): the CLI prints it and exits 2
    layout = await asyncio.to_thread(open_catalog, settings.db_path)
    writer = Writer(
        layout,
        settings.db_path.parent / "artifacts",
        settings.storage.json_artifact_threshold_bytes,
        files=await open_file_store(settings),
    )
    engine = QueryEngine(layout)
    write_thread = ThreadPoolExecutor(1, thread_name_prefix="sqlite-writer")
    read_thread = ThreadPoolExecutor(1, thread_name_prefix="sqlite-reader")
    loop = asyncio.get_running_loop()

    async def write_batch(batch: list[tuple[StorageCommand, Delivery]]) -> list[CommandReceipt]:
        commands = [command for command, _ in batch]
        started_ns = time.time_ns()
        receipts = await loop.run_in_executor(write_thread, writer.apply_batch, commands)
        observe_commit(batch, started_ns)
        return receipts

    async def read_batch(batch: list[tuple[StorageQuery, Delivery]]) -> list[QueryReply]:
        queries = [query for query, _ in batch]
        return await loop.run_in_executor(read_thread, _answer_all, engine, queries)

    commands = ctx.consumer(
        ctx.names.storage_commands(),
        GROUP_STORAGE,
        STORAGE_COMMAND,
        batch_handler=write_batch,
        options=ctx.default_options(batch=True, max_records=settings.storage.batch_max),
    )
    queries = ctx.consumer(
        ctx.names.storage_queries,
        GROUP_STORAGE,
        STORAGE_QUERY,
        batch_handler=read_batch,
        options=ctx.default_options(batch=True, max_records=_QUERY_BATCH),
    )

    checkpoints = CheckpointLoop(writer, write_thread)

    async def close() -> None:
        await checkpoints.close()
        await loop.run_in_executor(write_thread, writer.close)
        await loop.run_in_executor(read_thread, engine.close)
        write_thread.shutdown()
        read_thread.shutdown()
        lock.release()

    parts = ServiceParts(consumers=[commands, queries], tasks=[checkpoints.run], on_stop=[close])
    return StorageWriterService(parts, writer, engine)


def _answer_all(engine: QueryEngine, queries: list[Any]) -> list[QueryReply]:
    return [engine.answer(q) for q in queries]


def observe_commit(batch: list[tuple[StorageCommand, Delivery]], started_ns: int) -> None:
    """A committed batch: its size and time, and a ``storage.commit`` span in each sender's trace.

    The span of a command is a child of the context its sender published it in (its
    ``traceparent`` header), with the batch's start and end: the commit that made it durable.
    """
    ended_ns = time.time_ns()
    WRITER_BATCH_COMMANDS.observe(len(batch))
    WRITER_COMMIT_SECONDS.observe((ended_ns - started_ns) / 1e9)
    for command, delivery in batch:
        parent = context_from(delivery.headers)
        if parent is None:
            continue
        span = tracer().start_span(
            "storage.commit",
            context=parent,
            start_time=started_ns,
            attributes={"storage.command": command.type, "storage.batch_size": len(batch)},
        )
        span.end(end_time=ended_ns)
