"""The task lists in memory, one per WAL file, replayed lazily on first use.

A list is keyed by its WAL path (resolved project directory, session, file stem), so one file never
has two in-memory owners. A list whose WAL is corrupt stays in memory as *unavailable* with its
error; its neighbours are unaffected. Loading happens in a worker thread.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from agent_core.errors import AgentCoreError
from agent_core.tasks import TaskDAG, TaskWalCorruptError
from agent_core.tasks.names import WAL_SUFFIX
from services.task_wal.location import ListLocation
from services.task_wal.walfile import MAX_REMEMBERED_REQUESTS, ListFiles, load_list

__all__ = ["ListState", "ListWrite", "TaskStore", "WriteFailures"]

_STEM = re.compile(r"[a-z0-9][a-z0-9_-]*")
_MAX_OPEN_FILES = 256  # lists with open descriptors; the rest reopen on their next append


@dataclass
class ListState:
    """One task list as the service holds it: the acknowledged DAG and how to append to it."""

    location: ListLocation
    dag: TaskDAG | None
    files: ListFiles | None  # ``None`` when the list lives in the file store (objectwal)
    corruption: TaskWalCorruptError | None = None
    requests: OrderedDict[str, int] = field(default_factory=OrderedDict)

    def remember(self, request_id: str, seq: int) -> None:
        """Record that ``request_id`` was applied up to ``seq`` (bounded, oldest forgotten)."""
        self.requests[request_id] = seq
        self.requests.move_to_end(request_id)
        if len(self.requests) > MAX_REMEMBERED_REQUESTS:
            self.requests.popitem(last=False)


ListWrite = tuple["ListState", bytes, bytes]
"""One list's staged group: its state, the WAL records and the request-log lines to append."""

WriteFailures = dict[Path, OSError | AgentCoreError]
"""The lists (by WAL identity) whose group was not made durable, with why."""


class TaskStore:
    """All lists the service has touched; see the module docstring."""

    def __init__(self, *, fsync: bool) -> None:
        self.fsync = fsync
        self._lists: dict[Path, ListState] = {}
        self._open: OrderedDict[Path, ListFiles] = OrderedDict()

    async def get(self, loc: ListLocation) -> ListState:
        """The list at ``loc``, replayed from disk on first use. ``OSError`` if unreadable."""
        state = self._lists.get(loc.wal)
        if state is None:
            loaded = await asyncio.to_thread(load_list, loc, fsync=self.fsync)
            state = self._lists.get(loc.wal)  # another caller may have loaded it meanwhile
            if state is None:
                result = loaded.result
                state = ListState(
                    location=loc,
                    dag=result.dag,
                    files=ListFiles(loc, result.valid_length),
                    corruption=result.corruption,
                    requests=loaded.requests,
                )
                self._lists[loc.wal] = state
        return state

    async def session_lists(self, session_id: str, directory: Path) -> list[ListState]:
        """Every list of a session directory, by file name (none if the directory is missing)."""
        stems = await asyncio.to_thread(_stems, directory)
        return [await self.get(ListLocation.at(session_id, directory, stem)) for stem in stems]

    async def write(self, writes: list[ListWrite]) -> WriteFailures:
        """Append each list's group and make it durable (one fsync per list); the failed ones,
        rolled back. The caller installs the staged state of the others."""
        evicted: list[ListFiles] = []
        for state, _, _ in writes:
            assert state.files is not None
            evicted += self.touched(state.files)
        busy = {id(state.files) for state, _, _ in writes}
        idle = [f for f in evicted if id(f) not in busy]
        return await asyncio.to_thread(_write_lists, writes, idle, self.fsync)

    def forget(self, state: ListState) -> None:
        """Drop a list (after a failed write) so that its next use replays it from disk."""
        if state.files is not None:
            state.files.close()
        self._open.pop(state.location.wal, None)
        if self._lists.get(state.location.wal) is state:
            del self._lists[state.location.wal]

    def touched(self, files: ListFiles) -> list[ListFiles]:
        """Note that ``files`` is about to be appended; return descriptors to close (LRU).

        Called on the event loop; the returned files are closed by the writer thread, which is
        the only user of descriptors.
        """
        self._open[files.loc.wal] = files
        self._open.move_to_end(files.loc.wal)
        evicted: list[ListFiles] = []
        while len(self._open) > _MAX_OPEN_FILES:
            evicted.append(self._open.popitem(last=False)[1])
        return evicted

    def close(self) -> None:
        """Close every descriptor (at shutdown)."""
        for files in self._open.values():
            files.close()
        self._open.clear()


def _write_lists(writes: list[ListWrite], idle: list[ListFiles], fsync: bool) -> WriteFailures:
    """Write every group, then fsync each written WAL once; runs in the worker thread."""
    failures: WriteFailures = {}
    written: list[ListWrite] = []
    for w in writes:
        state, wal, requests = w
        assert state.files is not None
        try:
            state.files.write(wal, requests, fsync=fsync)
            written.append(w)
        except OSError as exc:
            failures[state.location.wal] = exc
            state.files.rollback()
    for state, wal, _ in written:
        assert state.files is not None
        try:
            if fsync:
                state.files.sync()
            state.files.size += len(wal)
        except OSError as exc:
            failures[state.location.wal] = exc
            state.files.rollback()
    for files in idle:
        files.close()
    return failures


def _stems(directory: Path) -> list[str]:
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    stems = (n[: -len(WAL_SUFFIX)] for n in names if n.endswith(WAL_SUFFIX))
    return sorted(s for s in stems if _STEM.fullmatch(s))
