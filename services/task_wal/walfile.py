"""The files of one task list: load (replay, repair a torn tail) and append (write, fsync, undo).

Everything here blocks; the service calls it from a worker thread, one call at a time (the
single writer). Two files per list:

* ``<stem>.wal.jsonl`` — the WAL, the only truth (format and replay in :mod:`agent_core.tasks`);
* ``<stem>.requests.jsonl`` — ``{"r": request_id, "s": seq}`` per applied request, written just
  before its WAL records. It only lets a retry be recognised after a restart: an entry counts only
  if the WAL holds its ``seq``, so an entry whose records never reached the WAL is ignored. It is
  not fsynced on its own: it reaches the page cache before the WAL's fsync returns, which a killed
  process cannot undo (a power cut might lose it; then a retried note could be appended twice).
"""

from __future__ import annotations

import json
import logging
import os
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from agent_core.tasks import ReplayResult, ReplayStatus, replay
from services.task_wal.location import ListLocation

__all__ = [
    "MAX_REMEMBERED_REQUESTS",
    "ListFiles",
    "Loaded",
    "load_list",
    "parse_requests",
    "request_line",
]

log = logging.getLogger("soong.task_wal")

MAX_REMEMBERED_REQUESTS = 4096  # per list: retries come within seconds, not thousands of changes


@dataclass(frozen=True, slots=True)
class Loaded:
    """A replayed list: the replay result and the request ids already applied (oldest first)."""

    result: ReplayResult
    requests: OrderedDict[str, int]


def load_list(loc: ListLocation, *, fsync: bool) -> Loaded:
    """Replay the list's WAL; drop a torn tail (truncating the file so it is appendable again).

    A missing file is an empty list. ``OSError`` propagates (the caller reports it, retryable).
    """
    try:
        data = loc.wal.read_bytes()
    except FileNotFoundError:
        data = b""
    result = replay(data)
    if result.status is ReplayStatus.TORN_TAIL:
        log.warning(
            "task WAL %s: dropped a torn final record (%d bytes) after %d records; truncating",
            loc.wal,
            result.torn_bytes,
            result.records,
        )
        _truncate(loc.wal, result.valid_length, fsync=fsync)
    elif result.status is ReplayStatus.CORRUPT:
        log.error("task WAL %s is corrupt: %s", loc.wal, result.corruption)
    seq = result.dag.seq if result.dag is not None else 0
    return Loaded(result, _read_requests(loc.requests, max_seq=seq))


def request_line(request_id: str, seq: int) -> bytes:
    """One line of the request log."""
    return json.dumps({"r": request_id, "s": seq}, separators=(",", ":")).encode() + b"\n"


class ListFiles:
    """Append descriptors of one list's files, opened on the first append.

    ``size`` is the WAL's acknowledged length (the caller advances it once a group is durable):
    :meth:`rollback` cuts back to it after a failed group, so no partial record stays behind.
    """

    def __init__(self, loc: ListLocation, size: int) -> None:
        self.loc = loc
        self.size = size
        self._wal: int | None = None
        self._requests: int | None = None

    def write(self, wal: bytes, requests: bytes, *, fsync: bool) -> None:
        """Write request-log lines, then WAL records (not yet synced, not yet counted in ``size``).

        ``fsync`` only says whether a newly created file's directory entry must be synced.
        """
        if self._wal is None:
            self._open(fsync=fsync)
        assert self._wal is not None and self._requests is not None
        if requests:
            _write_all(self._requests, requests)
        _write_all(self._wal, wal)

    def sync(self) -> None:
        """fsync the WAL (after :meth:`write`)."""
        if self._wal is not None:
            os.fsync(self._wal)

    def rollback(self) -> None:
        """Cut the WAL back to ``size`` (the last acknowledged length); best effort."""
        if self._wal is not None:
            try:
                os.ftruncate(self._wal, self.size)
            except OSError:
                log.exception("could not roll back %s to %d bytes", self.loc.wal, self.size)

    def close(self) -> None:
        """Close the descriptors (reopened by the next append)."""
        for fd in (self._wal, self._requests):
            if fd is not None:
                os.close(fd)
        self._wal = self._requests = None

    def _open(self, *, fsync: bool) -> None:
        created = _make_dirs(self.loc.directory)
        new_file = not self.loc.wal.exists()
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        self._wal = os.open(self.loc.wal, flags, 0o600)
        self._requests = os.open(self.loc.requests, flags, 0o600)
        if fsync and (created or new_file):
            # A new file (or directory) survives a crash only once its directory entry is synced.
            for directory in {self.loc.directory, *(p.parent for p in created)}:
                _fsync_dir(directory)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _make_dirs(directory: Path) -> list[Path]:
    """Create ``directory`` and missing parents; return the ones created."""
    missing: list[Path] = []
    current = directory
    while not current.exists():
        missing.append(current)
        current = current.parent
    for path in reversed(missing):
        path.mkdir(mode=0o700, exist_ok=True)
    return missing


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _truncate(path: Path, length: int, *, fsync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.ftruncate(fd, length)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _read_requests(path: Path, *, max_seq: int) -> OrderedDict[str, int]:
    """Applied request ids whose records the WAL holds; repairs a torn last line."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return OrderedDict()
    end = data.rfind(b"\n") + 1
    if end < len(data):  # a crash cut the last line: cut it off so the next line starts clean
        _truncate(path, end, fsync=False)
    return parse_requests(data[:end], max_seq=max_seq)


def parse_requests(data: bytes, *, max_seq: int) -> OrderedDict[str, int]:
    """The request ids of request-log lines ``data`` whose records the WAL holds (``<= max_seq``),
    oldest first and bounded."""
    seen: OrderedDict[str, int] = OrderedDict()
    for line in data.splitlines():
        try:
            obj = json.loads(line)
            request_id, seq = obj["r"], obj["s"]
        except (ValueError, KeyError, TypeError):
            continue  # a hint only: an unreadable line just means no dedupe for that request
        if not (isinstance(request_id, str) and isinstance(seq, int)):
            continue
        # Seqs only grow, except after a lost tail was rewritten: a later line with seq s
        # means the earlier lines at seq >= s named records that never survived.
        while seen and next(reversed(seen.values())) >= seq:
            seen.popitem(last=True)
        if 0 < seq <= max_seq:
            seen.pop(request_id, None)
            seen[request_id] = seq
            if len(seen) > MAX_REMEMBERED_REQUESTS:
                seen.popitem(last=False)
    return seen
