"""A session's workspace on a worker's local disk, mirrored from and to the file store.

The sandbox and the file tools need a real folder; with the ``s3`` engine the folder is a copy.
A worker :meth:`~WorkspaceMirror.hydrate`\\ s it when it claims a run, :meth:`~WorkspaceMirror.sync`\\ s
what changed back after each tool call and at the run's end, and :meth:`~WorkspaceMirror.drop`\\ s
it when the session's lane is released. What a sync acknowledged is in the store: a worker that
dies mid-run leaves the store as of its last completed sync, which the next attempt hydrates.

Changes are found by content: a file whose size and change time are as last seen is not read; one
whose bytes hash (SHA-256) as last seen is not sent; a file gone from the folder is deleted from
the store. So a turn that touched nothing costs one walk of the folder's metadata. Symlinks are
neither followed nor mirrored (a link is a host-path fact, meaningless on another host).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agent_core.files.port import FileStore

__all__ = ["WorkspaceMirror"]

AREAS: Final = ("input", "scratchpad", "output")
# Objects fetched at once while hydrating: hides the store's latency behind the others.
_PARALLEL: Final = 16
_LISTING_CAP: Final = 1_000_000


@dataclass(slots=True)
class _Seen:
    """A file as the store holds it: the local file's size and change time when it was last
    synced or fetched, its content's digest and the object's ETag."""

    size: int
    mtime_ns: int
    digest: str
    etag: str | None


class WorkspaceMirror:
    """One session's workspace folder ``root`` kept in step with the keys below ``prefix``."""

    def __init__(self, store: FileStore, prefix: str, root: Path) -> None:
        self.store = store
        self.prefix = prefix
        self.root = root
        self._seen: dict[str, _Seen] = {}
        self._lock = asyncio.Lock()

    async def hydrate(self) -> int:
        """Bring the folder to the store's state (only objects whose ETag changed since this
        mirror last saw them are fetched; local files the store no longer has are removed); the
        number of objects fetched. Raises ``FileStoreError`` when the store cannot be read."""
        async with self._lock:
            objects = await self.store.list(self.prefix, limit=_LISTING_CAP)
            wanted = {o.key.removeprefix(self.prefix + "/"): o for o in objects}
            for area in AREAS:
                (self.root / area).mkdir(parents=True, exist_ok=True)
            for rel in set(self._seen) - set(wanted):
                with contextlib.suppress(FileNotFoundError):
                    (self.root / rel).unlink()
                del self._seen[rel]
            stale = [
                rel
                for rel, o in wanted.items()
                if (seen := self._seen.get(rel)) is None or seen.etag != o.etag or o.etag is None
            ]
            gate = asyncio.Semaphore(_PARALLEL)

            async def fetch(rel: str) -> None:
                async with gate:
                    data, etag = await self.store.get(f"{self.prefix}/{rel}")
                st = await asyncio.to_thread(_write, self.root / rel, data)
                self._seen[rel] = _Seen(st.st_size, st.st_mtime_ns, _digest(data), etag)

            await asyncio.gather(*(fetch(rel) for rel in stale))
            return len(stale)

    async def sync(self) -> int:
        """Send what changed in the folder since the last sync or hydrate, delete from the store
        what was removed; the number of objects written or deleted. Raises ``FileStoreError``
        when the store cannot be written (what was not sent is sent by the next sync)."""
        async with self._lock:
            found = await asyncio.to_thread(_scan, self.root)
            changed: list[tuple[str, bytes, os.stat_result]] = []
            for rel, st in found.items():
                seen = self._seen.get(rel)
                if seen is not None and (seen.size, seen.mtime_ns) == (st.st_size, st.st_mtime_ns):
                    continue
                data = await asyncio.to_thread((self.root / rel).read_bytes)
                if seen is not None and seen.digest == _digest(data):
                    seen.mtime_ns, seen.size = st.st_mtime_ns, st.st_size
                    continue
                changed.append((rel, data, st))
            for rel, data, st in changed:
                etag = await self.store.put(f"{self.prefix}/{rel}", data)
                self._seen[rel] = _Seen(len(data), st.st_mtime_ns, _digest(data), etag)
            gone = [rel for rel in self._seen if rel not in found]
            if gone:
                await self.store.delete(f"{self.prefix}/{rel}" for rel in gone)
                for rel in gone:
                    del self._seen[rel]
            return len(changed) + len(gone)

    def drop(self) -> None:
        """Remove the local copy (the session's lane was released); the store keeps it all."""
        shutil.rmtree(self.root, ignore_errors=True)
        self._seen.clear()


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write(path: Path, data: bytes) -> os.stat_result:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".soong-tmp-{secrets.token_hex(8)}")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return os.stat(path, follow_symlinks=False)


def _scan(root: Path) -> dict[str, os.stat_result]:
    """Regular files below the areas, by path relative to ``root`` (links not followed)."""
    found: dict[str, os.stat_result] = {}
    for area in AREAS:
        for folder, dirs, files in os.walk(root / area):
            dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
            for name in files:
                if name.startswith(".soong-tmp-"):
                    continue
                path = os.path.join(folder, name)
                try:
                    st = os.stat(path, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if os.path.isfile(path) and not os.path.islink(path):
                    found[os.path.relpath(path, root)] = st
    return found
