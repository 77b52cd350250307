"""Session files by logical key, on this host or in an S3-compatible store (docs/architecture.md,
"Files"): the port :class:`FileStore` and :func:`open_file_store`, which builds the configured
engine and proves it usable before a service starts."""

from __future__ import annotations

from agent_core.config.schema import Settings
from agent_core.files.port import (
    Download,
    FileStore,
    FileStoreError,
    StoredObject,
    VersionConflict,
    artifact_key,
    check_key,
    join_key,
    put_if,
    read_versioned,
    session_prefix,
)

__all__ = [
    "Download",
    "FileStore",
    "FileStoreError",
    "StoredObject",
    "VersionConflict",
    "artifact_key",
    "build_file_store",
    "check_key",
    "join_key",
    "open_file_store",
    "put_if",
    "read_versioned",
    "session_prefix",
]


def build_file_store(settings: Settings) -> FileStore:
    """The engine ``[files]`` names, unchecked (no I/O)."""
    if settings.files.engine == "s3":
        from agent_core.files.s3 import S3FileStore  # obstore loads only where it is used

        return S3FileStore(settings.files.s3)
    from agent_core.files.local import LocalFileStore

    return LocalFileStore(settings.home)


async def open_file_store(settings: Settings) -> FileStore:
    """The configured engine once :meth:`FileStore.check` passed: a missing bucket, refused
    credentials or an unreachable endpoint is a ``ConfigError`` naming which, at start-up."""
    store = build_file_store(settings)
    await store.check()
    return store
