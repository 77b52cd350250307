"""storage_writer: the only process that talks to the database; commands in batches, queries apart.

The database is behind a backend (``services.storage_writer.backends``: ``sqlite``, the default,
or ``postgres``); this module is the bus side, the same for both. With SQLite, start-up order:
take the single-owner lock (a second writer exits non-zero with a clear message;
a *standby* writer — ``storage.standby`` — waits for it instead, already started and connected, so
that it takes over within a poll interval of the owner's death), apply migrations, then the service runner re-applies this consumer's own pending commands
(idempotently) before it reads new ones. Commands run on the writer thread, one transaction per
shard per batch; queries run on a reader thread with read-only connections, through a consumer of
their own, so a query never waits behind a write batch — except a search while the SQLite
writer's search outbox holds rows: it waits for them to be flushed on the writer thread
(``index_flush``), so that what was acknowledged before it is found.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from agent_core.bus import GROUP_STORAGE, Delivery, StreamConsumer, hand_back, reclaim_idle
from agent_core.bus.contracts.storage import (
    STORAGE_COMMAND,
    STORAGE_QUERY,
    CommandReceipt,
    QueryReply,
    SearchSessions,
    StorageCommand,
    StorageQuery,
)
from agent_core.observability.metrics import WRITER_BATCH_COMMANDS, WRITER_COMMIT_SECONDS
from agent_core.observability.tracing import context_from, tracer
from agent_core.service import ServiceContext, ServiceParts
from services.storage_writer.backends import (
    CommandApplier,
    QueryAnswerer,
    StorageBackend,
    open_backend,
)
from services.storage_writer.index_flush import IndexFlusher
from services.storage_writer.index_process import IndexProcess, LogSetup
from services.storage_writer.writer import Writer

if TYPE_CHECKING:  # psycopg is imported only when the postgres backend is chosen
    from services.storage_writer.backends.pg_store import PgWriter

__all__ = ["StorageWriterService", "assemble", "build"]

log = logging.getLogger("soong.storage_writer")
_QUERY_BATCH = 64
_GRACEFUL_S = 15.0  # a partition handed over: its batch in flight finishes within this


@dataclass
class StorageWriterService:
    """The assembled service: its parts for the runner, and the backend (tests inject faults
    through ``writer``)."""

    parts: ServiceParts
    backend: StorageBackend

    @property
    def writer(self) -> CommandApplier:
        """The backend's command side."""
        return self.backend.writer

    @property
    def engine(self) -> QueryAnswerer:
        """The backend's query side."""
        return self.backend.engine


async def build(ctx: ServiceContext) -> ServiceParts:
    """Lock and migrate the database, then declare the command and query consumers."""
    return (await assemble(ctx)).parts


async def assemble(ctx: ServiceContext) -> StorageWriterService:
    """Everything :func:`build` does, keeping hold of the writer and the query engine."""
    settings = ctx.settings
    backend = await open_backend(settings)
    writer, engine = backend.writer, backend.engine
    write_thread = ThreadPoolExecutor(1, thread_name_prefix=f"{backend.name}-writer")
    read_thread = ThreadPoolExecutor(1, thread_name_prefix=f"{backend.name}-reader")
    loop = asyncio.get_running_loop()
    flusher = await _index_flusher(ctx, writer, write_thread, start=not backend.took_over)

    async def write_batch(batch: list[tuple[StorageCommand, Delivery]]) -> list[CommandReceipt]:
        commands = [command for command, _ in batch]
        started_ns = time.time_ns()
        receipts = await loop.run_in_executor(write_thread, writer.apply_batch, commands)
        observe_commit(batch, started_ns)
        if flusher is not None:
            flusher.after_batch()
        return receipts

    async def read_batch(batch: list[tuple[StorageQuery, Delivery]]) -> list[QueryReply]:
        queries = [query for query, _ in batch]
        if flusher is not None and any(isinstance(q, SearchSessions) for q in queries):
            await flusher.before_search()
        return await loop.run_in_executor(read_thread, _answer_all, engine, queries)

    consumers: list[StreamConsumer[StorageCommand]] = []
    if settings.storage.backend == "postgres" and settings.storage.partitions > 1:
        from services.storage_writer.backends.pg_partitions import PartitionedPostgres

        assert isinstance(backend, PartitionedPostgres)
        backend.open_reader = partial(_open_partition, ctx)
    else:
        consumers.append(
            ctx.consumer(
                ctx.names.storage_commands(),
                GROUP_STORAGE,
                STORAGE_COMMAND,
                batch_handler=write_batch,
                options=ctx.default_options(batch=True, max_records=settings.storage.batch_max),
            )
        )
    queries = ctx.consumer(
        ctx.names.storage_queries,
        GROUP_STORAGE,
        STORAGE_QUERY,
        batch_handler=read_batch,
        options=ctx.default_options(batch=True, max_records=_QUERY_BATCH),
    )

    tasks = backend.tasks(write_thread)

    async def close() -> None:
        if flusher is not None:
            await flusher.close()
        await backend.close(write_thread, read_thread)
        write_thread.shutdown()
        read_thread.shutdown()

    parts = ServiceParts(consumers=[*consumers, queries], tasks=tasks, on_stop=[close])
    return StorageWriterService(parts, backend)


@dataclass
class _PartitionReader:
    """One owned partition's stream consumer (:class:`.pg_partitions.PartitionReader`)."""

    consumer: StreamConsumer[StorageCommand]

    @property
    def running(self) -> bool:
        return self.consumer.running

    async def stop(self) -> None:
        await self.consumer.stop_reading(_GRACEFUL_S)
        # What it read and did not commit (superseded, or a batch cut off by the grace time)
        # goes to the partition's next owner at its next sweep, not after ``min_idle_ms``.
        handed = await hand_back(self.consumer)
        if handed:
            log.warning("%s: %d entries left to the next owner", self.consumer.stream, handed)

    async def reclaim(self) -> None:
        await reclaim_idle(self.consumer)


async def _index_flusher(
    ctx: ServiceContext, writer: CommandApplier, write_thread: ThreadPoolExecutor, *, start: bool
) -> IndexFlusher | None:
    """The SQLite writer's search-index flusher, a first flush due when rows wait (those a
    crashed writer left, counted when the files were opened); ``None`` for a writer that
    indexes in its batches (PostgreSQL's). Its process is started here with ``start``, else by
    its first flush: a standby taking over (``start`` false, ``StorageBackend.took_over``) serves
    sooner without a Python process's start-up beside it (serving again after a SIGKILL 0.11 ->
    0.09 s when that start cost ~0.15 s of CPU; ~0.05 s since ``index_child``), while a writer
    starting with the stack pays that start-up before its first work."""
    if not (isinstance(writer, Writer) and writer.has_outbox):
        return None
    s = ctx.settings
    logs = LogSetup(s.log_level, s.observability.log_format, s.debug, ctx.instance)
    indexer = IndexProcess(writer.layout, logs)
    if start:
        await indexer.start()
    flusher = IndexFlusher(writer, write_thread, indexer=indexer)
    flusher.after_batch()
    return flusher


async def _open_partition(
    ctx: ServiceContext, partition: int, writer: PgWriter, thread: Executor
) -> _PartitionReader:
    """Read partition ``partition``'s stream, applying on ``thread``: its group created if need
    be, every entry still pending in it (a previous owner's) claimed and applied first."""
    loop = asyncio.get_running_loop()

    async def write_batch(batch: list[tuple[StorageCommand, Delivery]]) -> list[CommandReceipt]:
        started_ns = time.time_ns()
        receipts = await loop.run_in_executor(
            thread, writer.apply_batch, [command for command, _ in batch]
        )
        observe_commit(batch, started_ns)
        return receipts

    consumer = ctx.consumer(
        ctx.names.storage_partition_stream(partition),
        GROUP_STORAGE,
        STORAGE_COMMAND,
        batch_handler=write_batch,
        options=ctx.default_options(batch=True, max_records=ctx.settings.storage.batch_max),
    )
    await consumer.ensure_group()
    taken = await reclaim_idle(consumer, min_idle_ms=0)
    if taken:
        ctx.log.info("partition %d: applied %d entries left pending", partition, taken)
    consumer.start_reading()
    return _PartitionReader(consumer)


def _answer_all(engine: QueryAnswerer, queries: list[Any]) -> list[QueryReply]:
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
