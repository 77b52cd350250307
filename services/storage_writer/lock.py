"""The single-owner lock on the database: ``fcntl.flock`` on a lock file beside it.

The kernel releases the lock when the owning process dies (even by SIGKILL), so a crashed writer
never blocks its successor, while a second live writer is refused at start-up.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import threading
from pathlib import Path

from agent_core.errors import StorageError

__all__ = ["WriterLock"]

log = logging.getLogger("soong.storage_writer")


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
        self._claim(fd)

    def _claim(self, fd: int) -> None:
        """Make ``fd``, whose flock this process holds, the lock's: the holder's pid written."""
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd

    async def acquire_when_free(self) -> bool:
        """Take the lock, or wait until it is free and take it (a standby writer); cancellable.
        ``True`` when it waited: this writer takes over from another.

        The wait is a blocking ``flock`` on a daemon thread of its own: the kernel grants it the
        moment the owner's descriptor closes (its death included), so a takeover costs no poll
        interval and a waiting standby no CPU. Cancelled, the wait leaves that thread blocked
        (a ``flock`` cannot be interrupted); a lock granted to it afterwards is released at
        once, and the thread dies with the process.
        """
        try:
            self.acquire()
        except StorageError as exc:
            if exc.code != "writer_locked":
                raise
            log.info(
                "standby: the database is owned by pid %s; taking over when it stops",
                exc.details.get("holder_pid"),
            )
        else:
            log.info("active: this writer holds the database")
            return False
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        waiter = _Waiter(fd, asyncio.get_running_loop())
        try:
            await waiter.granted
        except BaseException:
            waiter.abandon()
            raise
        self._claim(fd)
        log.warning("standby: took over the database (its previous writer stopped)")
        return True

    def release(self) -> None:
        """Release the lock (closing the descriptor releases the flock)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class _Waiter:
    """One blocking ``flock(fd, LOCK_EX)`` on a daemon thread, its outcome in ``granted``.

    A grant nobody takes is released (``fd`` closed) by exactly one of: the thread, granted
    after being abandoned or with the loop closed; ``_settle``, finding the future cancelled;
    :meth:`abandon`, finding it settled (the task cancelled after the grant, before it
    resumed). Only a loop that stops between the grant and ``_settle`` leaves it open: the
    process is then ending, and its exit frees it.
    """

    def __init__(self, fd: int, loop: asyncio.AbstractEventLoop) -> None:
        self.fd = fd
        self.loop = loop
        self.granted: asyncio.Future[None] = loop.create_future()
        self._mutex = threading.Lock()
        self._abandoned = False
        threading.Thread(target=self._wait, name="writer-lock-wait", daemon=True).start()

    def _wait(self) -> None:
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except OSError as exc:
            failure: OSError | None = exc
        else:
            failure = None
        with self._mutex:
            if self._abandoned:
                os.close(self.fd)
                return
            try:
                self.loop.call_soon_threadsafe(self._settle, failure)
            except RuntimeError:  # the loop is closed: nobody will take the lock
                os.close(self.fd)

    def _settle(self, failure: OSError | None) -> None:
        if self.granted.done():  # cancelled while the grant was on its way
            os.close(self.fd)
        elif failure is not None:
            os.close(self.fd)
            self.granted.set_exception(failure)
        else:
            self.granted.set_result(None)

    def abandon(self) -> None:
        """The waiting coroutine is gone (on the loop's thread): a grant already settled is
        released here, a later one by whoever of the thread and ``_settle`` sees it."""
        with self._mutex:
            self._abandoned = True
        granted = self.granted
        if granted.done() and not granted.cancelled() and granted.exception() is None:
            os.close(self.fd)  # settled, then the task was cancelled before it resumed
