"""File access confined to one session directory, symlink-safe (directory fds + ``O_NOFOLLOW``).

Every operation starts from an fd of the session root and walks a :class:`SessionPath` one
component at a time with ``openat`` (``os.open(name, flags, dir_fd=…)``) and ``O_NOFOLLOW``. A
symlink met on the way is read with ``readlinkat`` and followed by hand: relative targets continue
from the directory that holds the link, ``..`` pops the fd stack (never above the root), absolute
targets must lie below the session root. So no path, however linked, reaches outside the session,
and a link swapped in after a check is caught because the final ``open`` refuses to follow it
(``ELOOP`` → :attr:`PathErrorCode.SYMLINK_RACE`).

Write rules are checked on the *real* location reached by the walk (and before any directory is
created), not on the name the agent used.

Blocking calls: run these from a worker thread (``asyncio.to_thread``) in async code.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Final

from agent_core.tools.paths import (
    InvalidPathError,
    PathErrorCode,
    PathEscapeError,
    SessionPath,
)

__all__ = ["MAX_SYMLINK_HOPS", "DirEntry", "SessionFS", "WriteCheck"]

MAX_SYMLINK_HOPS: Final = 40  # the kernel's own limit (MAXSYMLINKS)

_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK so that opening a FIFO planted in the workspace cannot hang the worker.
_READ_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_TMP_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

_AS_ROOT: Final = os.geteuid() == 0


def _adopt(dir_fd: int, name: str) -> None:
    """A worker running as root gives what it creates to the owner of the folder it is in: the
    areas code may write belong to the sandbox's user (see ``tools/sandbox/runners.py``), and
    code must be able to change what the file tools wrote there."""
    if _AS_ROOT:
        folder = os.fstat(dir_fd)
        if folder.st_uid != 0:
            os.chown(name, folder.st_uid, folder.st_gid, dir_fd=dir_fd, follow_symlinks=False)


WriteCheck = Callable[[SessionPath], None]
"""Raises if the given real location may not be written (see ``paths.ensure_writable``)."""


@dataclass(frozen=True, slots=True)
class DirEntry:
    """One directory entry, without following symlinks."""

    path: SessionPath
    kind: str  # "file" | "dir" | "symlink" | "other"
    size: int
    mtime_ns: int


@dataclass(slots=True)
class _Located:
    """Where a walk ended: an open parent dir fd, its real path, and the final name (if any)."""

    dir_fd: int
    dir_path: SessionPath
    name: str | None

    @property
    def path(self) -> SessionPath:
        return self.dir_path.child(self.name) if self.name is not None else self.dir_path


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


def _not_found(path: SessionPath) -> InvalidPathError:
    return InvalidPathError(PathErrorCode.NOT_FOUND, f"{path} does not exist")


class SessionFS:
    """Confined file operations below one session root (an absolute, existing host directory)."""

    def __init__(self, root: str) -> None:
        self._root = root

    @cached_property
    def _real_root(self) -> str:
        return os.path.realpath(self._root)

    # ------------------------------------------------------------------------------ the walk

    def _target_below_root(self, target: str) -> list[str]:
        real = os.path.normpath(target)
        for root in (self._real_root, os.path.normpath(self._root)):
            if real == root:
                return []
            if real.startswith(root + "/"):
                return real[len(root) + 1 :].split("/")
        raise PathEscapeError(
            PathErrorCode.SYMLINK_ESCAPE, "a symlink on this path points outside the session"
        )

    def _walk(
        self, path: SessionPath, *, follow_last: bool, create_parents: WriteCheck | None = None
    ) -> _Located:
        """Walk ``path``; the caller owns and must close the returned ``dir_fd``.

        The final component need not exist. With ``create_parents``, missing directories on the way
        are created after the check approved their real location.
        """
        stack = [os.open(self._root, _DIR_FLAGS & ~os.O_NOFOLLOW)]
        names: list[str] = []
        pending = deque(path.parts)
        final: str | None = None
        hops = 0
        try:
            while pending:
                name = pending.popleft()
                if name in ("", "."):
                    continue
                if name == "..":
                    if not names:
                        raise PathEscapeError(
                            PathErrorCode.SYMLINK_ESCAPE,
                            "a symlink on this path points outside the session",
                        )
                    os.close(stack.pop())
                    names.pop()
                    continue
                last = not pending
                if not last:
                    # The common case first: a plain directory opens with O_NOFOLLOW in one
                    # call. A symlink (ELOOP), a file (ENOTDIR) or a missing name fails here and
                    # is looked at below, exactly as before.
                    try:
                        stack.append(os.open(name, _DIR_FLAGS, dir_fd=stack[-1]))
                    except OSError as exc:
                        if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
                            raise
                    else:
                        names.append(name)
                        continue
                try:
                    st = os.stat(name, dir_fd=stack[-1], follow_symlinks=False)
                except FileNotFoundError:
                    if last:
                        final = name
                        break
                    here = SessionPath((*names, name))
                    if create_parents is None:
                        raise _not_found(here) from None
                    create_parents(here)
                    # FileExistsError: created concurrently; the retry below inspects what it is.
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(name, 0o755, dir_fd=stack[-1])
                        _adopt(stack[-1], name)
                    pending.appendleft(name)
                    continue
                if stat.S_ISLNK(st.st_mode):
                    if last and not follow_last:
                        final = name
                        break
                    hops += 1
                    if hops > MAX_SYMLINK_HOPS:
                        raise PathEscapeError(
                            PathErrorCode.SYMLINK_LOOP, "too many levels of symbolic links"
                        )
                    target = os.readlink(name, dir_fd=stack[-1])
                    if target.startswith("/"):
                        below = self._target_below_root(target)
                        while len(stack) > 1:
                            os.close(stack.pop())
                        names.clear()
                        pending.extendleft(reversed(below))
                    else:
                        pending.extendleft(reversed(target.split("/")))
                    continue
                if last:
                    final = name
                    break
                if not stat.S_ISDIR(st.st_mode):
                    raise InvalidPathError(
                        PathErrorCode.NOT_A_DIRECTORY,
                        f"{SessionPath((*names, name))} is not a directory",
                    )
                stack.append(self._open_dir_at(stack[-1], name))
                names.append(name)
        except BaseException:
            for fd in stack:
                os.close(fd)
            raise
        for fd in stack[:-1]:
            os.close(fd)
        return _Located(stack[-1], SessionPath(tuple(names)), final)

    @staticmethod
    def _open_dir_at(dir_fd: int, name: str) -> int:
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise PathEscapeError(
                    PathErrorCode.SYMLINK_RACE, f"{name} changed while it was being opened"
                ) from exc
            if exc.errno == errno.ENOENT:
                raise InvalidPathError(PathErrorCode.NOT_FOUND, f"{name} disappeared") from exc
            raise

    # ------------------------------------------------------------------------------ reading

    def real_path(self, path: SessionPath) -> SessionPath:
        """Where ``path`` really points inside the session (symlinks followed, confined)."""
        loc = self._walk(path, follow_last=True)
        os.close(loc.dir_fd)
        return loc.path

    def open_read(self, path: SessionPath) -> tuple[int, SessionPath]:
        """Open a regular file for reading; returns the fd (caller closes it) and its real path."""
        loc = self._walk(path, follow_last=True)
        try:
            if loc.name is None:
                raise InvalidPathError(PathErrorCode.IS_A_DIRECTORY, f"{loc.path} is a directory")
            try:
                fd = os.open(loc.name, _READ_FLAGS, dir_fd=loc.dir_fd)
            except FileNotFoundError:
                raise _not_found(loc.path) from None
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise PathEscapeError(
                        PathErrorCode.SYMLINK_RACE, f"{loc.path} changed while it was being opened"
                    ) from exc
                raise
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                os.close(fd)
                code = (
                    PathErrorCode.IS_A_DIRECTORY
                    if stat.S_ISDIR(mode)
                    else PathErrorCode.NOT_REGULAR
                )
                raise InvalidPathError(code, f"{loc.path} is not a regular file")
            return fd, loc.path
        finally:
            os.close(loc.dir_fd)

    def read_bytes(
        self, path: SessionPath, *, limit: int | None = None
    ) -> tuple[bytes, SessionPath]:
        """Read a regular file (at most ``limit`` bytes when given)."""
        fd, real = self.open_read(path)
        with os.fdopen(fd, "rb") as fh:
            return (fh.read() if limit is None else fh.read(limit)), real

    def open_dir(self, path: SessionPath) -> tuple[int, SessionPath]:
        """Open a directory; returns the fd (caller closes it) and its real path."""
        loc = self._walk(path, follow_last=True)
        if loc.name is None:
            return loc.dir_fd, loc.path
        try:
            try:
                st = os.stat(loc.name, dir_fd=loc.dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                raise _not_found(loc.path) from None
            if not stat.S_ISDIR(st.st_mode):
                raise InvalidPathError(
                    PathErrorCode.NOT_A_DIRECTORY, f"{loc.path} is not a directory"
                )
            return self._open_dir_at(loc.dir_fd, loc.name), loc.path
        finally:
            os.close(loc.dir_fd)

    def list_dir(self, path: SessionPath) -> tuple[SessionPath, list[DirEntry]]:
        """A directory's real path and its entries sorted by name; symlinks listed, not followed."""
        fd, real = self.open_dir(path)
        try:
            return real, sorted(self._entries(fd, real), key=lambda e: e.path.name)
        finally:
            os.close(fd)

    @staticmethod
    def _entries(fd: int, real: SessionPath) -> Iterator[DirEntry]:
        for name in os.listdir(fd):
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue  # removed while listing
            yield DirEntry(real.child(name), _kind(st.st_mode), st.st_size, st.st_mtime_ns)

    def walk(self, path: SessionPath, *, max_entries: int) -> Iterator[DirEntry]:
        """Every entry below a directory, depth first, symlinks not descended; stops at max_entries."""
        fd, real = self.open_dir(path)
        todo: list[tuple[int, SessionPath]] = [(fd, real)]
        seen = 0
        try:
            while todo:
                dir_fd, dir_path = todo.pop()
                try:
                    entries = sorted(self._entries(dir_fd, dir_path), key=lambda e: e.path.name)
                    for entry in entries:
                        seen += 1
                        if seen > max_entries:
                            return
                        yield entry
                        if entry.kind == "dir":
                            try:
                                todo.append(
                                    (self._open_dir_at(dir_fd, entry.path.name), entry.path)
                                )
                            except (InvalidPathError, PathEscapeError):
                                continue
                finally:
                    os.close(dir_fd)
        finally:
            for dir_fd, _ in todo:
                os.close(dir_fd)

    # ------------------------------------------------------------------------------ writing

    def open_parent(self, path: SessionPath, *, check: WriteCheck) -> tuple[int, str]:
        """The directory ``path`` is to be written in, opened (the caller closes the fd), with
        the name to write there; missing directories on the way are created after ``check``
        approved them (the file store's streamed uploads). Refuses a directory at ``path``."""
        check(path)
        loc = self._walk(path, follow_last=True, create_parents=check)
        if loc.name is None:
            os.close(loc.dir_fd)
            raise InvalidPathError(PathErrorCode.IS_A_DIRECTORY, f"{loc.path} is a directory")
        return loc.dir_fd, loc.name

    def write_bytes(self, path: SessionPath, data: bytes, *, check: WriteCheck) -> SessionPath:
        """Replace (or create) a file atomically; parent directories are created as needed.

        ``check`` is applied to every directory before it is created and to the real location of
        the file before anything is written. A symlink at the destination is followed only inside
        the session (its target is what is checked and written); one swapped in after the walk is
        replaced by the final rename, never written through. Returns the real path written.
        """
        check(path)
        loc = self._walk(path, follow_last=True, create_parents=check)
        try:
            if loc.name is None:
                raise InvalidPathError(PathErrorCode.IS_A_DIRECTORY, f"{loc.path} is a directory")
            check(loc.path)
            try:
                st = os.stat(loc.name, dir_fd=loc.dir_fd, follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    raise InvalidPathError(
                        PathErrorCode.IS_A_DIRECTORY, f"{loc.path} is a directory"
                    )
            except FileNotFoundError:
                pass
            tmp = f".soong-tmp-{secrets.token_hex(8)}"
            fd = os.open(tmp, _TMP_FLAGS, 0o644, dir_fd=loc.dir_fd)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                _adopt(loc.dir_fd, tmp)
                os.replace(tmp, loc.name, src_dir_fd=loc.dir_fd, dst_dir_fd=loc.dir_fd)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp, dir_fd=loc.dir_fd)
                raise
            return loc.path
        finally:
            os.close(loc.dir_fd)
