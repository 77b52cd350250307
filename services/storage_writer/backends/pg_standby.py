"""A standby writer's wait for a partition of PostgreSQL: inside the server, not by polling.

The owner of a partition holds a session-level advisory lock on its write connection
(:func:`.postgres.try_own`). A standby asks for the same lock with the blocking
``pg_advisory_lock`` on its own connection: the server grants it the moment the owner's session
ends (the owner stopped, died or lost its connection), and a waiting standby sends nothing and
uses no CPU meanwhile. (Asking with ``pg_try_advisory_lock`` every 50 ms, as before, took over up
to 50 ms late and woke the standby twenty times a second.)

The blocking call runs on a daemon thread of its own (:class:`ServerWait`): a wait can last for
days, which must neither hold a worker thread of the default executor nor keep the process from
exiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable

import psycopg

from services.storage_writer.backends.pg_conn import PgConn

__all__ = ["ServerWait"]

log = logging.getLogger("soong.storage_writer")


class ServerWait:
    """One blocking ``pg_advisory_lock`` on ``conn`` (then ``record``, which says who owns
    the partition) on a daemon thread; its outcome in ``taken``.

    The connection is closed by exactly one party, and never while the thread uses it: the
    caller once ``taken`` is settled; or, when the caller gives the wait up (:meth:`abandon`)
    while the thread is still inside the server, the thread itself once its call returns (the
    server's wait is cancelled so that it returns at once). A lock granted to a wait given up
    is thereby released with its connection.
    """

    def __init__(
        self,
        conn: PgConn,
        lock: tuple[int, int],
        record: Callable[[PgConn], None],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._conn = conn
        self._lock = lock
        self._record = record
        self._loop = loop
        self.taken: asyncio.Future[None] = loop.create_future()
        self._mutex = threading.Lock()
        self._abandoned = self._ended = False
        threading.Thread(target=self._wait, name="pg-standby-wait", daemon=True).start()

    def _wait(self) -> None:
        failure: BaseException | None = None
        try:
            self._conn.execute("SELECT pg_advisory_lock(?, ?)", self._lock)
            self._record(self._conn)
        except Exception as exc:  # the connection lost, or the wait cancelled (abandoned)
            failure = exc
        with self._mutex:
            self._ended = True
            if self._abandoned:
                self._conn.close()
                return
        with contextlib.suppress(RuntimeError):  # a closed loop: the process is ending
            self._loop.call_soon_threadsafe(self._settle, failure)

    def _settle(self, failure: BaseException | None) -> None:
        if self.taken.done():
            return  # cancelled meanwhile: the caller's abandon() found the wait ended
        if failure is None:
            self.taken.set_result(None)
        else:
            self.taken.set_exception(failure)

    def abandon(self) -> bool:
        """Give the wait up (on the loop's thread). ``True``: the thread still waits and will
        close the connection (its server-side wait is being cancelled); ``False``: it has
        ended, and the caller closes the connection."""
        with self._mutex:
            self._abandoned = True
            if self._ended:
                return False
        threading.Thread(target=self._cancel, name="pg-standby-cancel", daemon=True).start()
        return True

    def _cancel(self) -> None:
        # Best effort: a server out of reach ends the connection by its keepalives instead.
        try:
            self._conn.raw.cancel_safe(timeout=10)
        except (psycopg.Error, OSError) as exc:
            log.debug("cancelling a standby's wait failed: %s", exc)
