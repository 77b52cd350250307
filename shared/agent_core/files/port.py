"""The file store port: every session file (uploads, workspace areas, artifacts) by a logical key.

A key is a ``/``-separated relative name such as
``accounts/<account>/sessions/<session>/output/report.md``: never a host path, so a key written on
one host names the same file on every other. Engines: ``local`` (the layout under the home,
:mod:`agent_core.files.local`) and ``s3`` (one bucket of an S3-compatible store,
:mod:`agent_core.files.s3`).

Contract every engine keeps:

- a write is atomic: readers see the old object or the whole new one, never a part; a write that
  fails or is cut (an upload over its limit, a store that went away) leaves no object behind;
- ``put`` with ``if_match`` writes only over the object of that ETag and ``if_absent`` only where
  there is none; otherwise :class:`VersionConflict` (a ``FileStoreError`` ``file_changed``;
  nothing written). An ETag names one version: a write never gives a file back an ETag it had
  before, so a read-modify-write that passes its ``if_match`` lost no one's edit
  (:func:`read_versioned` and :func:`put_if` are that loop's two halves);
- ``append_lines`` adds whole lines at an object's end and loses none of several writers'
  lines: a log grows by what is added, not by a rewrite of all it holds (the local engine);
- a missing object is :class:`FileStoreError` ``file_not_found``; a store that cannot be reached
  now is ``file_store_unavailable`` (``retryable``: the caller waits and tries again).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal, Protocol

from agent_core.errors import AgentCoreError

__all__ = [
    "APPEND_ATTEMPTS",
    "CHUNK",
    "Download",
    "FileStore",
    "FileStoreError",
    "StoredObject",
    "VersionConflict",
    "append_by_rewrite",
    "artifact_key",
    "artifact_prefix",
    "check_key",
    "join_key",
    "not_found",
    "put_if",
    "read_versioned",
    "session_prefix",
    "unavailable",
]

# One read or write chunk: what a download streams per step.
CHUNK: Final = 64 * 1024
# Rewrites an append tries where the engine cannot append in place (:func:`append_by_rewrite`):
# each lost race means another writer's lines went in, so only a stampede on one key exhausts
# them.
APPEND_ATTEMPTS: Final = 20


class FileStoreError(AgentCoreError):
    """The file store refused or failed an operation; ``code`` says which (module docstring)."""

    error_type = "file_store_error"


class VersionConflict(FileStoreError):
    """A conditional write found another version of the object than the one it was given (or an
    object where it expected none): nothing was written; read again, redo the change, retry."""

    def __init__(self, key: str) -> None:
        super().__init__("file_changed", f"{key.rsplit('/', 1)[-1]} changed since it was read")


def unavailable(what: str) -> FileStoreError:
    """The store cannot be reached now: retryable (a 503 with Retry-After at the gateway)."""
    return FileStoreError(
        "file_store_unavailable",
        f"the file store is not reachable ({what}); try again shortly",
        retryable=True,
    )


def not_found(key: str) -> FileStoreError:
    """No object at ``key`` (the message names the last component only: keys hold ids)."""
    return FileStoreError("file_not_found", f"no file {key.rsplit('/', 1)[-1]!r}")


@dataclass(frozen=True, slots=True)
class StoredObject:
    """One object: its key, size, last change and the engine's version tag."""

    key: str
    size: int
    modified_at: datetime
    etag: str | None


@dataclass(frozen=True, slots=True)
class Download:
    """An object being read: its size and ETag, then its bytes in chunks (read them once)."""

    size: int
    etag: str | None
    chunks: AsyncIterator[bytes]


def check_key(key: str) -> str:
    """``key`` when it is a relative ``/``-separated name whose parts are neither empty, ``.``
    nor ``..`` and hold no NUL or backslash; else ``FileStoreError`` ``invalid_key``."""
    parts = key.split("/")
    if not key or any(p in ("", ".", "..") or "\x00" in p or "\\" in p for p in parts):
        raise FileStoreError(
            "invalid_key", "a file key is a relative name without '..', NUL or '\\'"
        )
    return key


def join_key(*parts: str) -> str:
    """The key of ``parts`` joined by ``/``, checked."""
    return check_key("/".join(p.strip("/") for p in parts if p))


def session_prefix(account_id: str, session_id: str) -> str:
    """Where a session's workspace lives: its areas are ``<prefix>/input/…`` and so on."""
    return join_key("accounts", account_id, "sessions", session_id)


def artifact_prefix(session_id: str) -> str:
    """Where the storage-writer's files of a session live (offloaded JSON blocks)."""
    return join_key("artifacts", session_id)


def artifact_key(session_id: str, name: str) -> str:
    """The key of a file the storage-writer moved out of a row (an offloaded JSON block)."""
    return join_key(artifact_prefix(session_id), name)


class FileStore(Protocol):
    """The port (module docstring). Implementations: ``LocalFileStore``, ``S3FileStore``."""

    engine: Literal["local", "s3"]

    async def check(self) -> None:
        """Prove the store usable at start-up, or raise ``ConfigError`` naming what is wrong
        (``files_bucket_missing``, ``files_credentials_refused``, ``files_unreachable``)."""
        ...

    async def put(
        self,
        key: str,
        data: bytes,
        *,
        if_match: str | None = None,
        if_absent: bool = False,
        sync: bool = True,
    ) -> str | None:
        """Write ``data`` at ``key`` atomically (conditions: module docstring); its new ETag.
        Durable when it returns, unless ``sync=False``: for a caller that tells a torn object
        from a whole one itself (its key names its content's hash), the local engine then skips
        the fsync; an object store's write is durable either way."""
        ...

    async def append_lines(self, key: str, data: bytes) -> None:
        """Add ``data`` (whole lines: it ends with a newline) at the end of the object at
        ``key``, creating it; durable when it returns. A tail that a writer cut short left
        without its newline is dropped first, so a line is never glued to a torn one. Appends
        racing on one key all land, in some order (``VersionConflict`` only when an object
        store's rewrite lost the race :data:`APPEND_ATTEMPTS` times)."""
        ...

    def put_blocking(self, key: str, data: bytes) -> None:
        """:meth:`put` for a caller on a thread of its own (the storage-writer's write thread):
        durable when it returns."""
        ...

    async def upload(self, key: str, chunks: AsyncIterator[bytes]) -> int:
        """Write what ``chunks`` yields at ``key`` once it all arrived; its size. If ``chunks``
        raises (a body over its limit, a cut connection), nothing is written."""
        ...

    async def get(self, key: str) -> tuple[bytes, str | None]:
        """The whole object at ``key`` and its ETag."""
        ...

    async def get_many(self, keys: Sequence[str]) -> list[tuple[bytes, str | None] | None]:
        """Each of ``keys``' whole object and ETag, in order; ``None`` for a key with no object.
        One call for a handful of small objects read together (a run's memory files): the local
        engine reads them on the calling thread (cheaper than a trip to a worker thread for
        files this small), the S3 engine concurrently."""
        ...

    async def open(self, key: str) -> Download:
        """Start reading ``key`` (``file_not_found`` raised here, before any byte is sent)."""
        ...

    async def head(self, key: str) -> StoredObject | None:
        """The object at ``key``, ``None`` if there is none."""
        ...

    async def list(self, prefix: str, *, limit: int) -> list[StoredObject]:
        """Objects below ``prefix/`` (at any depth), by key, at most ``limit``."""
        ...

    async def delete(self, keys: Iterable[str]) -> None:
        """Remove ``keys`` (a missing one is no error)."""
        ...

    async def delete_prefix(self, prefix: str) -> None:
        """Remove every object below ``prefix/``."""
        ...

    def delete_prefix_blocking(self, prefix: str) -> None:
        """:meth:`delete_prefix` for a caller on a thread of its own (the storage-writer's)."""
        ...

    async def close(self) -> None:
        """Release connections (idempotent)."""
        ...


async def read_versioned(store: FileStore, key: str) -> tuple[bytes | None, str | None]:
    """The object at ``key`` and its version (ETag), or ``(None, None)`` when there is none."""
    try:
        return await store.get(key)
    except FileStoreError as exc:
        if exc.code == "file_not_found":
            return None, None
        raise


async def put_if(store: FileStore, key: str, data: bytes, expected: str | None) -> str | None:
    """Write ``data`` at ``key`` only over version ``expected`` (as :func:`read_versioned`
    returned it); ``expected=None`` creates the object only where there is none. Raises
    :class:`VersionConflict` when another writer got there first. Returns the new version."""
    return await store.put(key, data, if_match=expected, if_absent=expected is None)


def _whole_lines(data: bytes) -> bytes:
    """``data`` up to its last newline: what is left of a log whose last write was cut short."""
    return data if not data or data.endswith(b"\n") else data[: data.rfind(b"\n") + 1]


async def append_by_rewrite(store: FileStore, key: str, data: bytes) -> None:
    """:meth:`FileStore.append_lines` for an engine that cannot append in place (an object
    store): the object read, its whole lines and ``data`` written back over that version,
    again when another writer got there first; :class:`VersionConflict` after
    :data:`APPEND_ATTEMPTS` tries."""
    for _ in range(APPEND_ATTEMPTS):
        old, version = await read_versioned(store, key)
        try:
            await put_if(store, key, _whole_lines(old or b"") + data, version)
            return
        except VersionConflict:
            continue
    raise VersionConflict(key)
