"""The storage backend port: what the storage-writer service needs of the database beneath it.

The service (``services.storage_writer.service``) reads commands and queries from the bus, hands
each batch to a backend on a thread of its own, and sends the receipts and replies; everything
below that line is the backend's:

- ``writer.apply_batch(commands)`` on the *write thread* (one thread, one connection): group
  commit, a savepoint per command so a refused one fails alone, fencing, receipts and sequence
  numbers in the same transaction as the write. Returns after the commit, one receipt a command.
- ``engine.answer(query)`` on the *read thread*: a query never waits behind a write batch.
- ``tasks(write_thread)``: background work (SQLite's WAL checkpoints; PostgreSQL's watch for a
  writer another took the partition from, which stops the service).
- ``close(write_thread, read_thread)``: close the connections on their own threads and give up
  ownership (SQLite's lock file).

Backends: ``sqlite`` (:mod:`.sqlite`, the embedded default, files in the home) and ``postgres``
(:mod:`.postgres`, PostgreSQL 15 or later), chosen by ``[storage] backend``. Opening a backend
takes ownership, checks the server and runs the migrations; a bad configuration raises
:class:`~agent_core.errors.StorageError` or :class:`~agent_core.errors.ConfigError`, which the
CLI prints as one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Executor
from typing import Protocol

from agent_core.bus.contracts.storage import (
    CommandReceipt,
    QueryReply,
    StorageCommand,
    StorageQuery,
)
from agent_core.config import Settings
from agent_core.service import BackgroundTask

__all__ = ["BackgroundTask", "CommandApplier", "QueryAnswerer", "StorageBackend", "open_backend"]


class CommandApplier(Protocol):
    """Applies batches of commands; one thread calls it."""

    def apply_batch(self, commands: Sequence[StorageCommand]) -> list[CommandReceipt]:
        """One receipt per command, in order, returned only once the batch is durable."""
        ...

    def close(self) -> None:
        """Close the write connections."""
        ...


class QueryAnswerer(Protocol):
    """Answers queries on read-only connections; one thread calls it."""

    def answer(self, query: StorageQuery) -> QueryReply:
        """The reply to one query (a typed error reply for a bad one, never an exception)."""
        ...

    def close(self) -> None:
        """Close the read connections."""
        ...


class StorageBackend(Protocol):
    """An opened backend: owned, checked and migrated."""

    @property
    def name(self) -> str:
        """The backend's name (``[storage] backend``)."""
        ...

    @property
    def writer(self) -> CommandApplier:
        """The command side (the write thread's)."""
        ...

    @property
    def engine(self) -> QueryAnswerer:
        """The query side (the read thread's)."""
        ...

    @property
    def took_over(self) -> bool:
        """Whether this writer waited, as a standby, for the previous one to stop: a takeover,
        which should serve again before anything else starts (the service then starts the
        search index's process at its first flush)."""
        ...

    def tasks(self, write_thread: Executor) -> list[BackgroundTask]:
        """Background tasks for the service runner (each runs until its event is set)."""
        ...

    async def close(self, write_thread: Executor, read_thread: Executor) -> None:
        """Close both sides on their threads and give up ownership."""
        ...


async def open_backend(settings: Settings) -> StorageBackend:
    """The backend ``[storage] backend`` names, opened (see the module's docstring)."""
    if settings.storage.backend == "postgres":
        from services.storage_writer.backends.postgres import open_postgres

        return await open_postgres(settings)
    from services.storage_writer.backends.sqlite import SqliteBackend

    return await SqliteBackend.open(settings)
