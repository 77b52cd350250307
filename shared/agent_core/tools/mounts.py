"""A session's file access with its project folder mounted at ``project/``.

:class:`MountedFS` is a :class:`~agent_core.tools.fsaccess.SessionFS` of the session directory in
which paths starting with a mounted name (``project``) go to another confined file system rooted
at the project folder: the same symlink-safe walk, confined to *that* root (a link in the project
cannot reach the session's areas, nor a link in the session the project). Paths going in and out
keep the mount's name first, so tools and models see one namespace: ``project/data.csv`` beside
``output/report.md``. Write checks see the mounted name too (``paths.ensure_writable`` decides).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from agent_core.tools.fsaccess import DirEntry, SessionFS, WriteCheck
from agent_core.tools.paths import SessionPath

__all__ = ["MountedFS"]


class MountedFS(SessionFS):
    """Confined file operations below a session root and below each mounted folder."""

    def __init__(self, root: str, mounts: Mapping[str, str]) -> None:
        super().__init__(root)
        self._mounts = {name: SessionFS(folder) for name, folder in mounts.items()}

    def _split(self, path: SessionPath) -> tuple[str, SessionFS, SessionPath] | None:
        if path.parts and path.parts[0] in self._mounts:
            name = path.parts[0]
            return name, self._mounts[name], SessionPath(path.parts[1:])
        return None

    @staticmethod
    def _out(name: str, path: SessionPath) -> SessionPath:
        return SessionPath((name, *path.parts))

    def real_path(self, path: SessionPath) -> SessionPath:
        """See :meth:`SessionFS.real_path`."""
        split = self._split(path)
        if split is None:
            return super().real_path(path)
        name, fs, inner = split
        return self._out(name, fs.real_path(inner))

    def open_read(self, path: SessionPath) -> tuple[int, SessionPath]:
        """See :meth:`SessionFS.open_read`."""
        split = self._split(path)
        if split is None:
            return super().open_read(path)
        name, fs, inner = split
        fd, real = fs.open_read(inner)
        return fd, self._out(name, real)

    def open_dir(self, path: SessionPath) -> tuple[int, SessionPath]:
        """See :meth:`SessionFS.open_dir`."""
        split = self._split(path)
        if split is None:
            return super().open_dir(path)
        name, fs, inner = split
        fd, real = fs.open_dir(inner)
        return fd, self._out(name, real)

    def walk(self, path: SessionPath, *, max_entries: int) -> Iterator[DirEntry]:
        """See :meth:`SessionFS.walk`."""
        split = self._split(path)
        if split is None:
            yield from super().walk(path, max_entries=max_entries)
            return
        name, fs, inner = split
        for entry in fs.walk(inner, max_entries=max_entries):
            yield DirEntry(self._out(name, entry.path), entry.kind, entry.size, entry.mtime_ns)

    def write_bytes(self, path: SessionPath, data: bytes, *, check: WriteCheck) -> SessionPath:
        """See :meth:`SessionFS.write_bytes`; ``check`` sees paths with the mount's name."""
        split = self._split(path)
        if split is None:
            return super().write_bytes(path, data, check=check)
        name, fs, inner = split
        check(path)  # before anything of the mount is walked (a read-only project stops here)

        def mounted_check(p: SessionPath) -> None:
            check(self._out(name, p))

        return self._out(name, fs.write_bytes(inner, data, check=mounted_check))
