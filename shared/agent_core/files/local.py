"""The ``local`` engine: each key is a file below the home, today's layout unchanged.

``accounts/<a>/sessions/<s>/input/x.csv`` is ``<home>/accounts/<a>/sessions/<s>/input/x.csv``,
which is where the workspace tools read and write, so on one host the store and the workspace
are the same files (nothing to hydrate or sync). Access goes through
:class:`~agent_core.tools.fsaccess.SessionFS` rooted at the key's session folder (or the home
for keys outside any session): a symlink inside a session is followed only within it, so a link
an agent planted cannot serve another session's file or a host file.

The ETag is the file's modification time (in nanoseconds) and size: cheap, the same in a listing
and a read, and changed by every write through this engine. The kernel stamps files with a coarse
clock (a few milliseconds), so two writes of one size in one tick would share a stamp: a write
therefore sets its file's time past the time of the file it replaces when the clock did not
move (or went back). A conditional write (``if_match``, ``if_absent``) checks and replaces under
an exclusive ``flock`` on the folder, so the processes of this host that race on one file see
each other's versions, and an ETag a reader holds never comes back for another content.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import fcntl
import os
import secrets
import shutil
import stat
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from agent_core.files.port import (
    CHUNK,
    Download,
    FileStoreError,
    StoredObject,
    VersionConflict,
    check_key,
    not_found,
)
from agent_core.tools.fsaccess import SessionFS
from agent_core.tools.paths import InvalidPathError, PathErrorCode, SessionPath

__all__ = ["LocalFileStore"]

_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_TMP_PREFIX = ".soong-tmp-"
# Entries (folders too) a listing looks at at most: the first ``limit`` keys of a sorted listing
# need the whole folder read, and this bounds what one request can make the host walk.
_WALK_CAP = 100_000


def _etag(st: os.stat_result) -> str:
    return _tag(st.st_mtime_ns, st.st_size)


def _tag(mtime_ns: int, size: int) -> str:
    return f'"{mtime_ns:x}-{size:x}"'


def _any(_: SessionPath) -> None:
    """The store writes anywhere below its scope (the areas' rules are the tools')."""


def _cut_torn_tail(fd: int, size: int) -> None:
    """Truncate the file open at ``fd`` (``size`` bytes) after its last newline, if its last
    byte is not one: what a writer cut short left of its line."""
    if not size or os.pread(fd, 1, size - 1) == b"\n":
        return
    end = size
    while end > 0:
        start = max(0, end - CHUNK)
        at = os.pread(fd, end - start, start).rfind(b"\n")
        if at >= 0:
            os.ftruncate(fd, start + at + 1)
            return
        end = start
    os.ftruncate(fd, 0)


class LocalFileStore:
    """Keys as files below ``home`` (module docstring)."""

    engine: Literal["local", "s3"] = "local"

    def __init__(self, home: str | os.PathLike[str]) -> None:
        self.root = Path(os.path.abspath(home))

    # -------------------------------------------------------------------------------- layout

    def _scope(self, key: str) -> tuple[Path, tuple[str, ...], tuple[str, ...]]:
        """The folder a key is confined to, the scope's own key parts and the rest below it."""
        parts = tuple(check_key(key).split("/"))
        if len(parts) >= 4 and parts[0] == "accounts" and parts[2] == "sessions":
            return self.root.joinpath(*parts[:4]), parts[:4], parts[4:]
        return self.root, (), parts

    def _fs(self, key: str, *, create: bool = False) -> tuple[SessionFS, SessionPath]:
        scope, _, rest = self._scope(key)
        if create:
            scope.mkdir(parents=True, exist_ok=True)
        elif not scope.is_dir():
            raise not_found(key)
        return SessionFS(str(scope)), SessionPath(rest)

    # -------------------------------------------------------------------------------- port

    async def check(self) -> None:
        """The home is where the other services already write: nothing more to prove."""

    async def put(
        self,
        key: str,
        data: bytes,
        *,
        if_match: str | None = None,
        if_absent: bool = False,
        sync: bool = True,
    ) -> str | None:
        return await asyncio.to_thread(self._put, key, data, if_match, if_absent, sync)

    def put_blocking(self, key: str, data: bytes) -> None:
        self._put(key, data, None, False, True)

    async def append_lines(self, key: str, data: bytes) -> None:
        await asyncio.to_thread(self._append_lines, key, data)

    def _append_lines(self, key: str, data: bytes) -> None:
        """One ``O_APPEND`` write and an fsync, under the folder's lock (so that a torn tail is
        cut by one writer, and no append lands between the cut and the write)."""
        fs, path = self._fs(key, create=True)
        dir_fd, name = fs.open_parent(path, check=_any)
        try:
            fcntl.flock(dir_fd, fcntl.LOCK_EX)
            flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            try:
                fd = os.open(name, flags, 0o644, dir_fd=dir_fd)
            except IsADirectoryError:
                raise FileStoreError("file_is_a_directory", f"{name} is a directory") from None
            try:
                before = os.fstat(fd)
                _cut_torn_tail(fd, before.st_size)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
                after = os.fstat(fd)
                if after.st_size == before.st_size and after.st_mtime_ns <= before.st_mtime_ns:
                    # A cut tail as long as the lines added, in one clock tick: a newer stamp,
                    # so the ETag still changes (module docstring).
                    os.utime(fd, ns=(after.st_atime_ns, before.st_mtime_ns + 1))
            finally:
                os.close(fd)
        finally:
            os.close(dir_fd)

    def _put(self, key: str, data: bytes, if_match: str | None, if_absent: bool, sync: bool) -> str:
        fs, path = self._fs(key, create=True)
        dir_fd, name = fs.open_parent(path, check=_any)
        try:
            # The conditions hold under an exclusive lock on the folder: two processes of this
            # host never both pass the check for the same file (memory edits, etc.).
            if if_match is not None or if_absent:
                fcntl.flock(dir_fd, fcntl.LOCK_EX)
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and stat.S_ISDIR(st.st_mode):
                raise FileStoreError("file_is_a_directory", f"{name} is a directory")
            if (if_absent and st is not None) or (
                if_match is not None and (st is None or _etag(st) != if_match)
            ):
                raise VersionConflict(key)
            tmp = _TMP_PREFIX + secrets.token_hex(8)
            fd = os.open(tmp, _TMP_FLAGS, 0o644, dir_fd=dir_fd)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                    if sync:
                        fh.flush()
                        os.fsync(fh.fileno())
                os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp, dir_fd=dir_fd)
                raise
            new = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if st is not None and new.st_mtime_ns <= st.st_mtime_ns:
                # Same clock tick as the replaced version (module docstring): a newer stamp.
                when = (new.st_atime_ns, st.st_mtime_ns + 1)
                os.utime(name, ns=when, dir_fd=dir_fd, follow_symlinks=False)
                new = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            return _etag(new)
        finally:
            os.close(dir_fd)

    async def upload(self, key: str, chunks: AsyncIterator[bytes]) -> int:
        fs, path = self._fs(key, create=True)
        dir_fd, name = await asyncio.to_thread(fs.open_parent, path, check=_any)
        tmp = _TMP_PREFIX + secrets.token_hex(8)
        size = 0
        try:
            fd = os.open(tmp, _TMP_FLAGS, 0o644, dir_fd=dir_fd)
            try:
                with os.fdopen(fd, "wb") as fh:
                    async for chunk in chunks:
                        size += len(chunk)
                        fh.write(chunk)
                try:
                    os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                except IsADirectoryError as exc:
                    raise FileStoreError("file_is_a_directory", f"{name} is a directory") from exc
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp, dir_fd=dir_fd)
                raise
        finally:
            os.close(dir_fd)
        return size

    def _open_fd(self, key: str) -> int:
        fs, path = self._fs(key)
        try:
            fd, _ = fs.open_read(path)
        except InvalidPathError as exc:
            if exc.code == PathErrorCode.NOT_FOUND:
                raise not_found(key) from None
            raise
        return fd

    async def get(self, key: str) -> tuple[bytes, str | None]:
        return await asyncio.to_thread(self._read, key)

    async def get_many(self, keys: Sequence[str]) -> list[tuple[bytes, str | None] | None]:
        # On the calling thread: a handful of small files from the page cache cost less than
        # the trip to a worker thread and back (measured in docs/performance.md).
        return [self._read_or_none(key) for key in keys]

    def _read(self, key: str) -> tuple[bytes, str | None]:
        with os.fdopen(self._open_fd(key), "rb") as fh:
            return fh.read(), _etag(os.fstat(fh.fileno()))

    def _read_or_none(self, key: str) -> tuple[bytes, str | None] | None:
        try:
            return self._read(key)
        except FileStoreError as exc:
            if exc.code == "file_not_found":
                return None
            raise

    async def open(self, key: str) -> Download:
        fd = await asyncio.to_thread(self._open_fd, key)
        st = os.fstat(fd)
        return Download(st.st_size, _etag(st), _read_chunks(fd))

    async def head(self, key: str) -> StoredObject | None:
        try:
            fd = await asyncio.to_thread(self._open_fd, key)
        except FileStoreError as exc:
            if exc.code == "file_not_found":
                return None
            raise
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
        return _object(key, st)

    async def list(self, prefix: str, *, limit: int) -> list[StoredObject]:
        return await asyncio.to_thread(self._list, prefix, limit)

    def _list(self, prefix: str, limit: int) -> builtins.list[StoredObject]:
        try:
            fs, path = self._fs(prefix)
            entries = builtins.list(fs.walk(path, max_entries=_WALK_CAP))
        except (FileStoreError, InvalidPathError):
            return []  # nothing below a folder that does not exist (yet)
        _, scope, _ = self._scope(prefix)
        found = [
            StoredObject(
                "/".join((*scope, *e.path.parts)),
                e.size,
                datetime.fromtimestamp(e.mtime_ns / 1e9, UTC),
                _tag(e.mtime_ns, e.size),
            )
            for e in entries
            if e.kind == "file" and not e.path.name.startswith(_TMP_PREFIX)
        ]
        return sorted(found, key=lambda o: o.key)[:limit]

    async def delete(self, keys: Iterable[str]) -> None:
        def remove() -> None:
            for key in keys:
                with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                    self.root.joinpath(*check_key(key).split("/")).unlink()

        await asyncio.to_thread(remove)

    async def delete_prefix(self, prefix: str) -> None:
        await asyncio.to_thread(self.delete_prefix_blocking, prefix)

    def delete_prefix_blocking(self, prefix: str) -> None:
        # rmtree never follows a symlink: a link in the folder is removed, not its target.
        shutil.rmtree(self.root.joinpath(*check_key(prefix).split("/")), ignore_errors=True)

    async def close(self) -> None:
        """Nothing held open between calls."""


def _object(key: str, st: os.stat_result) -> StoredObject:
    return StoredObject(
        key, st.st_size, datetime.fromtimestamp(st.st_mtime_ns / 1e9, UTC), _etag(st)
    )


def _chunks_of(fd: int) -> Iterator[bytes]:
    with os.fdopen(fd, "rb") as fh:
        while chunk := fh.read(CHUNK):
            yield chunk


async def _read_chunks(fd: int) -> AsyncIterator[bytes]:
    # Local reads of 64 KiB do not block the loop long enough to be worth a thread hop each.
    for chunk in _chunks_of(fd):
        yield chunk
