"""A worker's local copies of session workspaces when files live in an S3-compatible store
(``[files] engine = "s3"``; docs/architecture.md, "Files"). With the local engine the workspace
under the home *is* the store, and every method here does nothing.

A run's attempt hydrates its session's folder before its loop starts, syncs it after each tool
call and before its end is written; the copy is removed when the worker lets the session's lane
go. While the store cannot be reached the run waits and retries (its stream says so with a
``phase`` event of phase ``files``) rather than failing: the store comes back by itself, and
nothing a sync acknowledged is lost meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final

from agent_core.files import FileStore, FileStoreError, session_prefix
from agent_core.files.mirror import WorkspaceMirror
from agent_core.runtime.ports import EventSink
from agent_core.skills.store import hydrate_account_skills
from agent_core.tools import Workspace
from agent_core.types.runtime import RunPhase

__all__ = ["WorkspaceMirrors"]

log = logging.getLogger("soong.run_worker")

# Waits between tries while the store is unreachable: short first, then every few seconds.
_BACKOFF_S: Final = (0.2, 0.5, 1.0, 2.0, 5.0)


class WorkspaceMirrors:
    """The mirrors of the sessions this worker holds, by session id."""

    def __init__(self, home: Path, store: FileStore) -> None:
        self.home = home
        self.store = store
        self.active = store.engine == "s3"
        self._mirrors: dict[str, WorkspaceMirror] = {}

    def _mirror(self, account_id: str, session_id: str) -> WorkspaceMirror:
        mirror = self._mirrors.get(session_id)
        if mirror is None:
            root = Workspace(self.home, account_id, session_id).root
            mirror = WorkspaceMirror(self.store, session_prefix(account_id, session_id), root)
            self._mirrors[session_id] = mirror
        return mirror

    async def hydrate(
        self, account_id: str, session_id: str, events: EventSink, phase: RunPhase
    ) -> None:
        """Bring the session's folder to the store's state, waiting while it is unreachable."""
        if self.active:
            mirror = self._mirror(account_id, session_id)
            await _patiently(mirror.hydrate, events, phase)

    async def hydrate_skills(self, account_id: str, events: EventSink, phase: RunPhase) -> None:
        """Bring the account's own skills folder to the store's state (the run's skill scan
        reads it), waiting while the store is unreachable."""
        if self.active:

            async def hydrate() -> int:
                return await hydrate_account_skills(self.store, self.home, account_id)

            await _patiently(hydrate, events, phase)

    async def sync(
        self, account_id: str, session_id: str, events: EventSink, phase: RunPhase
    ) -> None:
        """Send what the run changed in the folder, waiting while the store is unreachable."""
        if self.active:
            mirror = self._mirror(account_id, session_id)
            await _patiently(mirror.sync, events, phase)

    def release(self, lane: str) -> None:
        """The worker let ``lane`` go: remove the session's local copy (a branch lane, named
        ``<session>.<run>``, shares its session's folder and leaves it)."""
        mirror = self._mirrors.pop(lane, None)
        if mirror is not None:
            mirror.drop()


async def _patiently(op: Callable[[], Awaitable[int]], events: EventSink, phase: RunPhase) -> None:
    """Run ``op`` until it succeeds; each retryable failure waits a little longer (the first
    tells the run's stream why it waits). A non-retryable failure is raised (the run ends)."""
    for attempt in range(1_000_000):
        try:
            await op()
            return
        except FileStoreError as exc:
            if not exc.retryable:
                raise
            if attempt == 0:
                log.warning("file store unreachable; the run waits for it (%s)", exc.code)
                events.emit(phase)
            await asyncio.sleep(_BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)])
