"""One stack per home: ``soong-agent up`` holds an exclusive lock on ``<home>/run/up.lock``.

The lock is an ``flock`` on an open file, so the kernel drops it when its holder dies however it
dies (no stale lock to clean up). The holder writes its pid into the file after locking, so a
second ``up`` can say who holds the home.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import IO, Final

from agent_core.errors import ConfigError

__all__ = ["LOCK_FILE", "HomeLock"]

LOCK_FILE: Final = Path("run/up.lock")


class HomeLock:
    """The exclusive lock on one home; constructing it does no I/O."""

    def __init__(self, home: Path) -> None:
        self.path = home / LOCK_FILE
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        """Take the lock or raise ``ConfigError("home_in_use")`` naming the holder's pid."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise ConfigError(
                "home_in_use",
                f"{self.path.parent.parent} is in use by another `soong-agent up` (pid {holder}); "
                "stop it first, or give this one another SOONG_AGENT_HOME",
                details={"home": str(self.path.parent.parent), "pid": holder},
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._file = handle

    def release(self) -> None:
        """Give the lock up (idempotent). The file stays: removing it would race a new holder."""
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.truncate(0)
            self._file.close()
            self._file = None
