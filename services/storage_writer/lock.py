"""The single-owner lock on the database: ``fcntl.flock`` on a lock file beside it.

The kernel releases the lock when the owning process dies (even by SIGKILL), so a crashed writer
never blocks its successor, while a second live writer is refused at start-up.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
from pathlib import Path

from agent_core.errors import StorageError

__all__ = ["WriterLock"]

log = logging.getLogger("soong.storage_writer")

# How often a standby writer tries the lock: the takeover's delay after the owner dies (which
# a restarted consumer's own start-up dwarfs), and, at 50 ms, a standby's whole idle CPU.
_STANDBY_POLL_S = 0.2


class WriterLock:
    """An exclusive, non-blocking lock on ``<db_path>.lock``; constructing it does no I/O."""

    def __init__(self, db_path: Path) -> None:
        self.path = db_path.with_name(db_path.name + ".lock")
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock or raise :class:`StorageError` ``writer_locked`` naming the holder."""
        if self._fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StorageError(
                "writer_locked",
                f"another storage-writer (pid {holder}) owns {self.path.with_suffix('')}; "
                "only one writer may own the database",
                details={"lock": str(self.path), "holder_pid": holder},
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd

    async def acquire_when_free(self) -> None:
        """Wait until the lock is free and take it (a standby writer); cancellable."""
        waiting = False
        while True:
            try:
                self.acquire()
            except StorageError as exc:
                if exc.code != "writer_locked":
                    raise
                if not waiting:
                    log.info(
                        "standby: the database is owned by pid %s; taking over when it stops",
                        exc.details.get("holder_pid"),
                    )
                    waiting = True
                await asyncio.sleep(_STANDBY_POLL_S)
                continue
            if waiting:
                log.warning("standby: took over the database (its previous writer stopped)")
            else:
                log.info("active: this writer holds the database")
            return

    def release(self) -> None:
        """Release the lock (closing the descriptor releases the flock)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
